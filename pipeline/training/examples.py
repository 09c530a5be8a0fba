"""Training examples and dev sets: labelled pairs from a dataset, drawn into batches for a model's loss.

Examples come from a dataset's labelled candidates (`negatives="labelled"`: WikiQA/TrecQA answer candidates, the
judged part of DL19's top-100), or from a BM25 run (`negatives="bm25"`: relevant documents as positives, the other
top-`depth` hits as hard negatives), or have sampled negatives (`negatives="keyword"|"random"`: keyword-BERT's
rule or uniform, pipeline/training/negatives.py). A candidate is positive when its qrels label is >= `min_rel` (default: the
dataset's relevance level, 2 on TREC DL). Pairs carry the topic's extra fields (e.g. keywords) and the candidate's
(the run's `doc_fields`, e.g. a tweet's URL).

`balance="length"` ([R], the LCQMC diagnosis of eval/KEYWORD_BERT.md section 8.2: LCQMC's dev pairs are labelled
by their length, the shortest tenth all non-matches, where the test pairs are not) keeps, within each tenth of the
pairs by length (characters of query + document), as many positives as negatives: the larger side is subsampled
(seeded), and a tenth with one label only is dropped. The label then says nothing of the length.

An epoch is a seeded list of batches; a batch is a list of groups (pairs a pairwise loss compares), drawn by the
model's `sampling` (pipeline/rerank/model.py): "pointwise" (a group = one pair), "pairs" (a positive and
`negatives_per_positive` negatives of its query), "queries" (a query's positives and sampled negatives),
"positives" (one positive pair; other rows of the batch are its negatives) or, with a teacher, "listwise" (a query's
candidates in groups of `teacher_group`, pipeline/training/distill.py). `train_batch_size` groups per batch.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

import torch

from pipeline.errors import ConfigError
from pipeline.rerank.pairs import CandidateTexts, Pair, pairs_of, scores_by_query
from pipeline.training.options import kept_queries

if TYPE_CHECKING:
    from pipeline.data.runs import Run
    from pipeline.training.options import TrainOptions

Group = list[Pair]


@dataclass
class Examples:
    """Labelled (query, document) pairs: texts by id, 0/1 labels by query, the topics' and the documents' extra
    fields."""

    queries: dict[str, str]
    texts: dict[str, str]
    labels: dict[str, dict[str, float]]  # qid -> docid -> 0/1 (a teacher's z-score: distill.py)
    query_fields: dict[str, Mapping] = field(default_factory=dict)
    doc_fields: dict[str, Mapping] = field(default_factory=dict)

    @classmethod
    def of(cls, topics, run: "Run", labels: dict[str, dict[str, float]]) -> "Examples":
        """The examples of `labels`, with the queries and extra fields of `topics` and the texts and candidate fields
        of `run` (those the labels use)."""
        used = {d for docs in labels.values() for d in docs}
        return cls({q: topics[q] for q in labels}, {d: run.texts[d] for d in used}, labels,
                   {q: topics.extra[q] for q in labels if q in topics.extra},
                   {d: run.doc_fields[d] for d in used if d in run.doc_fields})

    def pair(self, qid: str, docid: str) -> Pair:
        return Pair(qid, docid, self.queries[qid], self.texts[docid], query_fields=self.query_fields.get(qid, {}),
                    doc_fields=self.doc_fields.get(docid, {}), label=float(self.labels[qid][docid]))

    def pointwise(self) -> list[Pair]:
        return [self.pair(qid, docid) for qid, docs in self.labels.items() for docid in docs]

    def groups(self, sampling: str, generator: torch.Generator, per_positive: int = 1) -> list[Group]:
        """One epoch's groups for `sampling`, negatives drawn with `generator` (seeded: the same epoch again);
        `per_positive`: negatives per positive ("pairs", "queries"), or the group size ("listwise")."""
        if sampling == "pointwise":
            return [[pair] for pair in self.pointwise()]
        if sampling == "listwise":  # a teacher's targets (distill.py): each query's candidates shuffled, in groups
            groups = []
            for qid, docs in self.labels.items():
                ids = list(docs)
                order = [ids[i] for i in torch.randperm(len(ids), generator=generator).tolist()]
                groups += [[self.pair(qid, d) for d in order[i:i + per_positive]]
                           for i in range(0, len(order), per_positive)]
            return [group for group in groups if len(group) > 1]
        groups = []
        for qid, docs in self.labels.items():
            positives = [d for d, label in docs.items() if label > 0]
            negatives = [d for d, label in docs.items() if label <= 0]
            if sampling == "positives":
                groups += [[self.pair(qid, p)] for p in positives]
                continue
            if not negatives or not positives:
                continue
            drawn = [[negatives[i] for i in torch.randint(len(negatives), (per_positive,), generator=generator).tolist()]
                     for _ in positives]
            if sampling == "pairs":
                groups += [[self.pair(qid, p)] + [self.pair(qid, n) for n in ns] for p, ns in zip(positives, drawn)]
            else:  # queries
                chosen = list(dict.fromkeys(n for ns in drawn for n in ns))
                groups.append([self.pair(qid, d) for d in positives + chosen])
        return groups

    def summary(self) -> dict:
        pairs = [label for docs in self.labels.values() for label in docs.values()]
        if any(label not in (0, 1) for label in pairs):  # a teacher's scores (distill.py): no positives to count
            return {"queries": len(self.labels), "pairs": len(pairs)}
        return {"queries": len(self.labels), "pairs": len(pairs), "positives": sum(pairs)}


def epoch_batches(examples: Examples, sampling: str, options: "TrainOptions", generator: torch.Generator) -> list[list[Group]]:
    """One epoch of batches in a seeded order. Pointwise and pairs: shuffled groups, sorted by length within windows
    of `bucket` batches (less padding), batches in shuffled order. Queries and positives: shuffled groups."""
    size = options.train_batch_size
    shuffle = lambda items: [items[i] for i in torch.randperm(len(items), generator=generator).tolist()]  # noqa: E731
    groups = shuffle(examples.groups(sampling, generator, group_count(sampling, options)))
    if sampling in ("queries", "positives", "listwise") or options.bucket == 1:
        return [groups[i:i + size] for i in range(0, len(groups), size)]
    length = lambda group: len(group[0].query) + max(len(p.text) for p in group)  # noqa: E731
    batches = []
    for start in range(0, len(groups), size * options.bucket):
        window = sorted(groups[start:start + size * options.bucket], key=length)
        batches += [window[i:i + size] for i in range(0, len(window), size)]
    return shuffle(batches)


def epoch_steps(examples: Examples, sampling: str, options: "TrainOptions") -> int:
    """Batches per epoch (the group count does not depend on the random draw)."""
    groups = len(examples.groups(sampling, torch.Generator().manual_seed(0), group_count(sampling, options)))
    return -(-groups // options.train_batch_size)


def group_count(sampling: str, options: "TrainOptions") -> int:
    """`Examples.groups`' count: the group size of a teacher's "listwise" groups, else negatives per positive."""
    return options.teacher_group if sampling == "listwise" else options.negatives_per_positive


# -- from datasets -----------------------------------------------------------------------------------------------

def training_candidates(dataset, depth: int) -> "Run":
    """The dataset's shipped candidates, else BM25's top `depth` (k1 0.9, b 0.4: `bm25()`'s defaults) on its own
    index (texts from the index), less the documents a topic excludes (a question-retrieval query's own question:
    never a negative of itself)."""
    run = dataset.run()
    if run is not None:
        return run
    from pipeline.data.runs import Run
    from pipeline.retrieve.index import dataset_index_for, open_index

    topics = dataset.topics()
    excluded = max((len(fields.get("exclude", ())) for fields in topics.extra.values()), default=0)
    index = open_index(str(dataset_index_for(dataset)))
    run = Run(index.search_many(topics.queries, depth + excluded, 0.9, 0.4, 1), tag="bm25")
    run = run.excluding(topics).cut(depth)
    return _with_texts(run, dataset, {d for hits in run.ranking.values() for d, _ in hits})


def _with_texts(run: "Run", dataset, docids: set[str], known: dict[str, str] | None = None) -> "Run":
    """`run` with the texts of `docids` it lacks, from `known` (texts the dataset shipped with its run), else from the
    dataset's index: as a reranker stage gets them (pipeline/rerank/pairs.py `CandidateTexts`), a document the index
    does not hold is an error."""
    shipped = {d: known[d] for d in docids if d not in run.texts and d in (known or {})}
    if shipped:
        run = type(run)(run.ranking, {**run.texts, **shipped}, run.tag, run.doc_fields)
    if all(d in run.texts for d in docids):
        return run
    from pipeline.retrieve.index import dataset_index_for, open_index

    texts = CandidateTexts(open_index(str(dataset_index_for(dataset))), f"training data of {dataset.name}")
    return type(run)(run.ranking, texts.lookup(sorted(docids), run.texts), run.tag, run.doc_fields)


def examples_from(dataset, negatives: str = "labelled", depth: int = 100, min_rel: int | None = None,
                  max_queries: int | None = None, sampling=None, hold_out: str = "") -> Examples:
    """Training pairs of `dataset` (see the module docstring for the two kinds of negatives); with `sampling`
    (a `NegativeSampling`, negatives=keyword|random) the labelled (else BM25) examples' negatives are replaced by
    sampled ones (pipeline/training/negatives.py)."""
    if sampling is not None:
        from pipeline.training.negatives import sample_negatives

        base = "labelled" if "run" in dataset.provides else "bm25"
        return sample_negatives(examples_from(dataset, base, depth, min_rel, max_queries, hold_out=hold_out),
                                sampling)
    topics, qrels = dataset.topics(), dataset.qrels()
    level = min_rel if min_rel is not None else dataset.rel_level
    qids = kept_queries([q for q in topics if q in qrels], hold_out)[:max_queries]  # hold_out: a fold left out
    labels: dict[str, dict[str, int]] = {}
    if negatives == "labelled":
        run = dataset.run()
        if run is None:
            raise ConfigError(f"{dataset.name} ships no labelled candidates; train with negatives=bm25 instead",
                              field="negatives")
        texts = run.texts
        for qid in qids:
            judged = qrels[qid]
            labels[qid] = {d: int(judged[d] >= level) for d, _ in run.ranking.get(qid, []) if d in judged and d in texts}
    else:
        candidates = training_candidates(dataset, depth)
        run = candidates.cut(depth)
        relevant = {qid: {d for d, label in qrels[qid].items() if label >= level} for qid in qids}
        if "docs" in dataset.provides:  # a relevant document cut from (or never in) the candidates: its text too
            run = _with_texts(run, dataset, set().union(*relevant.values()), candidates.texts)
        texts = run.texts
        for qid in qids:
            labels[qid] = {d: 0 for d, _ in run.ranking.get(qid, []) if d not in relevant[qid] and d in texts}
            labels[qid].update({d: 1 for d in sorted(relevant[qid]) if d in texts})
    labels = {qid: docs for qid, docs in labels.items() if docs}
    if not labels:
        raise ConfigError(f"{dataset.name}: no labelled training pairs (negatives={negatives}, min_rel={level})")
    return Examples.of(topics, run, labels)


def length_balanced(examples: Examples, seed: int, bins: int = 10) -> Examples:
    """`examples` with, in each of `bins` length quantiles, as many positives as negatives (module docstring)."""
    pairs = sorted((len(examples.queries[q]) + len(examples.texts[d]), q, d) for q, docs in examples.labels.items()
                   for d in docs)                                                   # (length, qid, docid)
    edges = [pairs[len(pairs) * i // bins][0] for i in range(1, bins)]
    by_bin: dict[tuple[int, int], list[tuple[str, str]]] = {}
    for length, qid, docid in pairs:
        by_bin.setdefault((sum(length >= e for e in edges), examples.labels[qid][docid]), []).append((qid, docid))
    generator, kept = torch.Generator().manual_seed(seed), set()
    for b in range(bins):
        sides = [by_bin.get((b, 0), []), by_bin.get((b, 1), [])]
        n = min(len(side) for side in sides)
        for side in sides:
            kept.update(side[i] for i in torch.randperm(len(side), generator=generator)[:n].tolist())
    labels = {q: {d: label for d, label in docs.items() if (q, d) in kept} for q, docs in examples.labels.items()}
    labels = {q: docs for q, docs in labels.items() if docs}
    used = {d for docs in labels.values() for d in docs}
    return Examples({q: examples.queries[q] for q in labels}, {d: examples.texts[d] for d in used}, labels,
                    {q: f for q, f in examples.query_fields.items() if q in labels},
                    {d: f for d, f in examples.doc_fields.items() if d in used})


@dataclass
class DevSet:
    """A dev dataset's candidates (with texts), qrels and relevance level, for per-epoch evaluation."""

    name: str
    topics: object
    run: "Run"
    qrels: dict
    rel_level: int
    truncated: int = 0  # dev inputs the model truncated at the last evaluation

    @classmethod
    def of(cls, dataset, depth: int = 100) -> "DevSet":
        run = training_candidates(dataset, depth).cut(depth)
        return cls(dataset.name, dataset.topics().subset(run.ranking), run, dataset.qrels(), dataset.rel_level)

    def evaluate(self, model, options: "TrainOptions", device) -> dict:
        """Rerank the candidates; the dev measures, plus "loss" (the model's own loss on binary labels, one group
        per query) and its parts ("loss:<part>")."""
        from dataclasses import replace

        from pipeline.data.runs import Run
        from pipeline.evaluation import evaluate
        from pipeline.rerank.scoring import predict

        pairs = [replace(p, label=float(self.qrels.get(p.qid, {}).get(p.docid, 0) >= self.rel_level))
                 for p in pairs_of(self.topics, self.run, self.run.texts)]
        scored = predict(model, pairs, options.eval_batch_size, device, options.scoring_amp, with_loss=True,
                         desc=f"dev {self.name}")  # the training's own precision (none: fp32 on CUDA too)
        scores = scores_by_query(pairs, scored.scores)
        measures = ["AP", "RR@10", "nDCG@10"] + ([options.measure] if options.measure != "loss" else [])
        result = evaluate(Run.from_scores(scores), self.qrels, list(dict.fromkeys(measures)), rel_level=self.rel_level)
        result["loss"] = scored.loss
        result.update({f"loss:{name}": value for name, value in (scored.loss_parts or {}).items()})
        self.truncated = scored.truncated
        return result

    def key(self, measure: str) -> str:
        """The key of `measure` in `evaluate`'s result ("AP" is "AP(rel=2)" on graded qrels; "loss" is itself)."""
        from pipeline.evaluation import parse_measure

        return measure if measure == "loss" else str(parse_measure(measure, self.rel_level))


def dataset_fingerprint(dataset) -> str:
    """What a dataset's contents are, from the checksums of its files (no file is read) and how they are read where
    that is not the default (`Dataset.reading`; a dataset without any keys as it did before there was one)."""
    files = sorted((key, file.sha256, member or "") for key, (file, member) in dataset.files.items())
    reading = dataset.reading()
    blob = json.dumps([dataset.name, files, *([reading] if reading else [])], sort_keys=True)
    return hashlib.sha1(blob.encode()).hexdigest()

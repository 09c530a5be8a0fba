"""The question rankings of the keyword-BERT benchmark (bench/keyword_bert.py): BM25's candidates as
pairs (`Ranking`: Success@k, shortcuts, the runs of BM25 and of a ranker that the toolkit fuses), and their export
for rankers trained and scored on a machine without Java (a GPU machine), measured here.

BM25 needs Lucene; a lent GPU machine has torch and transformers but no Java. The ranking half of
bench/keyword_bert.py therefore splits in three steps over one folder R:

    # here, with Lucene: the BM25 candidates the rankers train on and rerank, exported
    python -m bench.keyword_bert --dataset lcqmc --ranking-queries 2000 --fusion --export-rankings R
    # there: each system and seed's ranker trained on R/train and its scores of R/test.json, R/tune.json written
    python -m bench.keyword_bert --dataset lcqmc --bert B --seeds 0 1 2 --device cuda --score-rankings R
    # here: Success@k, the dev-tuned fusion with BM25 and the paired tests, from R/scores/
    python -m bench.keyword_bert --dataset lcqmc --bert B --seeds 0 1 2 --ranking-queries 2000 \
        --fusion --rankings-from R --record

R/train is a dataset folder (topics, qrels, corpus, BM25 run; `run_texts: corpus`, pipeline/data/sets/local.py)
holding exactly what the ranker's recipe (`--ranking-train questions`) trains on: each <dataset>/questions-dev
query with BM25's top `--train-depth` (its own question excluded) and its paired question, so `negatives=bm25`
finds the run shipped and needs no index. R/test.json and R/tune.json are the rankings themselves (pairs, BM25
scores, qrels). The measures are computed here, where the rankings are built again from Lucene and must list the
same pairs in the same order as the exported ones (else an error says so).
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from pipeline.data.files import atomic_write
from pipeline.errors import ConfigError

MEASURES = ("Success@1", "Success@10")
SPLITS = ("test", "tune")


@dataclass
class Ranking:
    """BM25's top `depth` (less the query's own question) of some question-retrieval queries, as pairs."""

    pairs: list
    bm25: list[float]                       # BM25's score of each pair
    qrels: dict[str, dict[str, int]]

    def per_query(self, scores) -> dict[str, dict[str, float]]:
        """measure -> qid -> value of the run that `scores` (one a pair) make, or of a `Run` of these candidates."""
        from pipeline.data.runs import Run
        from pipeline.evaluation import per_query

        return per_query(scores if isinstance(scores, Run) else self.run(scores), self.qrels, list(MEASURES))

    def run(self, scores: list[float]):
        """The run that `scores` (one a pair) make of the candidates."""
        from pipeline.data.runs import Run
        from pipeline.rerank.pairs import scores_by_query

        return Run.from_scores(scores_by_query(self.pairs, scores))

    def runs(self, scores: list[float]) -> list:
        """[BM25's run, the ranker's run (`scores`)]: what `--fusion` fuses (pipeline.rerank.fusion.fuse)."""
        return [self.run(self.bm25), self.run(scores)]

    def random_order(self) -> dict[str, float]:
        """The expected Success@k of a random order of each query's candidates (0 where the paired one is absent)."""
        by_query: dict[str, list] = {}
        for pair in self.pairs:
            by_query.setdefault(pair.qid, []).append(self.qrels.get(pair.qid, {}).get(pair.docid, 0) > 0)
        k = {m: int(m.split("@")[1]) for m in MEASURES}
        return {m: round(statistics.fmean(min(1.0, any(rel) * k[m] / len(rel)) for rel in by_query.values()), 4)
                for m in MEASURES}

    def shortcuts(self, scores: list[float]) -> dict[str, float]:
        """Mean per-query Spearman correlation of the scores with the candidate's length (characters) and with its
        character Jaccard overlap with the query (queries whose scores or feature are all equal left out)."""
        from scipy.stats import spearmanr

        by_query: dict[str, list[tuple]] = {}
        for pair, score in zip(self.pairs, scores):
            a, b = set(pair.query), set(pair.text)
            by_query.setdefault(pair.qid, []).append((score, len(pair.text), len(a & b) / max(1, len(a | b))))
        out = {}
        for k, feature in ((1, "length"), (2, "overlap")):
            rhos = [spearmanr([r[0] for r in rows], [r[k] for r in rows])[0] for rows in by_query.values()
                    if len({r[0] for r in rows}) > 1 and len({r[k] for r in rows}) > 1]
            out[feature] = round(statistics.fmean(rhos), 4) if rhos else float("nan")
        return out


def ranking_of(dataset_name: str, depth: int, queries: int | None) -> Ranking:
    """BM25's top `depth` less the query's own question (as the eval/ configs' specs) on the first `queries`."""
    from pipeline.data.registry import get_dataset
    from pipeline.rerank.pairs import pairs_of
    from pipeline.spec import parse

    questions = get_dataset(dataset_name)
    topics = questions.topics()
    topics = topics.subset(list(topics)[:queries]) if queries else topics
    run = parse(f"bm25(hits={depth}) >> exclude()").bind(questions)(topics)
    texts = {doc["id"]: doc["contents"] for doc in questions.docs()}
    qrels = {qid: judged for qid, judged in questions.qrels().items() if qid in topics}
    return Ranking(pairs_of(topics, run, texts), [s for hits in run.ranking.values() for _, s in hits], qrels)


def export_rankings(args, folder: Path, ranking, tuning) -> None:
    """Write R/train (the ranker's training data), R/test.json and R/tune.json (`tuning`: None without --fusion)."""
    from pipeline.data.registry import get_dataset
    from pipeline.data.runs import Run, write_run
    from pipeline.data.topics import Topics, write_topics
    from pipeline.training.examples import training_candidates

    questions = get_dataset(f"{args.dataset}/questions-dev")
    run = training_candidates(questions, args.train_depth).cut(args.train_depth)
    topics, qrels = questions.topics(), questions.qrels()
    qids = [q for q in run.ranking if q in qrels]
    wanted = {d for q in qids for d, _ in run.ranking[q]} | {d for q in qids for d in qrels[q]}
    train = folder / "train"
    train.mkdir(parents=True, exist_ok=True)
    write_topics(Topics({q: topics[q] for q in qids}), train / "topics.tsv")
    with atomic_write(train / "qrels.txt") as out:
        out.writelines(f"{q} 0 {d} {label}\n" for q in qids for d, label in qrels[q].items())
    with atomic_write(train / "corpus.jsonl") as out:
        out.writelines(json.dumps({"id": doc["id"], "contents": doc["contents"]}, ensure_ascii=False) + "\n"
                       for doc in questions.docs() if doc["id"] in wanted)
    write_run(Run({q: run.ranking[q] for q in qids}, tag="bm25"), train / "run.trec")
    spec = {"name": f"{args.dataset}-questions-dev-bm25-top{args.train_depth}", "kind": "trec",
            "language": questions.language, "rel_level": questions.rel_level, "run_texts": "corpus",
            "description": f"{questions.name}: BM25's top {args.train_depth} (own question excluded) and the paired "
                           "question, exported by bench/_question_ranking.py",
            "files": {"topics": "topics.tsv", "qrels": "qrels.txt", "corpus": "corpus.jsonl", "run": "run.trec"}}
    with atomic_write(train / "dataset.yaml") as out:
        json.dump(spec, out, ensure_ascii=False, indent=2)  # JSON is YAML
    for split, chosen in zip(SPLITS, (ranking, tuning)):
        if chosen is not None:
            with atomic_write(folder / f"{split}.json") as out:
                json.dump({"pairs": [[p.qid, p.docid, p.query, p.text] for p in chosen.pairs], "bm25": chosen.bm25,
                           "qrels": chosen.qrels}, out, ensure_ascii=False)


def load_ranking(path: Path) -> Ranking:
    """A `Ranking` from an exported R/test.json or R/tune.json."""
    from pipeline.rerank.pairs import Pair

    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return Ranking([Pair(*row) for row in data["pairs"]], data["bm25"], data["qrels"])


def scores_path(folder: Path, name: str, seed: int) -> Path:
    return Path(folder) / "scores" / f"{name}-seed{seed}.json"


def check_exported(folder: Path, rankings: dict) -> None:
    """The rankings built here (split -> Ranking) are the exported ones: the same (query, candidate) pairs in the
    same order, so that the scores written for those fit these (read once, before any scores)."""
    for split, ranking in rankings.items():
        exported = [(row[0], row[1]) for row in json.loads((folder / f"{split}.json").read_text("utf-8"))["pairs"]]
        if exported != [(p.qid, p.docid) for p in ranking.pairs]:
            raise ConfigError(f"the pairs of {folder}/{split}.json do not list this run's pairs: export again with "
                              "the same --dataset, --depth, --ranking-queries and --tune-queries")


def exported_scores(folder: Path, name: str, seed: int, rankings: dict) -> dict[str, list[float]]:
    """The scores of `name` and `seed` for each of `rankings` (split -> the Ranking built here, `check_exported`):
    one score a pair."""
    path = scores_path(folder, name, seed)
    if not path.is_file():
        raise ConfigError(f"{path} is missing: run --score-rankings {folder} for {name}, seed {seed}")
    scores = json.loads(path.read_text(encoding="utf-8"))
    for split, ranking in rankings.items():
        if len(scores.get(split, ())) != len(ranking.pairs):
            raise ConfigError(f"{path} does not score the {len(ranking.pairs)} pairs of {folder}/{split}.json: run "
                              f"--score-rankings {folder} again")
    return {split: scores[split] for split in rankings}


"""The currency between stages: `Run` (qid -> ranked (docid, score) list), over `Topics` (qid -> query;
pipeline/data/topics.py).

Run files: TREC (`qid Q0 docid rank score tag`) and MS MARCO (`qid<TAB>pid<TAB>rank`), read with validation
(file, line and field named on error) and written atomically in a deterministic order: score descending,
then docid ascending -- the order Anserini breaks ties in. Ids and run tags follow the id rule
(pipeline/data/ids.py), in files and in a `Run` built in Python alike.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

from pipeline.data.files import atomic_write, json_digest, numbered_lines
from pipeline.data.ids import check_id, check_query_docs, id_problem, split_fields
from pipeline.data.outputs import keep_or_raise
from pipeline.data.topics import Topics
from pipeline.errors import InputError
from pipeline.validate import one_word, problem

RUN_FORMATS = ("trec", "msmarco")
COMMENT = "#"


def _rank_key(hit: tuple[str, float]):
    return (-hit[1], hit[0])


@dataclass
class Run:
    """Ranked lists by query. Each list is kept sorted: score descending, then docid ascending.

    `texts` optionally carries candidate passage texts (docid -> text) so that a reranker needs no index;
    `doc_fields` the candidates' other fields (docid -> {"url": ...}: a dataset's documents beyond their text),
    which reach a model as `Pair.doc_fields`; `features` a feature vector per hit (qid -> docid -> floats), which
    a feature union (`a ** b`, pipeline/stages/features.py) attaches and a learned ranker (`ltr(...)`) reads.
    """

    ranking: dict[str, list[tuple[str, float]]]
    texts: dict[str, str] = field(default_factory=dict)
    tag: str = "irpipe"
    doc_fields: dict[str, Mapping] = field(default_factory=dict)
    features: dict[str, dict[str, tuple[float, ...]]] = field(default_factory=dict)

    def __post_init__(self):
        """The id rule (pipeline/data/ids.py) over its query and document ids, as a run file has them."""
        check_query_docs(self.ranking, "Run")

    @classmethod
    def _derived(cls, ranking, texts, tag, doc_fields, features=None) -> "Run":
        """A run made of a checked run's parts (cut, excluding): its ids are not checked again."""
        run = cls.__new__(cls)
        run.ranking, run.texts, run.tag, run.doc_fields = ranking, texts, tag, doc_fields
        run.features = {qid: vectors for qid, vectors in (features or {}).items() if qid in ranking}
        return run

    @classmethod
    def from_scores(cls, scores: Mapping[str, Mapping[str, float]], texts=None, tag="irpipe",
                    doc_fields=None) -> "Run":
        ranking = {qid: sorted(((d, float(s)) for d, s in docs.items()), key=_rank_key) for qid, docs in scores.items()}
        return cls(ranking, dict(texts or {}), tag, dict(doc_fields or {}))

    def __len__(self) -> int:
        return len(self.ranking)

    def __iter__(self) -> Iterator[str]:
        return iter(self.ranking)

    def __getitem__(self, qid: str) -> list[tuple[str, float]]:
        return self.ranking[qid]

    def num_hits(self) -> int:
        return sum(len(hits) for hits in self.ranking.values())

    def cut(self, k: int) -> "Run":
        """The top `k` hits of every query (texts and fields of dropped candidates are dropped too)."""
        return self._part({qid: hits[:k] for qid, hits in self.ranking.items()})

    def subset(self, qids) -> "Run":
        """The hits of the queries `qids` that this run has, in that order (with their texts and fields), as
        Topics.subset keeps their queries."""
        return self._part({qid: self.ranking[qid] for qid in qids if qid in self.ranking})

    def _part(self, ranking: dict) -> "Run":
        """A run of `ranking`, a part of this one's, with the texts and fields of the documents it keeps."""
        kept = {d for hits in ranking.values() for d, _ in hits}
        return Run._derived(ranking, {d: t for d, t in self.texts.items() if d in kept}, self.tag,
                            {d: f for d, f in self.doc_fields.items() if d in kept}, self.features)

    def excluding(self, topics: Topics) -> "Run":
        """Each query's hits less the docids its topic lists under `exclude` (Topics.extra), e.g. the query's own
        copy in a question-retrieval index; queries without the field keep all their hits."""
        ranking = {}
        for qid, hits in self.ranking.items():
            excluded = set(topics.extra.get(qid, {}).get("exclude", ()))
            ranking[qid] = [hit for hit in hits if hit[0] not in excluded] if excluded else hits
        return Run._derived(ranking, self.texts, self.tag, self.doc_fields, self.features)

    def queries_not_in(self, topics: Topics) -> list[str]:
        """The query ids of this run that the topics lack (a reranker could not read their query)."""
        return [qid for qid in self.ranking if qid not in topics.queries]

    def to_dict(self) -> dict[str, dict[str, float]]:
        """qid -> docid -> score, the shape ir-measures accepts."""
        return {qid: dict(hits) for qid, hits in self.ranking.items()}

    def fingerprint(self) -> str:
        fields = [{d: dict(f) for d, f in self.doc_fields.items()}] if self.doc_fields else []
        features = [self.features] if self.features else []
        return json_digest([self.ranking, sorted(self.texts.items()), *fields, *features])  # none: as it always was

    def to_frame(self, topics: Topics | None = None):
        """A pandas DataFrame with PyTerrier's columns qid, docno, score, rank (+ text, + query given topics)."""
        from pipeline.data.frames import run_frame

        return run_frame(self.ranking, self.texts, topics.queries if topics is not None else None)

    @classmethod
    def from_frame(cls, frame, tag: str = "irpipe") -> "Run":
        """A run from a DataFrame with columns qid, docno, score (rank and text optional): PyTerrier's results."""
        from pipeline.data.frames import run_from_frame

        return cls(*run_from_frame(frame), tag)

    def write(self, path: str | Path, format: str = "trec", tag: str | None = None, digits: int = 6) -> Path:
        """Write atomically; `digits` decimals for scores (6 = Pyserini's own output)."""
        write_run(self, path, format=format, tag=tag, digits=digits)
        return Path(path)


def check_run_tag(owner: str, name: str, tag) -> None:
    """A ConfigError unless `tag` is one word: the last column of a TREC run file, which readers split on whitespace;
    and, like an id, printable (pipeline/data/ids.py)."""
    one_word(owner, name, tag, ": a run tag is the last column of a TREC run file")
    if id_problem(tag, "run tag"):
        raise problem(owner, name, f"{name}={tag!r}: {id_problem(tag, 'run tag')}")


def write_run(run: Run, path: str | Path, format: str = "trec", tag: str | None = None, digits: int = 6) -> None:
    if format not in RUN_FORMATS:
        raise ValueError(f"unknown run format {format!r}; expected one of {RUN_FORMATS}")
    tag = tag or run.tag
    check_run_tag("run file", "tag", tag)

    def write(target: Path) -> None:
        with atomic_write(target) as out:
            for qid, hits in run.ranking.items():
                for rank, (docid, score) in enumerate(hits, start=1):
                    if format == "trec":
                        out.write(f"{qid} Q0 {docid} {rank} {score:.{digits}f} {tag}\n")
                    else:
                        out.write(f"{qid}\t{docid}\t{rank}\n")

    keep_or_raise(path, write, "run")  # a write that fails after the work: the run is kept, the error says where


def read_run(path: str | Path, format: str | None = None) -> Run:
    """Read a TREC (6 columns) or MS MARCO (3 columns, tab-separated) run; the format is the first line's if not
    given, and every line must have it (trec_eval stops at a line of another format too).

    MS MARCO runs have no scores: a hit's score is minus its rank, so hits are placed by rank, in any line order, as
    the official MS MARCO script places them. A rank it would place elsewhere -- repeated (it keeps the later line),
    missing (it leaves the slot empty) or below 1 (rank 0 goes to its last slot) -- is an InputError naming the line.

    A line whose first non-blank character is `#` is a comment, as trec_eval 10.0 reads runs (9.0.8 reads it as a
    hit of the query "#"). Fields are split at ASCII whitespace, as trec_eval splits them; ids and the tag follow
    the id rule (pipeline/data/ids.py); a score is a decimal number (`12.5`, `-3e-2`) and a rank an integer, each
    in ASCII digits: what Python and trec_eval's atof / atoi both read as the same number.
    """
    scores: dict[str, dict[str, float]] = {}
    ranks: dict[str, dict[int, int]] = {}  # MS MARCO: qid -> rank -> line
    tag = None
    for number, line in numbered_lines(path):
        if line.lstrip().startswith(COMMENT):
            continue
        parts, printable = split_fields(line)
        format = format or _detected(parts, path, number)
        if len(parts) != FORMAT_COLUMNS[format][0]:
            raise InputError(path, _columns_message(format, parts), number, "columns")
        if format == "trec":
            qid, _, docid, rank, score_text, tag = parts
            score = _number(score_text, path, number, "score", float)
            _number(rank, path, number, "rank", int)
            if not printable:
                check_id(tag, path, number, "tag", "run tag")
                check_id(parts[1], path, number, "Q0", "Q0 field")  # every field printable: split as Python splits it
        else:
            qid, docid, rank_text = parts
            rank = _number(rank_text, path, number, "rank", int)
        if not printable:  # every field is an id already when the whole line is printable
            check_id(qid, path, number, "qid", "query id")
            check_id(docid, path, number, "docid", "document id")
        if format == "msmarco":
            score = -float(_placed(ranks.setdefault(qid, {}), rank, qid, path, number))
        docs = scores.setdefault(qid, {})
        if docid in docs:
            raise InputError(path, f"docid {docid!r} appears twice for query {qid!r}", number, "docid")
        docs[docid] = score
    for qid, lines in ranks.items():
        _no_missing_rank(lines, qid, path)
    return Run.from_scores(scores, tag=tag or "irpipe")


FORMAT_COLUMNS = {"trec": (6, "a TREC line", "qid Q0 docid rank score tag"),
                  "msmarco": (3, "an MS MARCO line", "qid pid rank")}


def _detected(parts: list[str], path, line: int) -> str:
    for name, (columns, _, _) in FORMAT_COLUMNS.items():
        if len(parts) == columns:
            return name
    raise InputError(path, f"expected 6 (qid Q0 docid rank score tag) or 3 (qid pid rank) columns, found "
                           f"{len(parts)}", line, "columns")


def _columns_message(format: str, parts: list[str]) -> str:
    columns, _, names = FORMAT_COLUMNS[format]
    run = "a TREC run" if format == "trec" else "an MS MARCO run"
    other = [kind for n, kind, _ in FORMAT_COLUMNS.values() if n == len(parts)]
    if other:  # a line of the other format
        return (f"{len(parts)} columns ({other[0]}) in {run} (the first line's format, {columns} columns: {names}): "
                "one run file holds one format")
    return f"expected {columns} ({names}) columns, found {len(parts)}"


def _placed(lines: dict[int, int], rank: int, qid: str, path, line: int) -> int:
    """`rank`, recorded for its query; a rank below 1 or given twice is an InputError."""
    if rank < 1:
        raise InputError(path, f"rank {rank} is not positive: MS MARCO ranks start at 1 (the official script would "
                               f"put rank {rank} in slot {1000 + rank} of 1000)", line, "rank")
    if rank in lines:
        raise InputError(path, f"rank {rank} of query {qid!r} is given twice (lines {lines[rank]} and {line}): the "
                               "official script would keep only the later passage", line, "rank")
    lines[rank] = line
    return rank


def _no_missing_rank(lines: dict[int, int], qid: str, path) -> None:
    """An InputError when the query's ranks are not 1..n: at the line of the first rank past a missing one."""
    if len(lines) == max(lines):
        return
    missing = next(rank for rank in range(1, max(lines)) if rank not in lines)
    after = min(rank for rank in lines if rank > missing)
    raise InputError(path, f"query {qid!r} has no rank {missing} but a rank {after}: the official script would "
                           f"leave rank {missing} empty and keep this passage at {after}; number the query's ranks "
                           "1, 2, 3, ...", lines[after], "rank")


_FORMS = {int: (re.compile(r"[+-]?[0-9]{1,18}"), "an integer (ASCII digits, at most 18)"),
          float: (re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"), "a decimal number such as 12.5 "
                  "or -3e-2")}


def _number(text: str, path, line: int, name: str, kind):
    """The number `text` is, read the same by Python and C (no `1_000`, `inf`, `0x1p3` or digits of other scripts)."""
    pattern, form = _FORMS[kind]
    if not pattern.fullmatch(text):
        raise InputError(path, f"{name} {text!r} is not {form}", line, name)
    value = kind(text)
    if kind is float and not math.isfinite(value):
        raise InputError(path, f"{name} {text!r} is not finite", line, name)
    return value

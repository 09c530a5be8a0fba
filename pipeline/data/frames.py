"""Runs and topics as pandas DataFrames with PyTerrier's column names, both ways, losslessly.

    topics.to_frame()           -> qid, query (+ one column per extra field, e.g. keywords; None where a query
                                   lacks it)
    run.to_frame(topics=None)   -> qid, docno, score, rank (0-based, PyTerrier's), + text where the run carries
                                   texts, + query when topics are given
    Topics.from_frame(df), Run.from_frame(df, tag)   the way back (a PyTerrier result frame goes in as it is)
    qrels_from_frame(df)        qrels of PyTerrier's qid, docno, label or ir_measures' query_id, doc_id, relevance

ir_measures' column names are read as PyTerrier's wherever a frame comes in: query_id as qid, doc_id as docno,
relevance as label (`pyterrier_columns`).

A run's row order is its ranking (score descending, docid ascending, as irpipe keeps it); coming back, each query's
hits are ordered by `rank` when the frame has one, else by score (ties: docno ascending). Query ids and docnos
become strings. Bad frames (missing columns, empty ids, scores that are not finite numbers, one docno with two
texts) raise InputError naming the row (its 0-based position) and column. The methods of `Run` and `Topics`
call the functions here, which take and give their fields (so this module needs no import of pipeline.data.runs).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pipeline.data.ids import id_problem
from pipeline.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

Ranking = dict[str, list[tuple[str, float]]]

TOPIC_COLUMNS = ("qid", "query")
QRELS_COLUMNS = ("qid", "docno", "label")
IR_MEASURES_COLUMNS = {"query_id": "qid", "doc_id": "docno", "relevance": "label"}  # ir_measures' name: PyTerrier's
WHERE = "DataFrame"


def _pandas():
    import pandas  # lazy: only frames need it

    return pandas


def is_frame(value) -> bool:
    """Whether `value` is a pandas DataFrame (without importing pandas where no frame can be)."""
    return type(value).__name__ == "DataFrame" and type(value).__module__.startswith("pandas")


def pyterrier_columns(frame: "pd.DataFrame") -> "pd.DataFrame":
    """The frame with ir_measures' column names as PyTerrier's (query_id: qid, doc_id: docno, relevance: label)."""
    columns = set(frame.columns)
    renamed = {old: new for old, new in IR_MEASURES_COLUMNS.items() if old in columns and new not in columns}
    return frame.rename(columns=renamed) if renamed else frame


def qrels_from_frame(frame: "pd.DataFrame") -> dict[str, dict[str, int]]:
    """qid -> docno -> label of a qrels frame (PyTerrier's or ir_measures' columns); labels are integers."""
    frame = pyterrier_columns(frame)
    _require(frame, QRELS_COLUMNS)
    qrels: dict[str, dict[str, int]] = {}
    for row, record in enumerate(frame[list(QRELS_COLUMNS)].to_dict("records")):
        qid, docno, label = _id(record["qid"], row, "qid"), _id(record["docno"], row, "docno"), record["label"]
        if _finite(label, row, "label") != int(label):
            raise InputError(WHERE, f"label {label!r} is not an integer", row, "label")
        if qrels.setdefault(qid, {}).setdefault(docno, int(label)) != int(label):
            raise InputError(WHERE, f"docno {docno!r} of query {qid!r} has two labels", row, "docno")
    return qrels


def topics_frame(queries: dict[str, str], extra: dict[str, dict]) -> "pd.DataFrame":
    fields = list(dict.fromkeys(key for fields in extra.values() for key in fields))
    rows = [{"qid": qid, "query": text, **{key: extra.get(qid, {}).get(key) for key in fields}}
            for qid, text in queries.items()]
    return _pandas().DataFrame(rows, columns=[*TOPIC_COLUMNS, *fields])


def topics_from_frame(frame: "pd.DataFrame") -> tuple[dict[str, str], dict[str, dict]]:
    """(queries, extra) of a frame with columns qid, query and optionally others."""
    frame = pyterrier_columns(frame)
    _require(frame, TOPIC_COLUMNS)
    fields = [c for c in frame.columns if c not in TOPIC_COLUMNS]
    queries, extras = {}, {}
    for row, record in enumerate(frame.to_dict("records")):
        qid, text = _id(record["qid"], row, "qid"), record["query"]
        if qid in queries:
            raise InputError(WHERE, f"query id {qid!r} appears twice", row, "qid")
        if not isinstance(text, str) or not text.strip():
            raise InputError(WHERE, f"query {qid!r} has no text", row, "query")
        queries[qid] = text
        extra = {key: record[key] for key in fields if not _missing(record[key])}
        if extra:
            extras[qid] = extra
    return queries, extras


def run_frame(ranking: Ranking, texts: dict[str, str], queries: dict[str, str] | None = None) -> "pd.DataFrame":
    columns = {"qid": [], "docno": [], "score": [], "rank": []}
    for qid, hits in ranking.items():
        for rank, (docid, score) in enumerate(hits):
            for key, value in (("qid", qid), ("docno", docid), ("score", score), ("rank", rank)):
                columns[key].append(value)
    if texts:
        columns["text"] = [texts.get(docid) for docid in columns["docno"]]
    if queries is not None:
        columns["query"] = [queries.get(qid) for qid in columns["qid"]]
    frame = _pandas().DataFrame(columns)
    return frame.astype({"score": "float64", "rank": "int64"})


def run_from_frame(frame: "pd.DataFrame") -> tuple[Ranking, dict[str, str]]:
    """(ranking, texts) of a frame with columns qid, docno, score and optionally rank and text."""
    frame = pyterrier_columns(frame)
    _require(frame, ("qid", "docno", "score"))
    has_rank, has_text = "rank" in frame.columns, "text" in frame.columns
    hits: dict[str, list[tuple[tuple, str, float]]] = {}
    texts: dict[str, str] = {}
    text_row: dict[str, int] = {}
    for row, record in enumerate(frame.to_dict("records")):
        qid, docno = _id(record["qid"], row, "qid"), _id(record["docno"], row, "docno")
        score = _finite(record["score"], row, "score")
        order = (_finite(record["rank"], row, "rank"),) if has_rank else (-score, docno)
        hits.setdefault(qid, []).append((order, docno, score))
        text = record["text"] if has_text else None
        if not _missing(text):
            if texts.setdefault(docno, text) != text:
                raise InputError(WHERE, f"docno {docno!r} has another text than on row {text_row[docno]}", row, "text")
            text_row.setdefault(docno, row)
    ranking = {}
    for qid, rows in hits.items():
        ranked = [(docno, score) for _, docno, score in sorted(rows, key=lambda r: r[0])]
        if len({docno for docno, _ in ranked}) != len(ranked):
            raise InputError(WHERE, f"a docno appears twice under query {qid!r}", None, "docno")
        ranking[qid] = ranked
    return ranking, texts


def _require(frame, columns) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(WHERE, f"missing column(s) {', '.join(missing)}; it has: {', '.join(map(str, frame.columns))}",
                         field=missing[0])


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _id(value, row: int, column: str) -> str:
    """The value as an id string (numbers become strings), by the id rule (pipeline/data/ids.py)."""
    text = "" if _missing(value) else str(value)
    if id_problem(text, column) is not None:
        raise InputError(WHERE, f"{column} {value!r} is not an id: {id_problem(text, column)}", row, column)
    return text


def _finite(value, row: int, column: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise InputError(WHERE, f"{column} {value!r} is not a finite number", row, column)
    return number

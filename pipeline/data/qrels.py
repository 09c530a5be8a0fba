"""TREC qrels (`qid iter docid relevance`): qid -> docid -> integer relevance, the shape ir-measures takes."""
from __future__ import annotations

from pathlib import Path

from pipeline.data.files import numbered_lines
from pipeline.errors import InputError

Qrels = dict[str, dict[str, int]]


def read_qrels(path: str | Path) -> Qrels:
    qrels: Qrels = {}
    for number, line in numbered_lines(path):
        parts = line.split()
        if len(parts) != 4:
            raise InputError(path, f"expected 4 columns (qid iter docid relevance), found {len(parts)}", number, "columns")
        qid, _, docid, relevance = parts
        try:
            level = int(relevance)
        except ValueError:
            raise InputError(path, f"relevance {relevance!r} is not an integer", number, "relevance") from None
        judged = qrels.setdefault(qid, {})
        if docid in judged and judged[docid] != level:
            raise InputError(path, f"docid {docid!r} judged twice for query {qid!r} ({judged[docid]} and {level})", number, "docid")
        judged[docid] = level
    return qrels


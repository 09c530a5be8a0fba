"""Qrels: qid -> docid -> integer relevance, the shape ir-measures takes.

Two file forms, told apart by the first line:
- TREC (trec_eval, Pyserini, MS MARCO's qrels.*.tsv): `qid iter docid relevance`, no header;
- BEIR (`qrels/{train,dev,test}.tsv`): a header line of 3 names (`query-id corpus-id score`), then
  `query-id<TAB>corpus-id<TAB>score` lines.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.data.files import numbered_lines
from pipeline.errors import InputError

Qrels = dict[str, dict[str, int]]
TREC_COLUMNS = ("qid", "iter", "docid", "relevance")
BEIR_COLUMNS = ("query-id", "corpus-id", "score")


def is_beir_header(parts: list[str]) -> bool:
    """A first line of 3 names, no digit in any: BEIR's `query-id corpus-id score` header (or one like it)."""
    return len(parts) == 3 and not any(char.isdigit() for part in parts for char in part)


def read_qrels(path: str | Path) -> Qrels:
    qrels: Qrels = {}
    columns = TREC_COLUMNS
    for index, (number, line) in enumerate(numbered_lines(path)):
        parts = line.split()
        if index == 0 and is_beir_header(parts):
            columns = BEIR_COLUMNS  # the header, then 3 columns a line
            continue
        if len(parts) != len(columns):
            expected = (f"{len(columns)} columns ({' '.join(columns)}"
                        + (", as BEIR's header line says)" if columns is BEIR_COLUMNS
                           else "), or a BEIR header line (query-id corpus-id score) and 3 columns"))
            raise InputError(path, f"expected {expected}, found {len(parts)}", number, "columns")
        qid, docid, relevance = parts[0], parts[-2], parts[-1]
        try:
            level = int(relevance)
        except ValueError:
            raise InputError(path, f"relevance {relevance!r} is not an integer", number, columns[-1]) from None
        judged = qrels.setdefault(qid, {})
        if docid in judged and judged[docid] != level:
            raise InputError(path, f"docid {docid!r} judged twice for query {qid!r} ({judged[docid]} and {level})",
                             number, columns[-2])
        judged[docid] = level
    if not qrels:
        raise InputError(path, "no judgements after the header line", 1)
    return qrels

"""Qrels: qid -> docid -> integer relevance, the shape ir-measures takes.

Two file forms, told apart by the first line:
- TREC (trec_eval, Pyserini, MS MARCO's qrels.*.tsv): `qid iter docid relevance`, no header;
- BEIR (`qrels/{train,dev,test}.tsv`): a header line of 3 names (`query-id corpus-id score`), then
  `query-id<TAB>corpus-id<TAB>score` lines.

A line whose first character is `#` is a comment, skipped, as trec_eval 10.0 skips it (9.0.8 reads it as a
judgement of the query "#", or refuses it). Ids follow the id rule (pipeline/data/ids.py); a relevance is an
integer written in ASCII digits (`1`, `-1`, `+2`), the form trec_eval's atoi reads the same way, from -LABEL_LIMIT
to LABEL_LIMIT: trec_eval's evaluator (pytrec_eval's, through ir-measures) allocates 8 bytes for every level up to
the highest label, so 2^31 grew by gigabytes and 2^32 (no C int) scored every measure 0; at the limit it is 8 MB.
"""
from __future__ import annotations

import re
from pathlib import Path

from pipeline.data.files import numbered_lines
from pipeline.data.ids import check_id, split_fields
from pipeline.errors import InputError

Qrels = dict[str, dict[str, int]]
TREC_COLUMNS = ("qid", "iter", "docid", "relevance")
BEIR_COLUMNS = ("query-id", "corpus-id", "score")
COMMENT = "#"
_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")  # what int() and trec_eval's atoi both read as this number
LABEL_LIMIT = 1_000_000  # a label's magnitude: the evaluator's memory grows with the highest label (module docstring)


def label_problem(level) -> str | None:
    """Why `level` cannot be a relevance label, or None."""
    if isinstance(level, int) and not isinstance(level, bool) and -LABEL_LIMIT <= level <= LABEL_LIMIT:
        return None
    return f"relevance {level!r} is not an integer from {-LABEL_LIMIT:,} to {LABEL_LIMIT:,} (the evaluator's memory " \
           "grows with the highest label)"


def check_labels(qrels: Qrels, where: str = "qrels") -> None:
    """An InputError naming `where` (a qrels mapping built in Python) unless every label is in the range."""
    for qid, judged in qrels.items():
        problem = next((label_problem(level) for level in judged.values() if label_problem(level)), None)
        if problem:
            raise InputError(where, f"{problem} (query {qid!r})", field="relevance")


def is_beir_header(parts: list[str]) -> bool:
    """A first line of 3 printable names, no digit in any: BEIR's `query-id corpus-id score` header (or one like it)."""
    return len(parts) == 3 and all(part.isprintable() for part in parts) and \
        not any(char.isdigit() for part in parts for char in part)


def read_qrels(path: str | Path) -> Qrels:
    qrels: Qrels = {}
    columns = TREC_COLUMNS
    judgements = 0
    for number, line in numbered_lines(path):
        if line.startswith(COMMENT):
            continue
        parts, printable = split_fields(line)  # fields split at ASCII whitespace, as trec_eval splits them
        judgements += 1
        if judgements == 1 and is_beir_header(parts):
            columns = BEIR_COLUMNS  # the header, then 3 columns a line
            continue
        if len(parts) != len(columns):
            expected = (f"{len(columns)} columns ({' '.join(columns)}"
                        + (", as BEIR's header line says)" if columns is BEIR_COLUMNS
                           else "), or a BEIR header line (query-id corpus-id score) and 3 columns"))
            raise InputError(path, f"expected {expected}, found {len(parts)}", number, "columns")
        qid, docid, relevance = parts[0], parts[-2], parts[-1]
        if not printable:  # a printable line's fields are ids already; else each must be printable, the iter too:
            check_id(qid, path, number, columns[0], "query id")  # then Python's split and C's read the same fields
            check_id(docid, path, number, columns[-2], "document id")
            if columns is TREC_COLUMNS:
                check_id(parts[1], path, number, "iter", "iter field")
        if not _INTEGER.fullmatch(relevance):
            raise InputError(path, f"relevance {relevance!r} is not an integer (ASCII digits, at most 18)", number,
                             columns[-1])
        level = int(relevance)
        if not -LABEL_LIMIT <= level <= LABEL_LIMIT:
            raise InputError(path, label_problem(level), number, columns[-1])
        judged = qrels.setdefault(qid, {})
        if docid in judged and judged[docid] != level:
            raise InputError(path, f"docid {docid!r} judged twice for query {qid!r} ({judged[docid]} and {level})",
                             number, columns[-2])
        judged[docid] = level
    if not qrels:
        raise InputError(path, "no judgements" + (" after the header line" if columns is BEIR_COLUMNS else ""), 1)
    return qrels

"""Cranfield 1,400 (SMART format): `.I` opens a record, `.T/.A/.B/.W` open title, author, bibliography, text.

Two quirks of the collection:
- cran.qry numbers its 225 queries `.I 001`..`.I 365` with gaps, while cranqrel numbers them 1..225 in
  order: a query's id is its position in cran.qry (as ir_datasets does).
- cranqrel codes are Cleverdon's, where *smaller is more relevant*: 1 = complete answer, 2 = high degree,
  3 = useful background, 4 = minimum interest; -1 marks a judged non-relevant pair. We store a graded level
  that grows with relevance, 5 - code (1 -> 4 ... 4 -> 1), and -1 -> 0, so nDCG gains rise with relevance
  and `rel_level` 1 counts every listed reference as relevant for AP/RR/R, the usual binary Cranfield setup.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from pipeline.data.corpus import collapse_whitespace
from pipeline.data.files import numbered_lines
from pipeline.data.qrels import Qrels
from pipeline.data.sets.base import Dataset
from pipeline.data.topics import Topics
from pipeline.errors import InputError

FIELDS = {".T": "title", ".A": "author", ".B": "bib", ".W": "text"}
GRADE = {1: 4, 2: 3, 3: 2, 4: 1, -1: 0}  # Cleverdon code -> graded relevance (higher is better)


def smart_records(path: Path) -> Iterator[tuple[int, str, dict[str, str]]]:
    """(line, `.I` id, {field: whitespace-normalised text}) for each record of a SMART file."""
    number, record_id, fields, field, start = 0, None, {}, None, 0
    for number, line in numbered_lines(path):
        tag = line[:2]
        if tag == ".I" and line[2:3] in ("", " ", "\t"):
            if record_id is not None:
                yield start, record_id, {k: collapse_whitespace(v) for k, v in fields.items()}
            record_id, fields, field, start = line[2:].strip(), {}, None, number
            if not record_id:
                raise InputError(path, "record without an id after .I", number, ".I")
        elif tag in FIELDS and not line[2:].strip():
            field = FIELDS[tag]
            fields.setdefault(field, "")
        elif record_id is None or field is None:
            raise InputError(path, "text before the first .I/.T/.A/.B/.W marker", number)
        else:
            fields[field] += " " + line
    if record_id is not None:
        yield start, record_id, {k: collapse_whitespace(v) for k, v in fields.items()}


class CranfieldDataset(Dataset):
    provides = ("topics", "qrels", "docs")

    def docs(self) -> Iterator[dict]:
        """{"id", "contents" (title + text, as ir_datasets' default_text), "title", "author", "bib", "text"}."""
        path = self.path("docs")

        def generate():
            for _, doc_id, fields in smart_records(path):
                title, text = fields.get("title", ""), fields.get("text", "")
                yield {"id": doc_id, "contents": f"{title} {text}".strip(), "title": title,
                       "author": fields.get("author", ""), "bib": fields.get("bib", ""), "text": text}

        return generate()

    def topics(self) -> Topics:
        path = self.path("topics")
        queries = {}
        for position, (number, _, fields) in enumerate(smart_records(path), start=1):
            if not fields.get("text"):
                raise InputError(path, f"query {position} has no .W text", number, ".W")
            queries[str(position)] = fields["text"]
        return Topics(queries)

    def qrels(self) -> Qrels:
        path = self.path("qrels")
        qrels: Qrels = {}
        for number, line in numbered_lines(path):
            parts = line.split()
            if len(parts) != 3:
                raise InputError(path, f"expected 3 columns (query doc code), found {len(parts)}", number, "columns")
            qid, docid, code = parts
            try:
                grade = GRADE[int(code)]
            except (ValueError, KeyError):
                message = f"relevance code {code!r} is not one of 1, 2, 3, 4, -1"
                raise InputError(path, message, number, "code") from None
            judged = qrels.setdefault(qid, {})
            judged[docid] = max(grade, judged.get(docid, 0))  # a pair listed twice keeps its best grade
        return qrels

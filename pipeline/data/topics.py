"""`Topics` (qid -> query, in file order) and topic files: TSV (`qid<TAB>text`), TREC SGML (`<top><num>...`),
CACM-style `<DOC><DOCNO>`, JSONL (`qid`/`query`, or BEIR's queries.jsonl: `_id`/`text`).

`read_topics` returns `Topics` in file order, the query text whitespace-normalised for the SGML formats (what
Anserini's TrecTopicReader / CacmTopicReader give, up to whitespace, which its analyzers ignore). Malformed
input raises `InputError` naming the file, the line and the field (for SGML: the line where the topic opens).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from pipeline.data.corpus import collapse_whitespace, sgml_blocks
from pipeline.data.files import atomic_write, first_line, json_digest, json_lines, numbered_lines, plain_suffix
from pipeline.data.ids import check_id, check_ids, id_problem
from pipeline.errors import InputError

TOPIC_FORMATS = ("tsv", "trec", "cacm", "jsonl")
_SUFFIXES = {".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}
_TREC_FIELD = re.compile(r"<(num|title|desc|narr)>", re.IGNORECASE)
_TREC_CLOSE = re.compile(r"</(num|title|desc|narr)>", re.IGNORECASE)
# "<num> Number: 301", "<title> Topic: ...", "<desc> Description:", "<narr> Narrative:" (all optional)
_TREC_PREFIX = {"num": "number:", "title": "topic:", "desc": "description:", "narr": "narrative:"}
_DOCNO = re.compile(r"<DOCNO>(.*?)</DOCNO>", re.IGNORECASE | re.DOTALL)
_ASCII_BLANKS = " \t\n\r\v\f"


@dataclass
class Topics:
    """Queries by id, in file order; `extra` holds optional per-query fields (e.g. keywords)."""

    queries: dict[str, str]
    extra: dict[str, dict] = field(default_factory=dict)

    def __post_init__(self):
        check_ids(self.queries, "Topics", "qid", "query id")  # the id rule (pipeline/data/ids.py), as files have it

    def __len__(self) -> int:
        return len(self.queries)

    def __iter__(self) -> Iterator[str]:
        return iter(self.queries)

    def items(self):
        return self.queries.items()

    def __getitem__(self, qid: str) -> str:
        return self.queries[qid]

    def subset(self, qids: Iterable[str]) -> "Topics":
        keep = [q for q in qids if q in self.queries]
        return Topics({q: self.queries[q] for q in keep}, {q: self.extra[q] for q in keep if q in self.extra})

    def fingerprint(self) -> str:
        return json_digest([self.queries, self.extra])

    def to_frame(self):
        """A pandas DataFrame with PyTerrier's columns qid, query (+ extra fields); see pipeline.data.frames."""
        from pipeline.data.frames import topics_frame

        return topics_frame(self.queries, self.extra)

    @classmethod
    def from_frame(cls, frame) -> "Topics":
        """Topics from a DataFrame with columns qid, query (others become extra fields)."""
        from pipeline.data.frames import topics_from_frame

        return cls(*topics_from_frame(frame))


def read_topics(path: str | Path, format: str | None = None) -> Topics:
    """Read a topic file; `format` is one of TOPIC_FORMATS, detected from the name or first line when None."""
    if format is not None and format not in TOPIC_FORMATS:
        raise ValueError(f"unknown topic format {format!r}; expected one of {TOPIC_FORMATS}")
    path = Path(path)
    fmt = format or detect_topic_format(path)
    topics = Topics({})
    reader = {"tsv": _tsv, "trec": _trec, "cacm": _cacm, "jsonl": _jsonl}[fmt]
    for number, qid, text, extra, (qid_field, text_field) in reader(path):
        check_id(qid, path, number, qid_field, "query id")
        if qid in topics.queries:
            raise InputError(path, f"query id {qid!r} appears twice", number, qid_field)
        if not text:
            raise InputError(path, f"query {qid!r} has no text", number, text_field)
        topics.queries[qid] = text
        if extra:
            topics.extra[qid] = extra
    if not topics.queries:
        raise InputError(path, f"no topics found (read as {fmt})")
    return topics


def detect_topic_format(path: str | Path) -> str:
    """`.tsv` / `.jsonl` / `.json` (also under .gz) by name; otherwise from the first non-blank line."""
    suffix = plain_suffix(path)
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    number, line = first_line(path)
    head = line.lstrip().lower()
    if head.startswith("{"):
        return "jsonl"
    if head.startswith("<top"):
        return "trec"
    if head.startswith("<doc"):
        return "cacm"
    if "\t" in line:
        return "tsv"
    raise InputError(path, f"cannot detect the topic format (one of {', '.join(TOPIC_FORMATS)}); pass format=", number)


def write_topics(topics: Topics, path: str | Path) -> Path:
    """Write `qid<TAB>text` lines atomically (extra fields are not written)."""
    for qid, text in topics.items():
        if id_problem(qid, "query id"):
            raise ValueError(id_problem(qid, "query id"))
        if "\t" in text or "\n" in text or "\r" in text:
            raise ValueError(f"query {qid!r} contains a tab or newline; TSV cannot hold it")
    with atomic_write(path) as out:
        for qid, text in topics.items():
            out.write(f"{qid}\t{text}\n")
    return Path(path)


def _tsv(path: Path):
    for number, line in numbered_lines(path):
        fields = line.split("\t")
        if len(fields) != 2:
            found = "no tab" if len(fields) == 1 else f"{len(fields)} fields"
            raise InputError(path, f"expected 2 tab-separated fields (qid, query), found {found}", number, "columns")
        qid, text = fields
        yield number, qid.strip(), text.strip(), None, ("qid", "query")


def _trec(path: Path):
    for number, block in sgml_blocks(path, "top"):
        fields: dict[str, str] = {}
        marks = list(_TREC_FIELD.finditer(block))
        for mark, following in zip(marks, marks[1:] + [None]):
            name = mark.group(1).lower()
            end = following.start() if following else None
            value = _TREC_CLOSE.sub(" ", block[mark.end(): end])
            # the id as written (its ends' ASCII blanks aside), so the id rule sees what it holds; texts collapsed
            value = value.strip(_ASCII_BLANKS) if name == "num" else collapse_whitespace(value)
            if value.lower().startswith(_TREC_PREFIX[name]):
                value = value[len(_TREC_PREFIX[name]):].strip(_ASCII_BLANKS)
            fields[name] = value
        if "num" not in fields:
            raise InputError(path, "topic has no <num>", number, "num")
        if "title" not in fields:
            raise InputError(path, f"topic {fields['num']!r} has no <title>", number, "title")
        extra = {key: fields[tag] for tag, key in (("desc", "description"), ("narr", "narrative")) if fields.get(tag)}
        yield number, fields["num"], fields["title"], extra, ("num", "title")


def _cacm(path: Path):
    for number, block in sgml_blocks(path, "DOC"):
        match = _DOCNO.search(block)
        if not match:
            raise InputError(path, "topic has no <DOCNO>...</DOCNO>", number, "DOCNO")
        text = collapse_whitespace(block[: match.start()] + " " + block[match.end():])
        yield number, match.group(1).strip(), text, None, ("DOCNO", "text")


def _jsonl(path: Path):
    for number, obj in json_lines(path):
        names = ("_id", "text") if "_id" in obj and "qid" not in obj else ("qid", "query")  # BEIR's, or ours
        qid, text = obj.pop(names[0], None), obj.pop(names[1], None)
        if isinstance(qid, int) and not isinstance(qid, bool):
            qid = str(qid)
        if not isinstance(qid, str):
            raise InputError(path, f"missing \"{names[0]}\" string", number, names[0])
        if not isinstance(text, str):
            raise InputError(path, f"missing \"{names[1]}\" string", number, names[1])
        if names[0] == "_id" and not obj.get("metadata"):
            obj.pop("metadata", None)  # BEIR's empty metadata is no query field
        yield number, qid.strip(), text.strip(), obj, names

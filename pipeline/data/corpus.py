"""Streaming document readers: JSONL (Pyserini JsonCollection `id`/`contents`, or BEIR's `_id`/`title`/`text`, whose
contents are `title + " " + text`, as Pyserini's BEIR "flat" indexes join them), TSV (`id<TAB>text`), TREC SGML, folders, .gz.

Every reader yields `{"id": str, "contents": str, ...extra fields}` one document at a time: a corpus is never
held in memory. Malformed input raises `InputError` naming the file, the 1-based line and the field.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from pipeline.data.files import first_line, json_lines, numbered_lines, plain_suffix
from pipeline.data.ids import check_id
from pipeline.errors import InputError, MissingResourceError

DOC_FORMATS = ("jsonl", "tsv", "trec")
_SUFFIXES = {".jsonl": "jsonl", ".json": "jsonl", ".tsv": "tsv", ".trec": "trec", ".sgml": "trec"}
_TAG = re.compile(r"<[^>]*>")
_DOCNO = re.compile(r"<DOCNO>(.*?)</DOCNO>", re.DOTALL)


def iter_docs(path: str | Path, format: str | None = None) -> Iterator[dict]:
    """Documents of a file or of every file in a folder (recursively, in name order; hidden files skipped)."""
    return (doc for _, _, doc in located_docs(path, format))


def doc_location(path: str | Path, format: str | None, ordinal: int) -> tuple[Path, int]:
    """(file, line) of the `ordinal`-th (0-based) document of `iter_docs(path, format)`: for error messages."""
    for number, (file, line, _) in enumerate(located_docs(path, format)):
        if number == ordinal:
            return file, line
    raise IndexError(ordinal)


def located_docs(path: str | Path, format: str | None = None) -> Iterator[tuple[Path, int, dict]]:
    """(file, 1-based line where it starts, document) for each document of a file or folder (see iter_docs)."""
    path = Path(path)
    if format is not None and format not in DOC_FORMATS:
        raise ValueError(f"unknown document format {format!r}; expected one of {DOC_FORMATS}")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*")
                       if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts))
        if not files:
            raise InputError(path, "folder holds no files")
        for file in files:
            yield from located_docs(file, format)
        return
    if not path.is_file():
        raise MissingResourceError(f"{path}: no such file or folder")
    fmt = format or detect_doc_format(path)
    for number, doc in {"jsonl": _jsonl_docs, "tsv": _tsv_docs, "trec": _trec_docs}[fmt](path):
        yield path, number, doc


def detect_doc_format(path: str | Path) -> str:
    """The format from the file name (`.jsonl/.json`, `.tsv`, `.trec`, also under `.gz`), else from its first line."""
    suffix = plain_suffix(path)
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    number, line = first_line(path)
    stripped = line.lstrip()
    if stripped.startswith("{"):
        return "jsonl"
    if stripped.upper().startswith("<DOC"):
        return "trec"
    if "\t" in line:
        return "tsv"
    raise InputError(path, f"cannot detect the document format (one of {', '.join(DOC_FORMATS)}); pass format=", number)


def _jsonl_docs(path: Path) -> Iterator[tuple[int, dict]]:
    for number, obj in json_lines(path):
        if "_id" in obj and "id" not in obj:
            yield number, _beir_doc(obj, path, number)
            continue
        doc_id = obj.pop("id", None)
        if isinstance(doc_id, int) and not isinstance(doc_id, bool):
            doc_id = str(doc_id)
        if not isinstance(doc_id, str) or not doc_id.strip():
            raise InputError(path, "missing or empty document id", number, "id")
        contents = obj.pop("contents", None)
        if not isinstance(contents, str):
            raise InputError(path, "missing \"contents\" string", number, "contents")
        yield number, {"id": check_id(doc_id, path, number, "id", "document id"), "contents": contents, **obj}


def _beir_doc(obj: dict, path: Path, number: int) -> dict:
    """A BEIR corpus line (`_id`, `title`, `text`): its contents are the title, a space and the text (the text alone
    when the title is empty); the title is kept as a field."""
    doc_id, title, text = obj.pop("_id"), obj.pop("title", ""), obj.pop("text", None)
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id = str(doc_id)
    if not isinstance(doc_id, str) or not doc_id.strip():
        raise InputError(path, "missing or empty document id", number, "_id")
    if not isinstance(text, str):
        raise InputError(path, "missing \"text\" string", number, "text")
    if title is None:
        title = ""
    if not isinstance(title, str):
        raise InputError(path, f"\"title\" is not a string: {title!r}", number, "title")
    contents = f"{title} {text}" if title.strip() else text
    if not obj.get("metadata"):
        obj.pop("metadata", None)  # BEIR's empty metadata is no field
    return {"id": check_id(doc_id, path, number, "_id", "document id"), "contents": contents, "title": title, **obj}


def _tsv_docs(path: Path) -> Iterator[tuple[int, dict]]:
    for number, line in numbered_lines(path):
        if "\t" not in line:
            raise InputError(path, "expected id<TAB>text, found no tab", number, "columns")
        doc_id, contents = line.split("\t", 1)  # later tabs are the text's: msmarco-docs.tsv's id, url, title, body
        yield number, {"id": check_id(doc_id, path, number, "id", "document id"), "contents": contents}


def _trec_docs(path: Path) -> Iterator[tuple[int, dict]]:
    for number, block in sgml_blocks(path, "DOC"):
        match = _DOCNO.search(block)
        if not match:
            raise InputError(path, "document has no <DOCNO>...</DOCNO>", number, "DOCNO")
        doc_id = check_id(match.group(1).strip(), path, number, "DOCNO", "document id")
        body = block[: match.start()] + " " + block[match.end():]
        yield number, {"id": doc_id, "contents": collapse_whitespace(_TAG.sub(" ", body))}


def sgml_blocks(path: str | Path, tag: str) -> Iterator[tuple[int, str]]:
    """(line where `<tag ...>` opens, text between it and `</tag>`) for each block, streamed line by line.

    Blocks may span lines or share one; text outside blocks, a nested or an unclosed block is an error.
    """
    opening = re.compile(rf"<{tag}(?:\s[^>]*)?>", re.IGNORECASE)
    closing = re.compile(rf"</{tag}>", re.IGNORECASE)
    inside, start, parts = False, 0, []
    for number, line in numbered_lines(path):
        rest = line
        while rest:
            if not inside:
                match = opening.search(rest)
                outside = rest if match is None else rest[: match.start()]
                if outside.strip():
                    raise InputError(path, f"text outside <{tag}>...</{tag}>: {outside.strip()[:40]!r}", number)
                if match is None:
                    break
                inside, start, parts, rest = True, number, [], rest[match.end():]
            else:
                end = closing.search(rest)
                nested = opening.search(rest)
                if nested and (end is None or nested.start() < end.start()):
                    message = f"<{tag}> opened on line {start} is not closed before the next one"
                    raise InputError(path, message, number, tag)
                if end is None:
                    parts.append(rest)
                    break
                parts.append(rest[: end.start()])
                yield start, "\n".join(parts)
                inside, rest = False, rest[end.end():]
    if inside:
        raise InputError(path, f"<{tag}> is never closed", start, tag)


def collapse_whitespace(text: str) -> str:
    """Collapse every run of whitespace to one space and strip the ends."""
    return " ".join(text.split())


"""What an index build checks of the documents it gives Anserini, and of the index Anserini makes of them.

Anserini's IndexCollection skips what it cannot read or index and still exits 0, its log saying "Total N documents
indexed" whatever the index holds (an id past Lucene's 32,766-byte term limit: "Total 2", and 1 document of 3 in
the index). So a build (pipeline/retrieve/index.py) refuses, before Anserini starts, a document longer than its JSON
reader accepts (`check_lengths`); counts apart the documents with no text, which Anserini leaves out by design
(`is_blank`, `warn_empty`); and after Anserini, compares Lucene's numDocs with the documents it was given
(`check_indexed`): a difference is an InputError naming the first missing document, and no index is kept.
"""
from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Callable, Iterable

from pipeline.errors import ConfigError, InputError, IrpipeError
from pipeline.log import logger

# Anserini 1.7.1 reads the part files with Jackson 2.21.1, whose StreamReadConstraints refuse a JSON string of more
# than 20,000,000 characters, counted as Java does (UTF-16 code units: a character past U+FFFF is two); Anserini then
# skips every document of that part file and exits 0. Measured by real builds: 20,000,000 "x" (or 10,000,000 emoji)
# indexed; 20,000,001 "x" (or 10,000,000 emoji and an "x") not, nor the other documents of its part file.
JSON_STRING_LIMIT = 20_000_000
_JAVA_BLANK = "".join(map(chr, range(0x21)))  # what Java's String.trim() strips: Anserini skips a document it empties
ANSERINI_ERROR = re.compile(r"Unexpected Exception: (.*)")  # Anserini's log line for a document or file it skipped

Locate = Callable[[int], tuple[Path, int]]  # a document's position (0-based, reading order) -> (file, line)


class IndexingError(IrpipeError):
    """Anserini's IndexCollection failed; the message carries the end of its log."""


def document_error(source: str, locate: Locate | None, position: int, doc_id: str, message: str,
                   field: str | None = None) -> InputError:
    """An InputError "document ID `message`" naming the document at `position` (0-based, reading order): its file
    and line when `locate` is given, else its number in `source` (a dataset)."""
    if locate is not None:
        file, line = locate(position)
        return InputError(file, f"document {shown(doc_id)} {message}", line, field)
    return InputError(source, f"document {shown(doc_id)} (document {position + 1:,}) {message}", field=field)


def java_length(text: str) -> int:
    """The length of `text` as Java counts it: UTF-16 code units (a character past U+FFFF is two)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


def shown(doc_id: str) -> str:
    """A document id quoted for a message, cut at 80 characters."""
    return repr(doc_id) if len(doc_id) <= 80 else f"{doc_id[:80]!r}... ({len(doc_id):,} characters)"


def check_lengths(record: dict, position: int, source: str, locate: Locate | None, segmented: bool) -> None:
    """Refuse a document with a field longer than Anserini's JSON reader accepts (JSON_STRING_LIMIT)."""
    for field, value in record.items():
        if len(value) > JSON_STRING_LIMIT // 2 and java_length(value) > JSON_STRING_LIMIT:
            how = " once segmented" if segmented and field == "contents" else ""
            raise document_error(source, locate, position, record["id"], (
                f"is {java_length(value):,} characters long{how} (UTF-16 code units, as Java counts them); "
                f"Anserini's JSON reader accepts at most {JSON_STRING_LIMIT:,} and would silently skip it with every "
                f"document of its part file: split it into passages"), field)


def is_blank(record: dict) -> bool:
    """Whether Anserini leaves the document out as empty: its contents only spaces and control characters."""
    return not record["contents"].strip(_JAVA_BLANK)


def warn_empty(source: str, empty: list[str], count: int) -> None:
    """Say that the documents `empty` (ids) are not indexed; none but those is a ConfigError."""
    if not count:
        raise ConfigError(f"no documents to index from {source}: all {len(empty):,} have no text")
    logger.warning("%s: %d document(s) with no text (only spaces or control characters) not indexed, as Anserini "
                   "leaves them out: search never returns them, e.g. %s", source, len(empty), shown(empty[0]))


def check_indexed(index_dir: Path, expected: int, records: Iterable[dict], dropped: set[int], source: str,
                  locate: Locate | None, anserini_error: str | None) -> None:
    """The index at `index_dir` must hold the `expected` documents: `records` (those given to Anserini, in order;
    their positions in reading order skip the `dropped` ones) but the blank ones. Else an InputError naming the
    first missing one and its size, with the first error Anserini logged."""
    from pipeline.retrieve.lucene import held_documents

    with held_documents(index_dir) as (indexed, holds):
        if indexed == expected:
            return
        positions = (position for position in itertools.count() if position not in dropped)
        for position, record in zip(positions, records):
            if not is_blank(record) and not holds(record["id"]):
                said = f"Anserini said: {anserini_error[:300]}" if anserini_error else "Anserini said nothing why"
                raise document_error(source, locate, position, record["id"], (
                    f"({java_length(record['contents']):,} characters long) is the first missing from the index: "
                    f"Anserini indexed {indexed:,} of the {expected:,} documents it was given and exited 0, so no "
                    f"index is kept; {said}"))
    raise IndexingError(f"Anserini indexed {indexed:,} documents where it was given {expected:,}")

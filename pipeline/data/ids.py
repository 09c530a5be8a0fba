"""The id rule, one for every id irpipe reads or is given: query ids, document ids and run tags in topics, qrels,
runs (TREC, MS MARCO), corpora (JSONL, BEIR, TSV, TREC SGML), dataset folders, stores' id lists, DataFrames, and
the `Topics`, `Run` and qrels mappings a Python user builds.

An id is non-empty printable text without spaces: `text.isprintable() and " " not in text`, Python's own test
(the characters `repr` shows as themselves). It refuses whitespace of every kind (an id is one column of a TREC
file) and every character of Unicode's "Other" and "Separator" categories:

    Cc  control characters: NUL, SOH, backspace, tab, ESC, DEL, NEL (U+0085), the C1 controls
    Cf  invisible format characters: zero-width space and joiners, bidi overrides and isolates (they reorder what a
        terminal shows: "Trojan Source"), the byte order mark, the soft hyphen, tag characters
    Cs  lone surrogates (a JSON `\\ud800` escape): no UTF-8 text can hold one, so no run file could be written
    Co  private-use characters, Cn code points unassigned in Python's Unicode database (14.0 on Python 3.11)
    Zs, Zl, Zp  spaces (U+0020, no-break and ideographic spaces), U+2028 LINE and U+2029 PARAGRAPH SEPARATOR

Two ids that print the same are the same id. Besides the characters above, that refuses what prints as nothing
though `isprintable` passes it (variation selectors, the combining grapheme joiner, the Hangul fillers: `_INVISIBLE`)
and an id not in Unicode's composed form, NFC (`e` + U+0301 prints as `é`, U+00E9, another id; the Kelvin sign as
`K`): every id irpipe accepts is its own NFC form, so two that are canonically equivalent are one string.

Why: two ids that print the same must be the same id. trec_eval's C code reads an id up to its first NUL and
splits on isspace() (ASCII whitespace only), so `CACM-1938\\0` was a second document there and the same one in
pytrec_eval, and a query id with ESC or DEL was counted as its own query; the JVM's hex hand-back of document ids
broke on a NUL. trec_eval's own rule is narrower ("string fields can contain no whitespace", "file may contain no
NULL characters"): an id irpipe accepts is one trec_eval reads as the same id.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Iterable, Mapping

from pipeline.errors import InputError

_KINDS = {"Cc": "a control character", "Cf": "an invisible format character", "Cs": "a lone surrogate",
          "Co": "a private-use character", "Cn": "an unassigned code point", "Zs": "a space",
          "Zl": "a line separator", "Zp": "a paragraph separator"}
_C0 = ("NUL SOH STX ETX EOT ENQ ACK BEL BS TAB LF VT FF CR SO SI DLE DC1 DC2 DC3 DC4 NAK SYN ETB CAN EM SUB ESC FS "
       "GS RS US").split()
RULE = "an id is printable text without spaces or control characters"
_FIELD = re.compile(r"[^ \t\n\v\f\r]+")  # what trec_eval's C code splits a line into: isspace() in the C locale
# printable to Python, yet shown as nothing (Unicode's default-ignorable code points that isprintable passes)
_INVISIBLE = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]")


def _named(char: str, kind: bool = True) -> str:
    """`U+001B (ESC, a control character)`: a character that cannot be shown as itself."""
    code = ord(char)
    name = _C0[code] if code < 32 else {0x7F: "DEL", 0x85: "NEL"}.get(code) or unicodedata.name(char, "")
    words = [name] * bool(name) + [_KINDS.get(unicodedata.category(char), "whitespace")] * kind
    return f"U+{code:04X}" + (f" ({', '.join(words)})" if words else "")


def id_problem(text, what: str = "id") -> str | None:
    """Why `text` cannot be an id (`what` names it in the message: "query id", "document id", "run tag"), or None."""
    if not isinstance(text, str):
        return f"{what} {text!r} is not a string ({type(text).__name__})"
    if not text:
        return f"empty {what}"
    if text.isprintable() and " " not in text:
        return None if text.isascii() else _prints_alike(text, what)
    position, char = next((i, c) for i, c in enumerate(text) if c == " " or not c.isprintable())
    if char.isspace():
        return f"{what} {text!r} contains whitespace: {_named(char, kind=False)} at character {position + 1}"
    return f"{what} {text!r} contains {_named(char)} at character {position + 1}: {RULE}"


def _prints_alike(text: str, what: str) -> str | None:
    """Why printable `text` would print as another id (a character shown as nothing, not NFC), or None."""
    invisible = _INVISIBLE.search(text)
    if invisible:
        return (f"{what} {text!r} contains {_named(invisible.group(), kind=False)} at character "
                f"{invisible.start() + 1}, shown as nothing: it prints as another id")
    if not unicodedata.is_normalized("NFC", text):
        return (f"{what} {text!r} is not in Unicode's composed form (NFC): it prints as "
                f"{unicodedata.normalize('NFC', text)!r}, another id; write it composed (NFC)")
    return None


def check_id(text, path, line: int | None, field: str, what: str = "id") -> str:
    """`text` when it is an id, else an InputError naming the file, line and field."""
    if isinstance(text, str) and text and text.isprintable() and " " not in text and text.isascii():
        return text  # the common case, without a function call
    if id_problem(text, what) is None:
        return text
    raise InputError(path, id_problem(text, what), line, field)


def ids_problem(ids: Iterable[str], what: str = "id") -> str | None:
    """Why one of `ids` is not an id (the first such), or None: one C-speed test over all of them when all are good."""
    ids = ids if isinstance(ids, (list, tuple)) else list(ids)
    try:
        joined = "".join(ids)
    except TypeError:  # not all strings
        joined = None
    if joined is not None and all(ids) and joined.isprintable() and " " not in joined and joined.isascii():
        return None
    return next((problem for problem in (id_problem(text, what) for text in ids) if problem is not None), None)


def check_ids(ids: Iterable[str], where: str, field: str, what: str, of: str = "") -> None:
    """An InputError naming `where` (an object: "Run", "Topics", "qrels") and `field` unless every one of `ids` is an
    id (`of`: where the ids stand, for the message, e.g. " of query 'q1'")."""
    problem = ids_problem(ids, what)
    if problem is not None:
        raise InputError(where, problem + of, None, field)


def check_query_docs(docs_by_query: Mapping, where: str) -> None:
    """The rule over a run's or qrels' query ids and the document ids under each: qid -> {docid: ...} (qrels, a run
    as a mapping) or qid -> [(docid, score), ...] (`Run.ranking`); an InputError naming `where` ("Run", "qrels")."""
    check_ids(docs_by_query, where, "qid", "query id")
    for qid, docs in docs_by_query.items():
        check_ids(docs if isinstance(docs, Mapping) else [hit[0] for hit in docs], where, "docid", "document id",
                  f" (query {qid!r})")


def split_fields(line: str) -> tuple[list[str], bool]:
    """The fields of a whitespace-separated line (a run's, qrels') as trec_eval's C code splits it -- at ASCII
    whitespace only, not at Python's other whitespace (U+001C, NBSP) -- and whether the whole line is printable:
    then every field is an id already, else check each id among them (`check_id`) to refuse what it holds."""
    if (line.replace("\t", " ") if "\t" in line else line).isprintable() and \
            (line.isascii() or _prints_alike(line, "line") is None):
        return line.split(), True  # only U+0020 and tabs between the fields: the same split, at C speed
    return _FIELD.findall(line), False

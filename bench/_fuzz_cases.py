"""The readers fuzzed by `python -m bench.fuzz_readers` and tests/test_fuzz_readers.py, one `Reader`
each: a hypothesis strategy of cases (a valid input built from data the case knows, or that input mutated with
the characters readers trip on) and `read(folder)`, which reads the case's files as irpipe does.

A case passes (`check`) when the reader
- ends in one of the package's own errors (`IrpipeError`: exit 2 on the command line), with a printable one-line
  message naming the file; never another exception (a traceback);
- or returns a result whose every id and run tag follows the id rule (pipeline/data/ids.py): no control
  character reaches an output;
- and, for a valid case, returns what the case was built from; for runs and qrels, whenever irpipe accepts a file,
  what the reference reader (ir-measures' readers, the ones ir_measures and pytrec_eval users read files with) makes
  of it, less the `#` comment lines that trec_eval 10.0 skips;
- and, for a case built to be refused (`REFUSED`: a label out of range, a YAML key given twice, a spec nested too
  deeply), refuses it. A file of a case may be a `Special` (a FIFO, a device, a folder, a symlink loop): refused
  before any read, never read forever.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from hypothesis import strategies as st

from pipeline.data.corpus import collapse_whitespace, iter_docs
from pipeline.data.ids import id_problem
from pipeline.data.qrels import LABEL_LIMIT
from pipeline.errors import IrpipeError

# what the readers trip on: controls, separators, invisible characters, comment marks, tags, escapes, odd numbers
NASTY = [*"\x00\x01\x08\t\n\r\x0b\x0c\x1b\x1c\x1f \x7f\x85\xa0\u2028\u2029\u200b\u202e\ufeff\ud800#<>{}[]\":,\\",
         *"0123456789-+.eE_\u0661", "\\ud800", "\\u0000", "<top>", "</top>", "<DOC>", "</DOC>", "<num>", "<title>",
         "<DOCNO>", "</DOCNO>", "Q0", "nan", "inf", "1_0", "0x1p3", "1e999", "\t\t", "\n#", "\n\n",
         "\u0301", "\ufe0f", "\u034f", "\u3164", "\u212a", "e\u0301",  # what prints as nothing or as another id
         "[" * 1000, '{"a": ' * 300, "[" * 101 + "]" * 101, str(LABEL_LIMIT + 1), str(2**31), str(2**32)]
# ids by the rule, most of them ASCII (so files share ids and queries repeat), some of any script
_ID_CHARS = st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"),
                          blacklist_characters="<>#")
IDS = st.one_of(st.from_regex(r"[A-Za-z0-9_.-]{1,4}", fullmatch=True),
                st.text(_ID_CHARS, min_size=1, max_size=5).filter(lambda text: id_problem(text) is None))
# labels: the usual ones, and those at and past the range's ends (pipeline/data/qrels.py)
LABELS = st.one_of(st.integers(-2, 4), st.sampled_from([LABEL_LIMIT, -LABEL_LIMIT, LABEL_LIMIT + 1, -LABEL_LIMIT - 1,
                                                          2**31 - 1, 2**31, 2**32, 10**18 - 1]))
# texts of a line-based file: anything but a line break, a tab or SGML's angle brackets and topic prefixes
TEXTS = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\t\n\r<>:"), min_size=1,
                max_size=12).filter(lambda text: text.strip())


ACCEPTED = "accepted"  # a valid case's `expected` where any result will do, as long as the input is not refused
REFUSED = "refused"  # the `expected` of a case built to be refused


@dataclass(frozen=True)
class Special:
    """A case's file that is no regular file: "fifo", "device" (a link to /dev/zero), "folder" or "loop" (links to
    each other)."""
    kind: str


@dataclass(frozen=True)
class Case:
    files: dict  # name -> str or bytes, written into the case's folder
    expected: object = None  # what a valid case reads as (or ACCEPTED); None for a mutated one


@dataclass(frozen=True)
class Reader:
    name: str
    cases: st.SearchStrategy  # of Case
    read: Callable[[Path], object]  # the folder -> the result
    ids: Callable[[object], list] = lambda result: []  # the ids and tags in the result
    reference: Callable[[Path], object] | None = None  # the folder -> what a reference reader makes of it


def mutated(valid: st.SearchStrategy) -> st.SearchStrategy:
    """Cases of `valid`, or the same cases with one file edited 1-4 times (a NASTY piece or any character inserted,
    a span deleted, a line doubled), or a file of random bytes."""

    @st.composite
    def edit(draw):
        case = draw(valid)
        if draw(st.integers(0, 2)) == 0:
            return case
        name = draw(st.sampled_from(sorted(case.files)))
        text = case.files[name]
        if draw(st.integers(0, 20)) == 0:
            return Case({**case.files, name: draw(st.binary(max_size=40))})
        if draw(st.integers(0, 20)) == 0:
            return Case({**case.files, name: Special(draw(st.sampled_from(["fifo", "device", "folder", "loop"])))})
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(text)))
            how = draw(st.integers(0, 3))
            if how == 0:
                text = text[:at] + draw(st.sampled_from(NASTY)) + text[at:]
            elif how == 1:
                text = text[:at] + draw(st.characters()) + text[at:]
            elif how == 2:
                text = text[:at] + text[at + draw(st.integers(1, 6)):]
            else:
                lines = text.splitlines(keepends=True) or [""]
                line = lines[at % len(lines)]
                text = text + line if line.endswith("\n") else text + "\n" + line
        return Case({**case.files, name: text})

    return edit()


def write(case: Case, folder: Path) -> None:
    for name, content in case.files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Special):
            _make_special(path, content.kind)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:  # a lone surrogate is written as UTF-8 would write its code point: bytes a reader must refuse
            path.write_bytes(content.encode("utf-8", "surrogatepass"))


def _make_special(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to(path.with_name(path.name + ".loop"))
        path.with_name(path.name + ".loop").symlink_to(path)


def check(reader: Reader, case: Case, folder: Path) -> str | None:
    """None when the reader handled `case` (written in `folder`) as it must, else what went wrong (a finding)."""
    try:
        result = reader.read(folder)
    except IrpipeError as error:
        message = str(error)
        if not all(line.isprintable() for line in message.split("\n")):  # lines: a spec error shows a caret line
            return f"{type(error).__name__} message holds a character that is not printable: {message!r}"
        if case.expected not in (None, REFUSED):
            return f"a valid input refused: {message}"
        return None
    except Exception as error:  # noqa: BLE001 -- what the fuzzing is for: any other exception is a traceback
        return f"traceback: {type(error).__name__}: {error}"[:300]
    if case.expected == REFUSED or any(isinstance(content, Special) for content in case.files.values()):
        return f"accepted, where it must be refused: {_short(case.files)}"
    bad = [text for text in reader.ids(result) if id_problem(text) is not None]
    if bad:
        return f"an id or tag breaks the id rule in the output: {bad[0]!r}"
    if case.expected not in (None, ACCEPTED) and result != case.expected:
        return f"a valid input read otherwise: {_short(result)} where it is {_short(case.expected)}"
    if reader.reference is not None:
        try:
            reference = reader.reference(folder)
        except Exception as error:  # noqa: BLE001 -- the reference refuses what irpipe accepted
            return f"accepted, where the reference reader fails: {type(error).__name__}: {error}"[:300]
        if result != reference:
            return f"read otherwise than the reference reader: {_short(result)} vs {_short(reference)}"
    return None


def _short(value) -> str:
    text = repr(value)
    return text if len(text) < 200 else text[:200] + "..."


# -- topics ------------------------------------------------------------------------------------------------------

@st.composite
def _topics(draw):
    queries = draw(st.dictionaries(IDS, TEXTS, min_size=1, max_size=4))
    form = draw(st.sampled_from(["t.tsv", "t.jsonl", "queries.jsonl", "t.trec", "t.cacm"]))
    if form == "t.tsv":
        text = "".join(f"{q}\t{t}\n" for q, t in queries.items())
        expected = {q: t.strip() for q, t in queries.items()}
    elif form.endswith("jsonl"):
        keys = ("_id", "text") if form == "queries.jsonl" else ("qid", "query")
        text = "".join(json.dumps({keys[0]: q, keys[1]: t}) + "\n" for q, t in queries.items())
        expected = {q: t.strip() for q, t in queries.items()}
    elif form == "t.trec":
        text = "".join(f"<top>\n<num> Number: {q}\n<title> {t}\n</top>\n\n" for q, t in queries.items())
        expected = {q: collapse_whitespace(t) for q, t in queries.items()}
    else:
        text = "".join(f"<DOC>\n<DOCNO> {q} </DOCNO>\n{t}\n</DOC>\n" for q, t in queries.items())
        expected = {q: collapse_whitespace(t) for q, t in queries.items()}
    if not all(expected.values()):  # a text of nothing but whitespace to SGML's collapse: no query
        return Case({form: text})
    return Case({form: text}, expected)


def _read_topics(folder: Path):
    from pipeline.data.topics import read_topics

    path = next(folder.iterdir())
    return read_topics(path, "cacm" if path.suffix == ".cacm" else None).queries


# -- qrels -------------------------------------------------------------------------------------------------------

@st.composite
def _qrels(draw):
    judged = draw(st.dictionaries(st.tuples(IDS, IDS), LABELS, min_size=1, max_size=6))
    expected: dict = {}
    for (q, d), level in judged.items():
        expected.setdefault(q, {})[d] = level
    if draw(st.booleans()):
        lines = [f"{q}{draw(st.sampled_from([' ', chr(9)]))}0 {d} {level}" for (q, d), level in judged.items()]
        name = "qrels.txt"
    else:
        lines = ["query-id\tcorpus-id\tscore", *(f"{q}\t{d}\t{level}" for (q, d), level in judged.items())]
        name = "qrels/test.tsv"
    for _ in range(draw(st.integers(0, 2))):  # comments, as trec_eval 10.0 skips them
        lines.insert(draw(st.integers(0, len(lines))), "#" + draw(st.text(max_size=8).map(_one_line)))
    in_range = all(-LABEL_LIMIT <= level <= LABEL_LIMIT for level in judged.values())
    return Case({name: "\n".join(lines) + "\n"}, expected if in_range else REFUSED)


def _one_line(text: str) -> str:
    return "".join(char for char in text if char not in "\n\r")


def _qrels_file(folder: Path) -> Path:
    return max(folder.rglob("*"), key=lambda path: (len(path.parts), not path.name.endswith(".loop")))  # the file


def _read_qrels(folder: Path):
    from pipeline.data.qrels import read_qrels

    return read_qrels(_qrels_file(folder))


def _reference_qrels(folder: Path):
    """ir_measures.read_trec_qrels over the file less its `#` lines (and, for BEIR's form, its header line, the
    qrels in trec_eval's column order)."""
    import ir_measures

    lines = [line for line in _reference_lines(_qrels_file(folder)) if line.strip() and not line.startswith("#")]
    if lines and not any(char.isdigit() for char in lines[0]) and len(lines[0].split()) == 3:
        lines = [" ".join((parts := line.split())[:1] + ["0"] + parts[1:]) for line in lines[1:]]
    qrels: dict = {}
    for qrel in ir_measures.read_trec_qrels("".join(line + "\n" for line in lines) or "\n"):
        qrels.setdefault(qrel.query_id, {})[qrel.doc_id] = qrel.relevance
    return qrels


def _reference_lines(path: Path) -> list[str]:
    """The file's lines as a reference reader sees them: Python's file lines (split at \\n, \\r, \\r\\n only, not at
    str.splitlines' U+2028 or U+0085); a leading byte order mark is dropped, as irpipe's utf-8-sig drops it."""
    with open(path, encoding="utf-8-sig") as handle:
        return [line.rstrip("\n") for line in handle]


# -- runs --------------------------------------------------------------------------------------------------------

@st.composite
def _runs(draw):
    scored = draw(st.dictionaries(IDS, st.dictionaries(IDS, st.floats(-1e6, 1e6, allow_nan=False), min_size=1,
                                                       max_size=4), min_size=1, max_size=3))
    if draw(st.booleans()):
        tag = draw(IDS)
        lines = [f"{q} Q0 {d} {rank} {score!r} {tag}" for q, docs in scored.items()
                 for rank, (d, score) in enumerate(docs.items(), 1)]
        lines += ["# " + draw(st.text(max_size=6).map(_one_line))] * draw(st.integers(0, 1))
        tagged = {"": {tag: 0.0}} if tag != "irpipe" else {}  # the tag, where a run read back has one of its own
        return Case({"run.trec": "\n".join(draw(st.permutations(lines))) + "\n"},
                    {q: {d: float(s) for d, s in docs.items()} for q, docs in scored.items()} | tagged)
    lines = [f"{q}\t{d}\t{rank}" for q, docs in scored.items() for rank, d in enumerate(docs, 1)]
    return Case({"run.tsv": "\n".join(draw(st.permutations(lines))) + "\n"},
                {q: {d: -float(rank) for rank, d in enumerate(docs, 1)} for q, docs in scored.items()})


def _read_run(folder: Path):
    from pipeline.data.runs import read_run

    run = read_run(next(folder.iterdir()))
    return {qid: dict(hits) for qid, hits in run.ranking.items()} | ({"": {run.tag: 0.0}} if run.tag != "irpipe" else {})


def _run_ids(result) -> list:
    return [text for qid, docs in result.items() for text in (qid, *docs) if qid or text]


def _reference_run(folder: Path):
    """ir_measures.read_trec_run over a TREC run less its comment lines; msmarco_eval.py's rule for an MS MARCO one
    (a pid at its rank; irpipe's score is minus the rank), its fields split at blanks as irpipe also reads them
    (msmarco_eval.py splits at tabs alone, and refuses a line of spaces)."""
    import ir_measures

    path = next(folder.iterdir())
    lines = [line for line in _reference_lines(path) if line.strip() and not line.lstrip().startswith("#")]
    if path.suffix == ".tsv":
        run: dict = {}
        for line in lines:
            qid, pid, rank = line.split()
            run.setdefault(qid, {})[pid] = -float(int(rank))
        return run
    run, tags = {}, [line.split()[-1] for line in lines]
    for hit in ir_measures.read_trec_run("".join(line + "\n" for line in lines) or "\n"):
        run.setdefault(hit.query_id, {})[hit.doc_id] = hit.score
    return run | ({"": {tags[-1]: 0.0}} if tags and tags[-1] != "irpipe" else {})


# -- corpora -----------------------------------------------------------------------------------------------------

@st.composite
def _corpus(draw):
    docs = draw(st.dictionaries(IDS, TEXTS, min_size=1, max_size=4))
    form = draw(st.sampled_from(["c.jsonl", "corpus.jsonl", "c.tsv", "c.trec"]))
    if form == "c.jsonl":
        text = "".join(json.dumps({"id": d, "contents": t}) + "\n" for d, t in docs.items())
        expected = [{"id": d, "contents": t} for d, t in docs.items()]
    elif form == "corpus.jsonl":
        titled = {d: (t, draw(TEXTS)) for d, t in docs.items()}
        text = "".join(json.dumps({"_id": d, "title": title, "text": t, "metadata": {}}) + "\n"
                       for d, (t, title) in titled.items())
        expected = [{"id": d, "contents": f"{title} {t}", "title": title} for d, (t, title) in titled.items()]
    elif form == "c.tsv":
        text = "".join(f"{d}\t{t}\n" for d, t in docs.items())
        expected = [{"id": d, "contents": t} for d, t in docs.items()]
    else:
        text = "".join(f"<DOC>\n<DOCNO>{d}</DOCNO>\n{t}\n</DOC>\n" for d, t in docs.items())
        expected = [{"id": d, "contents": collapse_whitespace(t)} for d, t in docs.items()]
    return Case({form: text}, expected)


def _read_corpus(folder: Path):
    return list(iter_docs(next(folder.iterdir())))


def _doc_ids(result) -> list:
    return [doc["id"] for doc in result]


def _qrels_ids(result) -> list:
    return [text for qid, docs in result.items() for text in (qid, *docs)]


def file_readers() -> list[Reader]:
    """The readers of single files (the folder, YAML, spec and checkpoint ones: _fuzz_more.py)."""
    return [Reader("topics", mutated(_topics()), _read_topics, lambda result: list(result)),
            Reader("qrels", mutated(_qrels()), _read_qrels, _qrels_ids, _reference_qrels),
            Reader("runs", mutated(_runs()), _read_run, _run_ids, _reference_run),
            Reader("corpora", mutated(_corpus()), _read_corpus, _doc_ids)]

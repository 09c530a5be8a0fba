"""Bad input and faults, table-driven: each case runs the real command line and must exit 2 with a one-line message
naming the file (and line, and field) at fault -- never a traceback, never a silently different result.

Each case: (id, files to write in the working folder, argv with {index} for the tiny index, words the message must
contain). Most need no Java; the few that search share one tiny index built once for the module.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.cli import main
from support import DOCS, QRELS, TOPICS

BINARY = bytes(range(256)) * 4  # not UTF-8 from byte 0x80 on
RUN = "1 Q0 d1 1 2.0 r\n1 Q0 d4 2 1.0 r\n2 Q0 d2 1 1.0 r\n3 Q0 d3 1 1.0 r\n"
GOOD = {"topics.tsv": TOPICS, "qrels.txt": QRELS, "run.trec": RUN, "other.trec": RUN.replace("d4", "d5"),
        "docs.jsonl": "".join(json.dumps({"id": d, "contents": t}) + "\n" for d, t in DOCS)}
EXPERIMENT = "dataset: tiny\npipeline: bm25()\nmeasures: [AP]\n"
ALIASES = ("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
           "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n")
TINY = ["--topics", "topics.tsv", "--qrels", "qrels.txt", "--corpus", "docs.jsonl"]
SEARCH = ["search", "--index", "{index}", "--topics", "topics.tsv", "--output", "out.trec"]

CASES = [
    # -- item 2: numbers checked per stage, before any work ---------------------------------------------------
    ("bm25 b above 1", {}, ["run", "bm25(b=5)", *TINY], ["bm25: b=5; expected a number between 0 and 1", "bm25(b=5)"]),
    ("bm25 negative k1", {}, ["run", "bm25(k1=-1)", *TINY], ["bm25: k1=-1; expected a number >= 0"]),
    ("bm25 hits 0", {}, ["run", "bm25(hits=0)", *TINY], ["bm25: hits=0; expected an integer >= 1"]),
    ("rm3 fb_terms 0", {}, ["run", "bm25(rm3=true, fb_terms=0)", *TINY],
     ["bm25: fb_terms=0; expected an integer >= 1"]),
    ("rm3 weight above 1", {}, ["run", "bm25(rm3=true, original_query_weight=2)", *TINY],
     ["bm25: original_query_weight=2; expected a number between 0 and 1"]),
    ("bm25kw negative weight", {}, ["run", "bm25kw(dict=x, weight=-1)", *TINY],
     ["bm25kw: weight=-1; expected a number >= 0"]),
    ("fusion negative k", {}, ["run", "fusion(bm25(), bm25(k1=1.2), k=-1)", *TINY],
     ["fusion: k=-1; expected a number >= 0"]),
    ("fusion depth 0", {}, ["run", "fusion(bm25(), bm25(k1=1.2), depth=0)", *TINY],
     ["fusion: depth=0; expected an integer >= 1"]),
    ("fusion norm unknown", {}, ["run", "fusion(bm25(), bm25(k1=1.2), method=weighted, norm=max)", *TINY],
     ["fusion: norm='max'; choose one of none, minmax, zscore"]),
    ("boolean spelled no", {}, ["run", "bm25(rm3=no)", *TINY], ["expected true or false"]),
    ("search --hits 0", {}, [*SEARCH, "--hits", "0"], ["bm25: hits=0; expected an integer >= 1"]),
    ("search --threads 0", {}, [*SEARCH, "--threads", "0"], ["bm25: threads=0; expected an integer >= 1"]),
    ("search --b 1.5", {}, [*SEARCH, "--b", "1.5"], ["bm25: b=1.5; expected a number between 0 and 1"]),
    ("search --language xx", {}, [*SEARCH, "--language", "xx"], ["bm25: language='xx'; choose one of"]),
    ("search --run-tag with a space", {}, [*SEARCH, "--run-tag", "my tag"],
     ["search: --run-tag='my tag'; expected one word", "last column of a TREC run file"]),
    ("search --run-tag with a tab", {}, [*SEARCH, "--run-tag", "a\tb"], ["search: --run-tag='a\\tb'; expected one word"]),
    ("search --run-tag empty", {}, [*SEARCH, "--run-tag", ""], ["search: --run-tag=''; expected one word"]),
    ("bm25 unknown language", {}, ["run", "bm25(language=klingon)", *TINY],
     ["bm25: language='klingon'; choose one of"]),
    ("empty spec", {}, ["run", "", *TINY], ["empty pipeline spec"]),
    ("blank spec", {}, ["run", "  ", *TINY], ["empty pipeline spec"]),
    # -- item 2: the whole experiment file, before the pipeline runs ------------------------------------------
    ("tolerance abc", {"x.yaml": EXPERIMENT + "tolerance: abc\n"}, ["run", "x.yaml"],
     ["x.yaml [tolerance]", "tolerance must be a number, got 'abc'"]),
    ("measures 42", {"x.yaml": "dataset: tiny\npipeline: bm25()\nmeasures: 42\n"}, ["run", "x.yaml"],
     ["x.yaml [measures]", "got 42"]),
    ("pipeline a list", {"x.yaml": "dataset: tiny\npipeline: [bm25()]\nmeasures: [AP]\n"}, ["run", "x.yaml"],
     ["x.yaml [pipeline]", "a pipeline spec (a string)"]),
    ("dataset 123", {"x.yaml": "dataset: 123\npipeline: bm25()\nmeasures: [AP]\n"}, ["run", "x.yaml"],
     ["x.yaml [dataset]", "got 123"]),
    ("unknown measure", {"x.yaml": "dataset: tiny\npipeline: bm25()\nmeasures: [APP]\n"}, ["run", "x.yaml"],
     ["x.yaml [measures]", "unknown measure 'APP'"]),
    ("rel_level 0", {"x.yaml": EXPERIMENT + "rel_level: 0\n"}, ["run", "x.yaml"],
     ["x.yaml [rel_level]", "rel_level must be an integer >= 1, got 0"]),
    ("expected not measured", {"x.yaml": EXPERIMENT + "expected: {nDCG@10: 0.5}\n"}, ["run", "x.yaml"],
     ["x.yaml [expected.nDCG@10]", "not among the measures"]),
    ("name escaping runs/", {"x.yaml": EXPERIMENT + "name: ../../x\n"}, ["run", "x.yaml"],
     ["x.yaml [name]", "'../../x'"]),
    ("ci not a boolean", {"x.yaml": EXPERIMENT + "ci: maybe\n"}, ["run", "x.yaml"], ["x.yaml [ci]", "true or false"]),
    ("bad pipeline in a file", {"x.yaml": "dataset: tiny\npipeline: bm25(b=5)\nmeasures: [AP]\n"}, ["run", "x.yaml"],
     ["x.yaml [pipeline]", "bm25: b=5; expected a number between 0 and 1"]),
    ("unknown engine", {"x.yaml": EXPERIMENT + "engine: spark\n"}, ["run", "x.yaml"],
     ["x.yaml [engine]", "engine must be one of local, ray, got 'spark'"]),
    ("no ray workers", {}, ["search", "--topics", "topics.tsv", "--index", "idx", "--output", "o.trec", "--engine",
                            "ray", "--workers", "0"], ["engine: workers=0; expected an integer >= 1"]),
    ("YAML aliases", {"x.yaml": EXPERIMENT + ALIASES}, ["run", "x.yaml"], ["x.yaml:5", "YAML aliases"]),
    ("YAML aliases in references", {"refs.yaml": ALIASES}, ["leaderboard", "--references", "refs.yaml",
                                                             "--results-dir", ".", "--output", "board.md"],
     ["refs.yaml:2", "YAML aliases"]),
    ("binary experiment file", {"x.yaml": EXPERIMENT.encode() + BINARY}, ["run", "x.yaml"],
     ["x.yaml:5", "not UTF-8 text"]),
    # -- item 3: undecodable inputs -> InputError with the file and line ---------------------------------------
    ("binary run file", {"bad.trec": RUN.encode() + BINARY}, ["eval", "bad.trec", "--qrels", "qrels.txt"],
     ["bad.trec:6", "not UTF-8 text"]),
    ("latin-1 qrels", {"bad.txt": QRELS.encode() + "4 0 caf\xe9 1\n".encode("latin-1")},
     ["eval", "run.trec", "--qrels", "bad.txt"], ["bad.txt:6", "not UTF-8 text (byte b'\\xe9' at column 8)"]),
    ("binary topics", {"bad.tsv": b"1\tok\n" + BINARY}, [*SEARCH[:3], "--topics", "bad.tsv", "--output", "o.trec"],
     ["bad.tsv:3", "not UTF-8 text"]),
    ("binary corpus", {"bad.jsonl": b'{"id": "a", "contents": "x"}\n' + BINARY},
     ["index", "--input", "bad.jsonl", "--output", "idx"], ["bad.jsonl:3", "not UTF-8 text"]),
    ("damaged gzip", {"bad.trec.gz": b"\x1f\x8b\x08\x00" + BINARY}, ["eval", "bad.trec.gz", "--qrels", "qrels.txt"],
     ["bad.trec.gz", "damaged gzip file"]),
    # -- item 4: repeated document ids ---------------------------------------------------------------------------
    ("repeated doc id", {"dup.jsonl": '{"id": "a", "contents": "x"}\n\n{"id": "b", "contents": "y"}\n'
                                      '{"id": "a", "contents": "z"}\n'},
     ["index", "--input", "dup.jsonl", "--output", "idx"], ["dup.jsonl:4 [id]", "'a' occurs again", "first on line 1",
                                                           "--duplicates keep-first"]),
    # -- item 3: outputs that cannot be written, damaged indexes --------------------------------------------------
    ("damaged index record", {"broken/irpipe-index.json": "{not json", "broken/segments_1": ""},
     ["search", "--index", "broken", "--topics", "topics.tsv", "--output", "o.trec"],
     ["broken/irpipe-index.json:1", "damaged index record"]),
]


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "docs.jsonl").write_text(GOOD["docs.jsonl"])
    assert main(["-q", "index", "--input", str(folder / "docs.jsonl"), "--output", str(folder / "index")]) == 0
    return folder / "index"


def _run_case(files: dict, argv: list[str], folder: Path, capsys, index: Path | None = None) -> tuple[int, str]:
    for name, text in {**GOOD, **files}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    capsys.readouterr()
    status = main(["-q", *[arg.replace("{index}", str(index)) for arg in argv]])
    return status, capsys.readouterr().err


@pytest.mark.parametrize("files, argv, words", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_bad_input_exits_2_naming_the_file(files, argv, words, tmp_path, monkeypatch, capsys, request):
    monkeypatch.chdir(tmp_path)
    index = request.getfixturevalue("tiny_index") if "{index}" in argv else None
    status, err = _run_case(files, argv, tmp_path, capsys, index)
    assert status == 2, err
    assert "Traceback" not in err and err.count("\n") <= 3, err  # one message (a spec error adds its caret lines)
    for word in words:
        assert word in err, f"{word!r} not in {err!r}"
    assert not (tmp_path / "runs").exists() and not (tmp_path / "eval").exists()  # checked before anything ran
    assert not (tmp_path / "out.trec").exists() and not (tmp_path / "idx").exists()


def test_debug_shows_the_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.yaml").write_text(EXPERIMENT + "tolerance: abc\n")
    assert main(["--debug", "run", "x.yaml"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "tolerance must be a number" in err


def test_damaged_lucene_index_names_the_index(tiny_index, tmp_path, monkeypatch, capsys):
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copytree(tiny_index, tmp_path / "damaged")
    for file in (tmp_path / "damaged").glob("_*"):  # truncate every segment file
        file.write_bytes(file.read_bytes()[:20])
    status, err = _run_case({}, ["search", "--index", "damaged", "--topics", "topics.tsv", "--output", "o.trec"],
                            tmp_path, capsys)
    assert status == 2 and "Traceback" not in err, err
    assert "cannot open the Lucene index damaged" in err and "rebuild it" in err


@pytest.mark.slow
def test_duplicates_keep_first_indexes_the_first(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dup.jsonl").write_text('{"id": "a", "contents": "first"}\n{"id": "b", "contents": "x"}\n'
                                        '{"id": "a", "contents": "second"}\n')
    assert main(["-q", "index", "--input", "dup.jsonl", "--output", "idx", "--duplicates", "keep-first"]) == 0
    from pipeline.retrieve.lucene import LuceneIndex

    index = LuceneIndex(tmp_path / "idx")
    assert index.num_docs == 2 and "first" in index.doc_text("a")


def test_unwritable_output_folder_is_an_error_naming_it(tmp_path, monkeypatch, capsys):
    target = Path("/sys/irpipe-test/plot.png")  # not writable, even by root
    if os.access("/sys", os.W_OK) and Path("/sys").is_dir() and not _unwritable("/sys"):
        pytest.skip("/sys is writable here")
    monkeypatch.chdir(tmp_path)
    status, err = _run_case({}, ["eval", "run.trec", "--qrels", "qrels.txt", "--baseline", "other.trec",
                                 "--plot", str(target)], tmp_path, capsys)
    assert status == 2 and "Traceback" not in err, err
    assert "/sys/irpipe-test" in err and "cannot write" in err


def _unwritable(folder: str) -> bool:
    try:
        os.mkdir(Path(folder) / "irpipe-test")
    except OSError:
        return True
    os.rmdir(Path(folder) / "irpipe-test")
    return False


@pytest.mark.slow
def test_full_disk_is_an_error_naming_the_file(tmp_path):
    """A file-size limit (RLIMIT_FSIZE) fails writes as a full disk does: exit 2 naming the file, nothing left."""
    for name, text in GOOD.items():
        (tmp_path / name).write_text(text)

    def limit():
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))

    code = "import sys; from pipeline.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, "-q", "eval", "run.trec", "--qrels", "qrels.txt", "--baseline",
                           "other.trec", "--plot", "plot.png"], cwd=tmp_path, capture_output=True, text=True,
                          preexec_fn=limit, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "plot.png: cannot write: File too large" in done.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_stale_temporaries_are_swept_at_the_next_write(tmp_path, caplog):
    from pipeline.data.files import atomic_write

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a process id that no longer runs
    stale = tmp_path / f".out.txt.{dead.pid}.abc123.tmp"
    live = tmp_path / f".out.txt.{os.getpid()}.def456.tmp"
    stale.write_text("partial")
    live.write_text("partial")
    with atomic_write(tmp_path / "out.txt") as out:
        out.write("whole")
    assert not stale.exists() and live.exists() and (tmp_path / "out.txt").read_text() == "whole"
    assert any("left behind by an interrupted run" in r.message for r in caplog.records)


def _index_in_a_child(folder: Path) -> tuple[subprocess.Popen, int]:
    """`irpipe index` of 50,000 documents in a child process, once its Anserini (Java) child runs: (irpipe, java pid)."""
    with open(folder / "docs.jsonl", "w") as out:
        for number in range(50_000):
            out.write(json.dumps({"id": f"d{number}", "contents": f"word{number % 997} text {number}"}) + "\n")
    code = "import sys; from pipeline.cli import main; sys.exit(main(sys.argv[1:]))"
    child = subprocess.Popen([sys.executable, "-c", code, "-q", "index", "--input", "docs.jsonl", "--output", "idx",
                              "--threads", "1"], cwd=folder, stderr=subprocess.PIPE, text=True)
    java = _wait_for_child(child.pid, "IndexCollection", timeout=60)
    if java is None:
        child.kill()
        pytest.fail("the Anserini child never started: " + child.communicate()[1][-2000:])
    return child, java


def _gone(pid: int, timeout: float = 30) -> bool:
    """Whether process `pid` has exited (or is a zombie) within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if "zombie" in Path(f"/proc/{pid}/status").read_text().lower():
                return True
        except FileNotFoundError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


# SIGTERM and SIGINT during indexing: tests/test_faults_kills.py


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's prctl")
def test_sigkill_during_indexing_still_ends_java_and_the_next_start_sweeps_scratch(tmp_path, monkeypatch):
    """SIGKILL leaves irpipe no handler: the kernel's parent-death signal ends the Java child, and the scratch folder
    it leaves is removed by the next index build."""
    child, java = _index_in_a_child(tmp_path)
    child.kill()
    child.communicate(timeout=60)
    try:
        assert _gone(java, timeout=5), "the Anserini child outlived irpipe's SIGKILL"
    finally:
        if not _gone(java, timeout=0):
            os.kill(java, signal.SIGKILL)
    assert any(p.name.startswith(".irpipe-index.") for p in tmp_path.iterdir())  # scratch left by the killed run
    monkeypatch.chdir(tmp_path)
    (tmp_path / "small.jsonl").write_text('{"id": "a", "contents": "one"}\n')
    assert main(["-q", "index", "--input", "small.jsonl", "--output", "small-idx"]) == 0
    assert not any(p.name.startswith(".irpipe-index.") for p in tmp_path.iterdir())


def _wait_for_child(pid: int, word: str, timeout: float) -> int | None:
    """The pid of a child of `pid` whose command line contains `word`, polled until `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            for child in (task / "children").read_text().split() if (task / "children").exists() else []:
                with open(f"/proc/{child}/cmdline", "rb") as handle:
                    if word.encode() in handle.read():
                        return int(child)
        time.sleep(0.02)
    return None


@pytest.mark.parametrize("reader, name", [("Vocabulary", "vocab.txt"), ("IdfTable", "idf.tsv")])
def test_undecodable_checkpoint_vocabularies_name_file_and_line(reader, name, tmp_path):
    """A checkpoint's vocab.txt / idf.tsv that is not UTF-8 text: an InputError naming the file and its first bad line."""
    from pipeline.errors import InputError
    from pipeline.rerank import text

    (tmp_path / name).write_bytes(b"<pad>\n<unk>\nword\n" + "caf\xe9\n".encode("latin-1"))
    with pytest.raises(InputError) as error:
        getattr(text, reader).load(tmp_path / name)
    assert f"{name}:4" in str(error.value) and "not UTF-8 text" in str(error.value)


def test_an_oserror_that_names_no_file_is_not_hidden(monkeypatch):
    """Only errors of the place written to become exit 2; any other OSError is a bug and keeps its traceback."""
    import errno
    import types

    def broken(args):
        raise OSError(errno.EACCES, "Permission denied")  # no file name: not something the user can fix

    module = types.ModuleType("brokencmd")
    module.main, module.define_args = broken, lambda parser: None
    monkeypatch.setitem(sys.modules, "brokencmd", module)
    monkeypatch.setitem(__import__("pipeline.cli").cli.COMMANDS, "broken", ("brokencmd", "a broken command"))
    with pytest.raises(OSError):
        main(["broken"])


def _bm25(**options):
    from pipeline.stages import get_stage_class

    return get_stage_class("bm25")(**options)


def _engine(**options):
    from pipeline.engine import EngineOptions

    return EngineOptions(**options)


def _fusion(**options):
    from pipeline.stage import Fusion

    return Fusion(_bm25(), _bm25(k1=1.2), **options)


@pytest.mark.parametrize("make, owner, field", [
    (lambda: __import__("pipeline.stage").stage.Cutoff(0), "cutoff", "k"),
    (lambda: __import__("pipeline.stage").stage.Cutoff(True), "cutoff", "k"),
    (lambda: _fusion(method="max"), "fusion", "method"),
    (lambda: _fusion(norm="max"), "fusion", "norm"),
    (lambda: _fusion(norm="minmax"), "fusion", "norm"),  # rrf uses ranks, not scores
    (lambda: _fusion(weights=(1.0,)), "fusion", "weights"),
    (lambda: _bm25(b=float("nan")), "bm25", "b"),
    (lambda: _engine(workers=0), "engine", "workers"),
    (lambda: _engine(kind="spark"), "engine", "kind"),
    (lambda: _engine(cpus_per_worker=0), "engine", "cpus_per_worker"),
])
def test_a_check_is_a_config_error_naming_its_owner_and_field(make, owner, field):
    """One convention for every check (pipeline/validate.py): a ConfigError whose message starts with the stage (or
    config) and names the field -- never a ValueError, whichever object is made."""
    from pipeline.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        make()
    assert caught.value.field == field and str(caught.value).startswith(f"{owner}: "), caught.value


def test_one_set_of_validation_helpers():
    """The checks live in pipeline/validate.py alone; no module keeps a range / choice / field check of its own."""
    import re

    root = Path(__file__).resolve().parent.parent / "pipeline"
    pattern = re.compile(r"^def (check_range|at_least|above|between|choice|one_word|field_problem|same_kind)\(", re.M)
    defined = sorted(f"{path.relative_to(root)}: {name}" for path in root.rglob("*.py")
                     for name in pattern.findall(path.read_text(encoding="utf-8")))
    assert all(entry.startswith("validate.py: ") for entry in defined), defined


def test_a_run_tag_with_whitespace_is_refused_before_anything_is_written(tmp_path):
    """Whoever writes a run (a command, an experiment, the Python API): a tag that is not one word is a ConfigError,
    since a reader splits the TREC line on whitespace."""
    from pipeline.data.runs import Run
    from pipeline.errors import ConfigError

    run = Run({"q1": [("d1", 1.0)]})
    with pytest.raises(ConfigError, match="tag='my tag'; expected one word") as caught:
        run.write(tmp_path / "x.trec", tag="my tag")
    assert caught.value.field == "tag" and list(tmp_path.iterdir()) == []

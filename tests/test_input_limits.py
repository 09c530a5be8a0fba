"""Issue 60 (parts 5, 6): inputs refused, never hung on or traced back; ids that print alike are one id.

Relevance labels within -LABEL_LIMIT..LABEL_LIMIT (the evaluator's memory grows with the highest label), a YAML
key given twice, a FIFO, device, folder or symlink loop where a file is read, a spec of any length, nesting in
specs and JSON files, and ids that print as other ids (docs/input-rules.md). Commands are run as a user runs
them: in-process through the dispatcher, or as a subprocess with a timeout where the old behaviour was a hang.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.errors import InputError
from support import irpipe, write_collection

RUN = "1 Q0 d1 1 2.0 t\n1 Q0 d4 2 1.0 t\n2 Q0 d2 1 1.0 t\n"


def _cli(*argv, timeout: int = 60) -> subprocess.CompletedProcess:
    """`irpipe ARGV` as a subprocess (stdin closed), killed after `timeout` s: a hang fails the test, not the suite.
    It runs in `/`, so `-m` finds the package the tests import (PYTHONPATH or the install), not a checkout's in cwd."""
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "-q", *map(str, argv)], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd="/")


# -- relevance labels --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("label", ["2147483648", "4294967296", "1000001", "-1000001", "2147483647"])
def test_a_label_outside_the_range_is_refused_naming_file_line_and_field(tmp_path, capsys, label):
    """2^31 grew `irpipe eval` by gigabytes; 2^32 and above scored every measure 0.0000, exit 0."""
    (tmp_path / "run.trec").write_text(RUN)
    (tmp_path / "q.txt").write_text(f"1 0 d1 1\n1 0 d4 {label}\n")
    code, _, err = irpipe(capsys, "eval", tmp_path / "run.trec", "--qrels", tmp_path / "q.txt", "-m", "AP")
    assert code == 2
    assert f"q.txt:2 [relevance]: relevance {label} is not an integer from -1,000,000 to 1,000,000" in err


def test_a_label_out_of_range_in_a_python_mapping_is_refused():
    from pipeline.evaluation import evaluate

    with pytest.raises(InputError, match=r"qrels \[relevance\]: relevance 2147483648 .*\(query '1'\)"):
        evaluate({"1": {"d1": 1.0}}, {"1": {"d1": 2**31}}, "AP")


def _peak_rss_kib(argv: list[str]) -> int:
    """The peak resident memory (KiB) of one `irpipe` subprocess, from the kernel's own account of it (wait4)."""
    process = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "-q", *argv], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, cwd="/")
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.returncode == 0
    return usage.ru_maxrss


def test_a_label_at_the_limit_is_evaluated_in_bounded_memory(tmp_path):
    """The highest label allowed costs the evaluator 8 bytes a level: 8 MB more than a label of 1 (measured 44.5 MB
    against 52.5 MB); each judged query reuses that memory."""
    (tmp_path / "run.trec").write_text("".join(f"{q} Q0 d1 1 2.0 t\n{q} Q0 d2 2 1.0 t\n" for q in range(50)))
    peaks = {}
    for label in (1, 1_000_000):
        (tmp_path / "q.txt").write_text("".join(f"{q} 0 d1 {label}\n{q} 0 d2 0\n" for q in range(50)))
        peaks[label] = _peak_rss_kib(["eval", str(tmp_path / "run.trec"), "--qrels", str(tmp_path / "q.txt"),
                                      "-m", "AP", "nDCG@10"])
    assert peaks[1_000_000] - peaks[1] < 32 * 1024


# -- paths that are not regular files -----------------------------------------------------------------------------

def _special(tmp_path: Path, kind: str) -> Path:
    if kind == "fifo":
        os.mkfifo(tmp_path / "fifo")
        return tmp_path / "fifo"
    if kind == "loop":
        (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
        (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
        return tmp_path / "loop1"
    return {"device": Path("/dev/zero"), "folder": tmp_path}[kind]


KINDS = {"fifo": "is a FIFO (named pipe), not a regular file", "device": "is a device, not a regular file",
         "folder": "is a folder, not a regular file", "loop": "cannot be read (a symlink loop)"}


# every flag and kind but a folder as --corpus: a corpus may be a folder of JSONL files (docs/data.md;
# tests/data/test_cache_keys.py)
CASES = [(flag, kind) for flag in ("--topics", "--qrels", "--corpus", "run") for kind in KINDS
         if (flag, kind) != ("--corpus", "folder")]


@pytest.mark.parametrize("flag, kind", CASES)
def test_a_path_that_is_not_a_regular_file_is_refused_before_any_read(tmp_path, kind, flag):
    """A FIFO or /dev/zero as --topics or --corpus was hashed forever; a symlink loop was 'no such file' or a
    RuntimeError traceback. Each is exit 2 naming the path and what it is, before anything is read."""
    data = write_collection(tmp_path / "tiny")
    special = _special(tmp_path / "tiny" if kind == "folder" else tmp_path, kind)
    files = {"--topics": data / "topics.tsv", "--qrels": data / "qrels.txt", "--corpus": data / "docs.jsonl"}
    (tmp_path / "run.trec").write_text(RUN)
    if flag == "run":
        result = _cli("eval", special, "--qrels", files["--qrels"], "-m", "AP")
    else:
        files[flag] = special
        result = _cli("run", "bm25()", *(part for pair in files.items() for part in pair),
                      "--output", tmp_path / "out.trec", "--results-dir", tmp_path / "results")
    assert result.returncode == 2, result.stderr
    assert f"{special}: {KINDS[kind]}" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("kind", ["fifo", "device", "loop"])
def test_a_dataset_yaml_naming_a_special_file_is_refused_naming_its_field(tmp_path, kind):
    folder = write_collection(tmp_path / "tiny")
    (folder / "qrels.txt").unlink()
    (folder / "qrels.txt").symlink_to(_special(tmp_path, kind))
    (tmp_path / "run.trec").write_text(RUN)
    result = _cli("eval", tmp_path / "run.trec", "--dataset", folder, "-m", "AP")
    assert result.returncode == 2, result.stderr
    assert "dataset.yaml [files.qrels]: " in result.stderr and "qrels.txt " in result.stderr


# -- YAML keys given twice -----------------------------------------------------------------------------------------

def test_a_dataset_yaml_with_files_twice_is_refused_naming_both_lines(tmp_path, capsys):
    """`files:` twice: the last one won, and the dataset lost its qrels or corpus without a word."""
    folder = write_collection(tmp_path / "tiny")
    (folder / "dataset.yaml").write_text("name: dup\nfiles:\n  topics: topics.tsv\nfiles:\n  topics: topics.tsv\n"
                                         "  qrels: qrels.txt\n  corpus: docs.jsonl\n")
    (tmp_path / "run.trec").write_text(RUN)
    code, _, err = irpipe(capsys, "eval", tmp_path / "run.trec", "--dataset", folder, "-m", "AP")
    assert code == 2
    assert "dataset.yaml:4 [files]: key 'files' given twice, on lines 2 and 4" in err


def test_an_experiment_with_expected_twice_is_refused_naming_both_lines(tmp_path):
    """`--check` passed against the second `expected:`, the first shadowed."""
    from pipeline.experiment import Experiment

    path = tmp_path / "dup.yaml"
    path.write_text("dataset: cacm\npipeline: bm25()\nmeasures: [AP]\nexpected: {AP: 0.9}\nexpected: {AP: 0.3114}\n")
    with pytest.raises(InputError, match=r"dup.yaml:5 \[expected\]: key 'expected' given twice, on lines 4 and 5"):
        Experiment.load(path)


def test_a_key_twice_in_a_nested_mapping_is_refused_and_keys_once_are_read():
    from pipeline.data.yaml_files import parse_yaml

    assert parse_yaml("files:\n  topics: a\n  qrels: b\n", "x.yaml") == {"files": {"topics": "a", "qrels": "b"}}
    with pytest.raises(InputError, match=r"x.yaml:3 \[topics\]: key 'topics' given twice, on lines 2 and 3"):
        parse_yaml("files:\n  topics: a\n  topics: b\n", "x.yaml")


# -- specs: any length, bounded nesting -----------------------------------------------------------------------------

def test_a_spec_longer_than_a_file_name_is_a_spec(capsys):
    """The CLI asked the file system whether a spec is a file: over 255 characters that was an OSError traceback."""
    spec = "fusion(" + ", ".join(["bm25(k1=0.90, b=0.40, hits=1000) % 100 >> bm25(k1=1.2, b=0.75)"] * 4) + ")"
    assert len(spec) > 255
    code, _, err = irpipe(capsys, "run", spec)
    assert code == 2 and "a pipeline spec needs data" in err


def test_a_spec_longer_than_a_file_name_is_a_system_of_ir_experiment(tmp_path, monkeypatch):
    """ir.Experiment asked the file system whether a spec string is a run file: over 255 characters, an OSError."""
    import pipeline as ir

    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    data = write_collection(tmp_path / "tiny")
    spec = "fusion(" + ", ".join(["bm25(k1=0.90, b=0.40, hits=1000) % 100 >> bm25(k1=1.2, b=0.75)"] * 4) + ")"
    assert len(spec) > 255
    table = ir.Experiment([spec], str(data), ["AP"])
    assert table.runs == [spec] and 0 < table.scores[spec]["AP"] <= 1


def test_a_spec_nested_past_the_bound_is_refused_naming_it():
    from pipeline.spec import MAX_DEPTH, SpecError, parse

    parse("(" * (MAX_DEPTH - 1) + "bm25()" + ")" * (MAX_DEPTH - 1))  # at the bound: bm25's brackets are one level
    with pytest.raises(SpecError, match=f"brackets nested deeper than {MAX_DEPTH} levels"):
        parse("fusion(" * 250 + "bm25()" + ")" * 250)


# -- JSON nesting ------------------------------------------------------------------------------------------------------

DEEP = "[" * 1000 + "]" * 1000


def test_deep_json_is_refused_by_every_reader_naming_the_file(tmp_path):
    """~1,000 nested brackets in index metadata, a store manifest, a checkpoint's config.json or a results file
    were RecursionError tracebacks."""
    from pipeline.data.files import MAX_JSON_DEPTH, json_lines, read_index_metadata, read_json
    from pipeline.rerank.checkpoint import read_checkpoint_config
    from pipeline.rerank.store_manifest import read_manifest

    for name in ("irpipe-index.json", "manifest.json", "config.json", "result.json"):
        (tmp_path / name).write_text(DEEP)
    (tmp_path / "c.jsonl").write_text('{"id": "d1", "contents": "a"}\n{"id": "d2", "x": ' + DEEP + "}\n")
    readers = [(read_index_metadata, tmp_path, "irpipe-index.json:1: damaged index record"),
               (read_manifest, tmp_path, "manifest.json: not a readable store manifest"),
               (read_checkpoint_config, tmp_path, "config.json:1: not valid JSON"),
               (read_json, tmp_path / "result.json", "result.json:1: not valid JSON"),
               (lambda path: list(json_lines(path)), tmp_path / "c.jsonl", "c.jsonl:2: not a JSON object")]
    for read, where, message in readers:
        with pytest.raises(InputError, match=f"{message}.*nested deeper than {MAX_JSON_DEPTH} levels"):
            read(where)
    (tmp_path / "result.json").write_text("[" * MAX_JSON_DEPTH + '"[[[{"' + "]" * MAX_JSON_DEPTH)
    assert read_json(tmp_path / "result.json") is not None  # at the bound, brackets in strings not counted


# -- ids that print alike ----------------------------------------------------------------------------------------------

ALIKE = [("e\u0301", "not in Unicode's composed form (NFC)"), ("\u212a1", "not in Unicode's composed form (NFC)"),
         ("d1\ufe0f", "U+FE0F (VARIATION SELECTOR-16) at character 3, shown as nothing"),
         ("d\u034f1", "U+034F (COMBINING GRAPHEME JOINER) at character 2, shown as nothing"),
         ("d1\u3164", "U+3164 (HANGUL FILLER) at character 3, shown as nothing")]
FILES = [("q.txt", "q0 0 d0 1\nq0 0 {} 1\n", "docid"), ("r.trec", "q0 Q0 d0 1 2.0 t\nq0 Q0 {} 2 1.0 t\n", "docid"),
         ("t.tsv", "q0\tfirst\n{}\tsecond\n", "qid"),
         ("c.jsonl", '{{"id": "d0", "contents": "a"}}\n{{"id": "{}", "contents": "b"}}\n', "id")]


@pytest.mark.parametrize("ident, message", ALIKE, ids=[m.split(" (")[0][:20] for _, m in ALIKE])
@pytest.mark.parametrize("name, text, field", FILES, ids=[f[0] for f in FILES])
def test_an_id_that_prints_as_another_is_refused_naming_file_line_and_field(tmp_path, ident, message, name,
                                                                            text, field):
    """`e` + U+0301 prints as `é` (U+00E9) and was another id to every reader, a run's document never matching
    the qrels' `é`; a variation selector or filler prints as nothing."""
    from pipeline.data.corpus import iter_docs
    from pipeline.data.qrels import read_qrels
    from pipeline.data.runs import read_run
    from pipeline.data.topics import read_topics

    read = {"q.txt": read_qrels, "r.trec": read_run, "t.tsv": read_topics, "c.jsonl": lambda p: list(iter_docs(p))}
    (tmp_path / name).write_text(text.format(ident), encoding="utf-8")
    with pytest.raises(InputError, match=rf"{name}:2 \[{field}\]: .*{re.escape(message)}") as error:
        read[name](tmp_path / name)
    assert str(error.value).isprintable()
    (tmp_path / name).write_text(text.format("\u00e9\u4e2d\U0001f600"), encoding="utf-8")  # composed: an id
    read[name](tmp_path / name)


def test_a_python_run_with_an_id_not_composed_is_refused():
    from pipeline.data.runs import Run

    with pytest.raises(InputError, match=r"Run \[docid\]: .*not in Unicode's composed form"):
        Run({"q1": [("e\u0301", 1.0)]})

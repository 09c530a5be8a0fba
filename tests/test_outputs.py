"""Outputs proven writable before any work (pipeline/data/outputs.py): a folder where a file is needed, a file where
a folder is needed, a special file system, a folder of other files for a store -- exit 2 naming the path before a
query is searched, a model loaded or a run read (before: a traceback after the whole search or rerank, the result
lost). A final write that fails anyway keeps the computed run and says where."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pipeline.errors import OutputError
from support import irpipe, write_collection

IS_FOLDER, IS_FILE = "is a folder, and a file is needed here", "is a file, and a folder is needed here"
SPECIAL = "cannot write: no file can be made in /proc"


class WorkStarted(Exception):
    """Raised by a command's first piece of work: the output should have been refused before it."""


@pytest.fixture
def place(tmp_path, monkeypatch) -> Path:
    """A working folder with a tiny collection (c/), a pairs dataset (qa/), two runs, folders (runs/, x.png/) and a
    file."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    write_collection(tmp_path / "c")
    (tmp_path / "qa").mkdir()
    (tmp_path / "qa" / "pairs.tsv").write_text("1\tsky colour\tthe sky is blue\n0\tsky colour\tgrass grows\n")
    (tmp_path / "qa" / "dataset.yaml").write_text("kind: pairs\nfiles: {pairs: pairs.tsv}\n")
    (tmp_path / "run.trec").write_text("1 Q0 d1 1 2.0 x\n1 Q0 d4 2 1.0 x\n")
    (tmp_path / "other.trec").write_text("1 Q0 d4 1 2.0 y\n1 Q0 d1 2 1.0 y\n")
    (tmp_path / "runs").mkdir()
    (tmp_path / "x.png").mkdir()  # where `irpipe run --output x.trec --baseline ...` puts its plot
    (tmp_path / "file").write_text("not a folder\n")
    return tmp_path


DATA = ["--topics", "c/topics.tsv", "--corpus", "c/docs.jsonl"]
# (command line, the first piece of work it would do (module, attribute), the path named, what is wrong)
CASES = {
    "search to a folder": (["search", *DATA, "--output", "runs/"], ("pipeline.experiment", "run_pipeline"),
                           "runs", IS_FOLDER),
    "search to /proc": (["search", *DATA, "--output", "/proc/x.trec"], ("pipeline.experiment", "run_pipeline"),
                        "/proc/x.trec", SPECIAL),
    "search under a file": (["search", *DATA, "--output", "file/x.trec"], ("pipeline.experiment", "run_pipeline"),
                            "file/x.trec", "file is a file, so no folder can be made there"),
    "run to a folder": (["run", "bm25()", *DATA, "--qrels", "c/qrels.txt", "--output", "runs/"],
                        ("pipeline.experiment", "run_pipeline"), "runs", IS_FOLDER),
    "run's baseline plot": (["run", "bm25()", *DATA, "--qrels", "c/qrels.txt", "--baseline", "bm25(k1=1.2)",
                             "--output", "x.trec"], ("pipeline.experiment", "run_pipeline"), "x.png", IS_FOLDER),
    "rerank to a folder": (["rerank", "--model", "biencoder", "--run", "run.trec", *DATA, "--output", "runs/"],
                           ("pipeline.experiment", "run_pipeline"), "runs", IS_FOLDER),
    "eval --plot to a folder": (["eval", "run.trec", "--qrels", "c/qrels.txt", "--baseline", "other.trec",
                                 "--plot", "runs/"], ("pipeline.commands.eval", "read_run"), "runs", IS_FOLDER),
    "train to a file": (["train", "monobert", "--train", "qa", "--output", "file"],
                        ("pipeline.training.loop", "train"), "file", IS_FILE),
    "pretrain-mlm to a file": (["pretrain-mlm", "--output", "file"], ("pipeline.training.mlm", "corpus_texts"),
                               "file", IS_FILE),
    "index over a file": (["index", "--input", "c/docs.jsonl", "--output", "file", "--overwrite"],
                          ("pipeline.commands.index", "_docs_from_args"), "file", IS_FILE),
    "encode to a file": (["encode", "--model", "biencoder", "--corpus", "c/docs.jsonl", "--output", "file"],
                         ("pipeline.stages.neural", "reranker_for_model"), "file", IS_FILE),
    "encode into other files": (["encode", "--model", "biencoder", "--corpus", "c/docs.jsonl", "--output", "c"],
                                ("pipeline.stages.neural", "reranker_for_model"), "c",
                                "holds other files (dataset.yaml, docs.jsonl, qrels.txt and 1 more) and is not an "
                                "encoding store (no manifest.json): encode into a new or empty folder"),
    "keywords to a folder": (["keywords", "build", "--corpus", "c/docs.jsonl", "--output", "runs"],
                             ("pipeline.commands.keywords", "corpus_documents"), "runs", IS_FOLDER),
    "tune to a folder": (["tune", "bm25(k1={k})", "--grid", "k=0.9,1.2", "--dataset", "c", "--output", "runs"],
                         ("pipeline.commands.tune", "grid_search"), "runs", IS_FOLDER),
}


@pytest.mark.parametrize("case", CASES)
def test_an_unwritable_output_is_refused_before_any_work(case, place, monkeypatch, capsys):
    argv, (module, name), path, fault = CASES[case]

    def work(*args, **kwargs):
        raise WorkStarted(f"{module}.{name} ran before the output was checked")

    monkeypatch.setattr(f"{module}.{name}", work)

    def made() -> list[Path]:  # every file but the digests' memo (pipeline/data/digests.py): a dataset named by its
        return sorted(p.relative_to(place) for p in place.rglob("*")  # files is keyed by their content on reading
                      if not p.relative_to(place).parts[:2] in (("cache",), ("cache", "digests")))

    files = made()
    code, _, err = irpipe(capsys, *argv)
    assert code == 2 and "Traceback" not in err, err
    assert f"{path}: {fault}" in err, err
    assert made() == files  # nothing made, nothing left


def test_the_python_api_checks_its_output_before_the_run(place, monkeypatch):
    import pipeline as ir

    def work(*args, **kwargs):
        raise WorkStarted("the pipeline ran before the output was checked")

    monkeypatch.setattr("pipeline.api.run_pipeline", work)
    with pytest.raises(OutputError, match=f"^runs: {IS_FOLDER}"):
        ir.run("overlap()", "qa", output="runs")


@pytest.mark.parametrize("path, kind, fault", [
    ("runs", "file", IS_FOLDER), ("file", "folder", IS_FILE), ("/dev/null", "file", "is not a regular file"),
    ("file/sub/x.trec", "file", "file is a file, so no folder can be made there"),
    ("/proc/irpipe-out", "folder", SPECIAL), ("/sys/x.trec", "file", "cannot write: Permission denied"),
])
def test_check_writable_names_the_path_and_the_fault(path, kind, fault, place):
    from pipeline.data.outputs import check_writable

    with pytest.raises(OutputError) as error:
        check_writable(path, kind)
    assert str(error.value).startswith(f"{path}: ") and fault in str(error.value)


def test_check_writable_passes_a_new_place_and_leaves_nothing_there(place):
    from pipeline.data.outputs import check_writable

    for path, kind in (("new/deep/x.trec", "file"), ("runs/x.trec", "file"), ("runs", "folder"), ("new2", "folder"),
                       ("file", "file")):
        assert check_writable(path, kind) == Path(path)
    assert not (place / "new").exists() and not (place / "new2").exists()
    assert list((place / "runs").iterdir()) == [] and not [p for p in place.iterdir() if p.name.startswith(".")]


def test_a_final_write_that_fails_keeps_the_run_and_says_where(place, monkeypatch, capsys):
    """The check passed, then the disk filled while the pipeline ran: exit 2 naming the run file, and the computed
    run kept under $IRPIPE_CACHE/recovered/, whole, which the message names."""
    from pipeline.data import runs

    real = runs.atomic_write

    def full(path, *args, **kwargs):
        if Path(path).name == "o.trec":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(runs, "atomic_write", full)
    code, _, err = irpipe(capsys, "run", "overlap()", "--dataset", "qa", "--output", "runs/o.trec")
    assert code == 2 and "Traceback" not in err, err
    [kept] = (place / "cache" / "recovered").iterdir()
    assert kept.name.startswith("o.") and kept.suffix == ".trec"
    assert "runs/o.trec: cannot write: No space left on device; free some space or write elsewhere" in err
    assert f"the computed run is kept in {kept}: copy it from there (cp {kept} runs/o.trec)" in err
    assert len(kept.read_text().splitlines()) == 2 and not (place / "runs" / "o.trec").exists()

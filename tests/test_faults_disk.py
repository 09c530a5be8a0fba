"""Full disks and read-only places, on a small tmpfs each test mounts (skipped where mounting is not allowed): every
writer ends in exit 2 naming the file or folder the user asked for (with the bytes free, and needed where known),
no scratch or half-written file left, and the same command resumes once there is space.

Root ignores chmod, so a read-only place is a tmpfs remounted read-only. The slow cases (the Java indexer filling
the disk; a JVM start each) run with IRPIPE_SLOW_FAULTS=1; their output is recorded in eval/FAULTS.md.
"""
from __future__ import annotations

import filecmp
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from pipeline.errors import OutputError
from support import irpipe, save_tiny_bert, write_collection

PAGE = 4096
slow = pytest.mark.skipif(os.environ.get("IRPIPE_SLOW_FAULTS", "") in ("", "0"),
                          reason="a slow fault test (a JVM start each): IRPIPE_SLOW_FAULTS=1 pytest "
                                 "tests/test_faults_disk.py -k slow (output recorded in eval/FAULTS.md)")


@pytest.fixture
def tmpfs(tmp_path):
    """make(name, size, free=None, read_only=False): a tmpfs of `size` mounted at tmp_path/name, filled up to `free`
    bytes (whole pages) by a file `filler`, or remounted read-only; unmounted after the test."""
    mounted: list[Path] = []

    def make(name: str, size: str = "2m", free: int | None = None, read_only: bool = False) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}): the full-disk "
                        "tests need root with CAP_SYS_ADMIN")
        mounted.append(folder)
        if free is not None:
            fill(folder, free)
        if read_only:
            remount(folder, "ro")
        return folder

    yield make
    for folder in reversed(mounted):
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path, free: int) -> None:
    """Fill the file system of `folder` with `filler`, then give back `free` bytes of it."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * PAGE)
    except OSError:
        pass
    finally:
        os.close(fd)
    os.truncate(folder / "filler", max(0, (folder / "filler").stat().st_size - free))


def remount(folder: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(folder)], check=True)


def left(folder: Path) -> list[str]:
    """What is under `folder` but the filler: scratch files included (names starting with a dot)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.name != "filler")


@pytest.mark.parametrize("place", ["full", "read-only"])
def test_atomic_write_names_the_file_and_leaves_nothing(tmpfs, place):
    """Before: a read-only folder was reported as the scratch file (`.run.trec.PID.xyz.tmp: cannot write`)."""
    from pipeline.data.files import atomic_write

    folder = tmpfs("out", free=0) if place == "full" else tmpfs("out", read_only=True)
    with pytest.raises(OutputError) as error, atomic_write(folder / "run.trec") as out:
        out.write("q1 Q0 d1 1 2.5 tag\n" * 1000)
    reason = "No space left on device; free some space or write elsewhere (0 bytes free)" if place == "full" \
        else "Read-only file system; the file system is read-only: write elsewhere"
    assert str(error.value) == f"{folder / 'run.trec'}: cannot write: {reason}"
    assert left(folder) == []


def test_writers_by_path_name_the_file_and_the_bytes_needed(tmpfs):
    """safetensors (an error of its own, errno in the text) and numpy's tofile (an OSError without errno or file)
    through write_by_path. Before: `SafetensorError: ... No space left on device (os error 28)` and
    `OSError: 1048576 requested and 0 written`, tracebacks naming no file, a partial scratch file left."""
    import numpy as np
    import torch
    from safetensors.torch import save_file

    from pipeline.data.files import write_by_path

    folder = tmpfs("out", free=16 * PAGE)
    tensors = {"w": torch.zeros(256, 1024)}  # 1 MiB
    with pytest.raises(OutputError, match=r"weights.safetensors: cannot write: No space left on device; .*"
                                          r"\(1,048,576 bytes needed, 65,536 bytes free\)"):
        write_by_path(folder / "weights.safetensors", lambda path: save_file(tensors, path), needed=1 << 20)
    rows = np.zeros(1 << 20, dtype=np.uint8)
    with pytest.raises(OutputError, match=r"shard-00000.bin: cannot write: No space left on device; .*"
                                          r"\(1,048,576 bytes needed, 65,536 bytes free\)"):
        write_by_path(folder / "shard-00000.bin", rows.tofile, needed=rows.nbytes)
    assert left(folder) == []


def test_an_output_on_a_read_only_place_is_refused_before_the_search(tmpfs, tmp_path, capsys, monkeypatch):
    """`irpipe search --output` on a read-only file system: exit 2 naming the run file before a query is searched
    (pipeline/data/outputs.py). Before: the whole search ran first, then the write failed."""
    folder = tmpfs("out", read_only=True)
    write_collection(tmp_path / "c")

    def search(*args, **kwargs):
        raise AssertionError("the search ran before the output was checked")

    monkeypatch.setattr("pipeline.experiment.run_pipeline", search)
    code, _, err = irpipe(capsys, "search", "--topics", tmp_path / "c" / "topics.tsv", "--corpus",
                          tmp_path / "c" / "docs.jsonl", "--output", folder / "runs" / "x.trec")
    assert code == 2 and "Traceback" not in err, err
    assert f"{folder / 'runs' / 'x.trec'}: cannot write: Read-only file system" in err


@pytest.fixture
def documents(tmp_path) -> Path:
    """20,000 documents, 1.8 MB as JSONL: more than the scratch part files of a 2 MB tmpfs can hold."""
    path = tmp_path / "docs.jsonl"
    with open(path, "w") as out:
        for number in range(20_000):
            out.write(json.dumps({"id": f"d{number}", "contents": f"word{number % 997} text {number}"}) + "\n")
    return path


@pytest.mark.parametrize("place", ["full", "read-only"])
def test_index_names_the_index_and_removes_its_scratch(tmpfs, documents, capsys, place):
    """The documents' part files (written by Python before Anserini starts) fill the disk. Before: exit 1 and
    `OSError: [Errno 28] No space left on device` in _write_parts; read-only named the scratch folder."""
    folder = tmpfs("out", free=64 * PAGE) if place == "full" else tmpfs("out", read_only=True)
    code, _, err = irpipe(capsys, "index", "--input", documents, "--output", folder / "idx", "--threads", "1")
    assert code == 2 and "Traceback" not in err, err
    reason = "No space left on device" if place == "full" else "Read-only file system"
    assert f"irpipe index: error: {folder / 'idx'}: cannot write: {reason}" in err
    assert left(folder) == []  # no scratch folder, no index


def _pairs(folder: Path, count: int) -> Path:
    folder.mkdir()
    rows = [(1 - i % 2, f"question {i // 2}", f"answer text number {i} " * 5) for i in range(count)]
    (folder / "pairs.tsv").write_text("".join(f"{label}\t{a}\t{b}\n" for label, a, b in rows))
    (folder / "dataset.yaml").write_text("kind: pairs\nfiles: {pairs: pairs.tsv}\n")
    return folder


def _rerank_with_a_full_cache(tmpfs, tmp_path, capsys, monkeypatch, output_on_the_cache: bool):
    """`irpipe run overlap()` on labelled pairs (their texts: no index, no Java), its cache on a full tmpfs, and
    the same run without the cache: (exit code, stderr, the cache, the run file asked for, the uncached run)."""
    data = _pairs(tmp_path / "qa", 12)
    argv = ["run", "overlap()", "--dataset", data, "--output"]
    uncached = tmp_path / "uncached" / "run.trec"  # the run's tag is its file's name
    assert irpipe(capsys, *argv, uncached, "--no-cache", "--results-dir", tmp_path / "r0")[0] == 0
    cache = tmpfs("cache", free=0)
    monkeypatch.setenv("IRPIPE_CACHE", str(cache))
    output = (cache if output_on_the_cache else tmp_path) / "runs" / "run.trec"
    code, _, err = irpipe(capsys, *argv, output, "--results-dir", tmp_path / "r1")
    assert "Traceback" not in err and "stage cache: overlap(idf=True): its output is not stored (" in err, err
    assert f"{cache / 'stages'}/" in err and "cannot write: No space left on device" in err
    return code, err, cache, output, uncached.read_text()


def test_a_rerank_whose_cache_entry_cannot_be_stored_still_writes_its_run(tmpfs, tmp_path, capsys, monkeypatch):
    """A full cache: the stage's entry is not stored, which is said, and the run is written, the uncached run's.
    Before: exit 2 naming the entry once the scoring was done, and no run."""
    code, err, cache, output, uncached = _rerank_with_a_full_cache(tmpfs, tmp_path, capsys, monkeypatch, False)
    assert code == 0 and output.read_text() == uncached, err
    assert not [name for name in left(cache) if name.rsplit("/", 1)[-1].startswith(".")]  # no scratch left


def test_a_rerank_on_a_full_disk_keeps_its_run_under_recovered(tmpfs, tmp_path, capsys, monkeypatch):
    """The cache and the run file on one full disk: the entry is not stored, the run file cannot be written either,
    and the run is kept (under the system's temporary folder, the cache being full) with the `cp` to run. Before:
    exit 2 naming the stage's entry, and nothing kept."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    code, err, _, output, uncached = _rerank_with_a_full_cache(tmpfs, tmp_path, capsys, monkeypatch, True)
    [kept] = (tmp_path / "tmp" / "irpipe-recovered").iterdir()
    assert code == 2 and kept.read_text() == uncached
    assert f"irpipe run: error: {output}: cannot write: No space left on device" in err
    assert f"the computed run is kept in {kept}: copy it from there (cp {kept} {output})" in err


@pytest.mark.slow
def test_training_on_a_full_disk_resumes_once_there_is_space(tmpfs, tmp_path, capsys):
    """Two epochs of a tiny monobert into a 26 MB tmpfs: epoch 1 (its best checkpoint, 5 MB, and its state, 14 MB)
    fits, epoch 2's state does not. Exit 2 naming the state folder, which is removed; the committed state of epoch
    1 stays. Freed space (the tmpfs grown), `--resume` finishes: the same weights as an uninterrupted run. Before:
    exit 1, `SafetensorError: Error while serializing: I/O error: No space left on device (os error 28)`."""
    bert, data = save_tiny_bert(tmp_path / "bert", layers=1), _pairs(tmp_path / "qa", 8)
    argv = ["train", "monobert", "--train", data, "--epochs", "2", "--set", f"bert={bert}", "--set", "max_length=32",
            "--threads", "1", "--seed", "0"]
    assert irpipe(capsys, *argv, "--output", tmp_path / "whole")[0] == 0
    folder = tmpfs("out", size="26m")
    code, _, err = irpipe(capsys, *argv, "--output", folder / "model")
    assert code == 2 and "Traceback" not in err, err
    state = folder / "model" / "state"
    assert f"{state / 'epoch-0002' / 'trainer.safetensors'}: cannot write: No space left on device" in err
    assert re.search(r"\([\d,]+ bytes needed, [\d,]+ bytes free\)", err) and "continue with --resume" in err
    assert json.loads((folder / "model" / "state" / "current.json").read_text())["epoch"] == 1
    assert not [name for name in left(folder) if "epoch-0002" in name or name.rsplit("/", 1)[-1].startswith(".")]
    remount(folder, "size=64m")
    assert irpipe(capsys, *argv, "--output", folder / "model", "--resume")[0] == 0
    assert filecmp.cmp(folder / "model" / "model.safetensors", tmp_path / "whole" / "model.safetensors", shallow=False)
    losses = [[json.loads(line)["loss"] for line in (path / "train.jsonl").read_text().splitlines()]
              for path in (folder / "model", tmp_path / "whole")]
    assert losses[0] == losses[1] and len(losses[0]) == 2


def _encode(capsys, bert: Path, data: Path, output: Path) -> tuple[int, str, str]:
    return irpipe(capsys, "encode", "--model", "biencoder", "--set", f"bert={bert}", "--dataset", data, "--output",
                  output, "--shard-size", "3")


def _listed(store: Path) -> int:
    manifest = store / "manifest.json"
    return len(json.loads(manifest.read_text())["shards"]) if manifest.is_file() else 0


def test_encoding_on_a_full_disk_resumes_into_the_same_store(tmpfs, tmp_path, capsys):
    """12 documents, 4 shards, into a tmpfs with room for some: the encode stops with the listed shards whole;
    freed space, the same command encodes the rest only, and the store is byte for byte an uninterrupted one's."""
    bert, data = save_tiny_bert(tmp_path / "bert", layers=1), _pairs(tmp_path / "qa", 12)
    assert _encode(capsys, bert, data, tmp_path / "whole")[0] == 0
    folder = tmpfs("out", free=6 * PAGE)
    code, _, err = _encode(capsys, bert, data, folder / "store")
    assert code != 0 and 1 <= _listed(folder / "store") < 4, err
    remount(folder, "size=8m")
    code, _, err = _encode(capsys, bert, data, folder / "store")
    assert code == 0, err
    assert_same_store(folder / "store", tmp_path / "whole")


def assert_same_store(store: Path, reference: Path) -> None:
    """Every shard file byte for byte the same, and the manifests the same but for the command that made them (its
    --output differs)."""
    names = sorted(p.name for p in reference.iterdir())
    assert sorted(p.name for p in store.iterdir()) == names
    shards = [name for name in names if name != "manifest.json"]
    assert filecmp.cmpfiles(reference, store, shards, shallow=False)[1:] == ([], [])
    manifests = [json.loads((folder / "manifest.json").read_text()) for folder in (store, reference)]
    assert [{k: v for k, v in m.items() if k != "command"} for m in manifests][0] == \
        {k: v for k, v in manifests[1].items() if k != "command"}


def test_encoding_on_a_full_disk_is_an_error_naming_the_shard(tmpfs, tmp_path, capsys):
    """Before: exit 1, `OSError: [Errno 28] No space left on device` from Path.write_text (numpy's tofile: `OSError:
    192 requested and 0 written`, no errno), naming no file, a `.shard-00000.ids.PID.tmp` left."""
    bert, data = save_tiny_bert(tmp_path / "bert", layers=1), _pairs(tmp_path / "qa", 12)
    folder = tmpfs("out", free=0)
    code, _, err = _encode(capsys, bert, data, folder / "store")
    assert code == 2 and "Traceback" not in err, err
    assert f"{folder / 'store'}/shard-00000" in err and "No space left on device" in err
    assert not [name for name in left(folder) if name.rsplit("/", 1)[-1].startswith(".")]


# -- slow: Anserini (Java) fills the disk ----------------------------------------------------------------------------

@slow
def test_slow_java_indexer_on_a_full_disk(tmpfs, tmp_path, capsys):
    """The part files fit, Anserini's index does not. Before: IndexingError's 30 lines of Java log (exit 2), or a
    traceback when the parts filled it. After: one line naming the index, no scratch; with space, the same command
    builds it."""
    collection = write_collection(tmp_path / "tiny")
    folder = tmpfs("out", size="256k", free=2 * PAGE)
    argv = ["index", "--input", collection / "docs.jsonl", "--output", folder / "idx", "--threads", "1"]
    code, _, err = irpipe(capsys, *argv)
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"{folder / 'idx'}: cannot write: No space left on device" in err
    assert left(folder) == []
    remount(folder, "size=8m")
    assert irpipe(capsys, *argv)[0] == 0 and (folder / "idx" / "irpipe-index.json").is_file()


@slow
def test_slow_run_with_its_cache_on_a_full_disk(tmpfs, tmp_path, capsys, monkeypatch):
    """`irpipe run` building a dataset's index in a full cache (exit 2 naming it); with space, the same run writing
    into a read-only folder (exit 2 naming the run file); then into a writable one."""
    collection = write_collection(tmp_path / "tiny")
    cache = tmpfs("cache", free=0)
    monkeypatch.setenv("IRPIPE_CACHE", str(cache))
    argv = ["run", "bm25() % 4", "--dataset", collection, "--results-dir", tmp_path / "results", "--output"]
    code, _, err = irpipe(capsys, *argv, tmp_path / "run.trec")
    assert code == 2 and "Traceback" not in err, err
    assert f"{cache / 'indexes'}/" in err and "cannot write: No space left on device" in err
    assert not [name for name in left(cache) if name.rsplit("/", 1)[-1].startswith(".")]
    remount(cache, "size=16m")
    read_only = tmpfs("runs", read_only=True)
    code, _, err = irpipe(capsys, *argv, read_only / "run.trec")
    assert code == 2 and f"{read_only / 'run.trec'}: cannot write: Read-only file system" in err, err
    assert irpipe(capsys, *argv, tmp_path / "run.trec")[0] == 0 and (tmp_path / "run.trec").stat().st_size > 0

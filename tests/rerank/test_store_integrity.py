"""Store integrity and concurrency: a flipped byte or a cut shard is an error naming the file and the `irpipe encode`
rerun that re-encodes that shard alone (never a wrong score), and the rerun does just that; two processes encoding
into one store leave one whole store."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from pipeline.errors import InputError
from pipeline.rerank.models.addax import ADDAX, ADDAXConfig
from pipeline.rerank.store import EncodingStore, write_store

DOCS = [(f"d{i}", text) for i, text in enumerate(
    ["the sky is blue", "grass is green and grows in fields", "snow is white and cold", "coal is black",
     "blood is red", "the sun is a yellow star in the sky", "violets are purple", "oranges are orange"])]
COMMAND = "irpipe encode --model addax --corpus docs.jsonl --dtype residual2"  # as recorded: no --output


@pytest.fixture
def store(tiny_addax, tmp_path) -> Path:
    write_store(tmp_path / "s", tiny_addax, "digest", DOCS, dtype="residual2", shard_size=3, centroids=8,
                command=COMMAND)
    return tmp_path / "s"


def _rows(folder: Path) -> dict[str, torch.Tensor]:
    store = EncodingStore.open(folder, "addax", "digest")
    return {docid: store.get(docid) for docid, _ in DOCS}


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def test_a_flipped_byte_is_reported_with_the_rerun(store, tiny_addax):
    _flip(store / "shard-00001.bin")  # the size is the same: only the sha256 tells
    opened = EncodingStore.open(store, "addax", "digest")
    assert torch.equal(opened.get("d0"), opened.get("d0"))  # shard 0 is sound and reads
    with pytest.raises(InputError) as caught:
        opened.get("d3")
    message = str(caught.value)
    assert str(store / "shard-00001.bin") in message and "sha256 mismatch" in message
    assert f"run {COMMAND} --output {store} again: it re-encodes only this shard (shard-00001, 3 documents)" in message


@pytest.mark.parametrize("name", ["shard-00002.bin", "shard-00000.ids", "codec.safetensors"])
def test_a_cut_file_is_reported_at_open_or_first_read(store, name):
    path = store / name
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(InputError, match=f"{path}: (damaged: .* bytes where|missing or damaged)"):
        _rows(store)


def test_the_rerun_re_encodes_only_the_damaged_shard(store, tiny_addax, tmp_path, caplog):
    whole = _rows(store)
    manifest = json.loads((store / "manifest.json").read_text())
    kept = {name: (store / name).stat().st_mtime_ns for name in ("shard-00000.bin", "shard-00002.bin",
                                                                 "codec.safetensors")}
    _flip(store / "shard-00001.bin")
    calls, encode = [], tiny_addax.encode_prepared

    def counted(prepared, side):
        calls.append(len(prepared[0]))
        return encode(prepared, side)

    tiny_addax.encode_prepared = counted
    try:
        again = write_store(store, tiny_addax, "digest", DOCS, dtype="residual2", shard_size=3, centroids=8,
                            command=COMMAND)
    finally:
        del tiny_addax.encode_prepared
    assert sum(calls) == 3 and "shard-00001.bin: damaged" in caplog.text   # its 3 documents, nothing else
    assert again["count"] == 8 and again["codec"] == manifest["codec"]
    assert {name: (store / name).stat().st_mtime_ns for name in kept} == kept
    assert [s["name"] for s in again["shards"]] == ["shard-00000", "shard-00002", "shard-00003"]
    rows = _rows(store)
    assert all(torch.equal(rows[d], whole[d]) for d in whole)


def test_irpipe_encode_records_the_rerun_that_repairs_its_store(tiny_addax, tmp_path):
    """Through the CLI: `irpipe encode` records its own command in the manifest; a damaged shard's error gives that
    command; running it again (exit 0) re-encodes the shard and the store reads as before."""
    from pipeline.cli import main
    from pipeline.rerank.checkpoint import save_checkpoint

    checkpoint = save_checkpoint(tiny_addax, tmp_path / "addax")
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"id": d, "contents": t}) + "\n" for d, t in DOCS))
    argv = ["encode", "--model", str(checkpoint), "--corpus", str(corpus), "--output", str(tmp_path / "s"),
            "--dtype", "residual1-16", "--shard-size", "3", "--centroids", "8"]
    with pytest.raises(SystemExit) as refused:  # argparse: exit 2, naming the dtypes
        main(["-q", *argv[:-5], "residual3", *argv[-4:]])
    assert refused.value.code == 2
    assert main(["-q", *argv]) == 0
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    output = argv.index("--output")
    assert manifest["command"] == "irpipe " + " ".join(argv[:output] + argv[output + 2:-2] + [
        "--codec-sample", "2048", "--centroids", "8"])
    before = EncodingStore.open(tmp_path / "s", "addax", manifest["model_digest"])
    rows = {docid: before.get(docid) for docid, _ in DOCS}
    _flip(tmp_path / "s" / "shard-00002.bin")
    rerun = f"{manifest['command']} --output {tmp_path / 's'}"
    with pytest.raises(InputError, match=f"run {re.escape(rerun)} again: it re-encodes only this shard"):
        EncodingStore.open(tmp_path / "s", "addax", manifest["model_digest"]).get("d7")
    assert main(["-q", *rerun.split()[1:]]) == 0
    after = EncodingStore.open(tmp_path / "s", "addax", manifest["model_digest"])
    assert all(torch.equal(after.get(docid), rows[docid]) for docid in rows)


@pytest.mark.slow
def test_two_processes_encoding_into_one_store_leave_one_whole_store(tiny_bert, tmp_path):
    """Two real processes start together (a file they both wait for), one with the documents in order, one reversed,
    one shard a document: the lock makes one encode everything and the other find it done, so the store is whole:
    every document once, every listed file matching its checksum, the rows of a store made by one process."""
    script = textwrap.dedent(f"""
        import sys, time, torch
        from pathlib import Path
        from pipeline.rerank.models.addax import ADDAX, ADDAXConfig
        from pipeline.rerank.store import write_store
        docs = {DOCS!r}
        if sys.argv[1] == "reversed":
            docs = docs[::-1]
        torch.manual_seed(0)
        model = ADDAX(ADDAXConfig(bert={str(tiny_bert)!r}, max_doc_length=32)).eval()
        while not Path(sys.argv[3]).exists():
            time.sleep(0.01)
        write_store(sys.argv[2], model, "digest", docs, dtype="int8", shard_size=1)
    """)
    go = tmp_path / "go"
    env = os.environ | {"OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [subprocess.Popen([sys.executable, "-c", script, order, str(tmp_path / "s"), str(go)], env=env,
                              stderr=subprocess.PIPE, text=True) for order in ("forward", "reversed")]
    time.sleep(1)
    go.touch()
    for proc in procs:
        assert proc.wait(timeout=600) == 0, proc.stderr.read()
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert manifest["count"] == 8 and len(manifest["shards"]) == 8
    store = EncodingStore.open(tmp_path / "s", "addax", "digest")
    assert sorted(store._where) == sorted(d for d, _ in DOCS)
    torch.manual_seed(0)
    single = tmp_path / "single"
    write_store(single, ADDAX(ADDAXConfig(bert=str(tiny_bert), max_doc_length=32)).eval(), "digest", DOCS,
                dtype="int8", shard_size=1)
    alone = EncodingStore.open(single, "addax", "digest")
    for docid, _ in DOCS:  # every shard's sha256 checked on this first read; the rows of a one-process store
        torch.testing.assert_close(store.get(docid), alone.get(docid), rtol=0, atol=1e-6)
    assert not list((tmp_path / "s").glob(".*.tmp"))

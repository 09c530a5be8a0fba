"""A store's manifest checks itself (pipeline/rerank/store_manifest.py): every single digit of it changed is an error
naming the manifest -- never a traceback (`size mismatch`, `mmap length is greater than file size`), never a store
read as if nothing happened (before: of 51 digits of a manifest's numbers changed, 17 gave a traceback and 29 went
unnoticed). A store from before the checksum still reads, its sizes checked against its files; `irpipe encode`
refuses a folder of other files."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from pipeline.errors import IrpipeError
from pipeline.rerank.store import EncodingStore, write_store
from support import irpipe

DOCS = [(f"d{i}", text) for i, text in enumerate(
    ["the sky is blue", "grass is green and grows in fields", "snow is white and cold", "coal is black",
     "blood is red", "the sun is a yellow star in the sky", "violets are purple", "oranges are orange"])]
COMMAND = "irpipe encode --model addax --corpus docs.jsonl --dtype int8 --shard-size 3"


@pytest.fixture(scope="module", params=["int8", "residual2"])
def made(request, tiny_addax, tmp_path_factory) -> tuple[Path, str, dict]:
    """A store of 8 documents in 3 shards (int8, or residual2 with its codebook), its manifest's text and rows."""
    folder = tmp_path_factory.mktemp("store") / "s"
    write_store(folder, tiny_addax, "digest", DOCS, dtype=request.param, shard_size=3, centroids=8, command=COMMAND)
    return folder, (folder / "manifest.json").read_text(), _rows(folder)


def _rows(folder: Path) -> dict[str, torch.Tensor]:
    store = EncodingStore.open(folder, "addax", "digest")
    return {docid: store.get(docid) for docid, _ in DOCS}  # every shard mapped, every sha256 checked


def _flipped(text: str, at: int) -> str:
    return text[:at] + str((int(text[at]) + 1) % 10) + text[at + 1:]


def test_every_single_digit_of_the_manifest_changed_is_an_error_naming_it(made):
    """Each decimal digit of manifest.json -- in dims, row_bytes, counts, rows and byte sizes, shard names, sha256s,
    the model digest, the recorded command, the checksum itself -- changed to the next one, alone: opening the
    store and reading every row is an error that names the manifest (exit 2 through the CLI), every time. No flip
    is a semantic no-op: the checksum covers the parsed content, and a changed digit changes a number or a string
    (a flip that breaks the JSON, such as a leading zero, is an unreadable manifest: named all the same)."""
    folder, text, _ = made
    manifest = folder / "manifest.json"
    digits = [at for at, char in enumerate(text) if char.isdigit()]
    values = [at for at in digits if re.match(r'\s*"(format|dims|row_bytes|count|rows|bytes|centroids|sample_\w+)": '
                                              r'[0-9]*$', text[text.rfind("\n", 0, at) + 1:at + 1])]
    assert len(values) >= 30 and len(digits) > 300  # the numbers' digits, and all the others
    silent, other = [], []
    try:
        for at in digits:
            manifest.write_text(_flipped(text, at))
            try:
                _rows(folder)
            except Exception as error:  # noqa: BLE001 (a traceback is what this test is after)
                if not isinstance(error, IrpipeError) or str(manifest) not in str(error):
                    other.append((text[max(0, at - 30):at + 1], repr(error)))
            else:
                silent.append(text[max(0, at - 30):at + 1])
    finally:
        manifest.write_text(text)
    assert silent == [] and other == []


def test_a_changed_manifest_names_itself_and_the_rerun(made):
    folder, text, _ = made
    manifest = folder / "manifest.json"
    manifest.write_text(re.sub(r'"dims": ([0-9]+)', lambda m: f'"dims": {int(m[1]) + 10}', text))
    try:
        with pytest.raises(IrpipeError) as caught:
            EncodingStore.open(folder, "addax", "digest")
    finally:
        manifest.write_text(text)
    assert str(caught.value) == (f"{manifest}: damaged: its content differs from its checksum (a changed byte); "
                                 f"remove {folder} and run {COMMAND} --output {folder} again (the command as the "
                                 "damaged manifest records it: check it)")


def test_a_store_from_before_the_checksum_reads_and_its_sizes_are_checked(made, tiny_addax):
    """A manifest without its checksum (a store written before it) reads the same rows; a changed dims, row_bytes or
    shard's rows -- tracebacks before -- is an error naming the manifest and the field, from the sizes; the same
    `irpipe encode` into it, which finds every shard sound, adds the checksum."""
    folder, text, rows = made
    manifest = folder / "manifest.json"
    old = json.loads(text)
    old.pop("checksum", None)  # (none at all before this change)
    try:
        manifest.write_text(json.dumps(old, indent=2))
        assert all(torch.equal(value, rows[docid]) for docid, value in _rows(folder).items())
        for field, change in (("dims|row_bytes", lambda m: m.update(dims=m["dims"] + 10)),  # the codebook's, or sizes
                              ("row_bytes", lambda m: m.update(row_bytes=m["row_bytes"] + 1)),
                              (r"shards\[1\]\.rows", lambda m: (m["shards"][1].update(rows=m["shards"][1]["rows"] + 1),
                                                        m.update(rows=m["rows"] + 1))),
                              ("rows", lambda m: m.update(rows=m["rows"] - 1)),
                              (r"shards\[0\]\.count", lambda m: m["shards"][0].update(count=-1))):
            changed = json.loads(json.dumps(old))
            change(changed)
            manifest.write_text(json.dumps(changed, indent=2))
            with pytest.raises(IrpipeError, match=rf"^{re.escape(str(manifest))} \[({field})\]: "):
                _rows(folder)
        manifest.write_text(json.dumps(old, indent=2))
        write_store(folder, tiny_addax, "digest", DOCS, dtype=old["dtype"], shard_size=3, centroids=8,
                    command=COMMAND)
        assert "checksum" in json.loads(manifest.read_text())
        assert all(torch.equal(value, rows[docid]) for docid, value in _rows(folder).items())
    finally:
        manifest.write_text(text)


def test_encode_refuses_a_folder_of_other_files_and_resumes_its_own(tiny_bert, tmp_path, monkeypatch, capsys):
    """`irpipe encode --output DIR`: a folder of unrelated files is refused, untouched (before: shards written among
    them); a new folder is made a store; the same command again resumes it; a changed digit of its manifest is exit
    2 naming the manifest, with the rerun."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"id": d, "contents": t}) + "\n" for d, t in DOCS))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("my notes\n")
    argv = ["encode", "--model", "biencoder", "--set", f"bert={tiny_bert}", "--corpus", "docs.jsonl",
            "--shard-size", "3", "--output"]
    code, _, err = irpipe(capsys, *argv, "mine")
    assert code == 2 and "Traceback" not in err, err
    assert "mine: holds other files (notes.txt) and is not an encoding store (no manifest.json)" in err
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
    assert irpipe(capsys, *argv, "store")[0] == 0
    assert irpipe(capsys, *argv, "store")[0] == 0  # resumed: nothing left to encode
    manifest = tmp_path / "store" / "manifest.json"
    text = manifest.read_text()
    manifest.write_text(_flipped(text, text.index('"count": ') + len('"count": ')))
    code, _, err = irpipe(capsys, *argv, "store")
    assert code == 2 and "Traceback" not in err, err
    assert "store/manifest.json: damaged: its content differs from its checksum" in err and "irpipe encode" in err


def test_an_interrupted_first_encode_is_still_its_own_store(tmp_path):
    """Shard files and scratch without a manifest (killed before its first listing) are a store's, not others'."""
    from pipeline.errors import OutputError
    from pipeline.rerank.store_manifest import check_store_folder

    folder = tmp_path / "s"
    folder.mkdir()
    for name in ("shard-00000.bin", "shard-00000.ids", "codec.safetensors", ".manifest.json.lock",
                 ".shard-00001.bin.123.tmp", ".shard-codec.123.tmp"):
        (folder / name).write_bytes(b"")
    check_store_folder(folder)
    (folder / "README").write_text("mine")
    with pytest.raises(OutputError, match="holds other files \\(README\\)"):
        check_store_folder(folder)

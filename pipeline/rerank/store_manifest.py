"""A store's manifest and the checks of its files (pipeline/rerank/store.py): each listed file's size always, its
sha256 once per process and file version; a damaged file is an InputError (exit 2) naming it and the recorded
`irpipe encode` command whose rerun re-encodes that shard alone."""
from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path

from pipeline.data.files import file_sha256
from pipeline.errors import InputError
from pipeline.rerank.codecs import FLOATS, Codec, known, load_codec, needs_training

FORMAT = 2
READS = (1, 2)      # format 1: fp16/fp32 rows, no checksums
MANIFEST = "manifest.json"
CODEC = "codec.safetensors"

_codecs: dict[tuple, Codec] = {}  # (codec file, size, mtime, sha256) -> its codec, per process


def manifest_digest(manifest: dict | None) -> str:
    """What identifies a store's contents: sha1 of its manifest (the shards it lists, the model that made it)."""
    return hashlib.sha1(json.dumps(manifest or {}, sort_keys=True).encode()).hexdigest()


def read_manifest(directory: Path) -> dict | None:
    path = directory / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise InputError(path, f"not a readable store manifest ({error}); {rebuild_hint(directory, {})}") from None
    if not isinstance(manifest, dict) or manifest.get("format") not in READS:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise InputError(path, f"store format {found!r}; this irpipe reads formats {', '.join(map(str, READS))} "
                         f"(encode the documents again into a new folder with this irpipe)", field="format")
    for key in ("model", "model_digest", "dtype", "dims", "shards"):
        if key not in manifest:
            raise InputError(path, "missing", field=key)
    if not (known(manifest["dtype"]) if manifest["format"] == FORMAT else manifest["dtype"] in FLOATS):
        raise InputError(path, f"unknown dtype {manifest['dtype']!r}", field="dtype")
    return manifest


def rebuild_hint(directory: Path, manifest: dict, shard: dict | None = None) -> str:
    """How to get a sound store back: the recorded `irpipe encode` command, which re-encodes only damaged shards."""
    command = (f"{manifest['command']} --output {shlex.quote(str(directory))}" if manifest.get("command") else
               f"the `irpipe encode ... --output {directory}` command that made it")
    if shard is None:
        return f"remove {directory} and run {command} again"
    return (f"run {command} again: it re-encodes only this shard ({shard['name']}, {shard['count']} documents) "
            "and keeps the others")


def verify_file(directory: Path, manifest: dict, shard: dict, kind: str, content: bool = True) -> Path:
    """A shard's .bin or .ids file, checked against the manifest: its size always, its sha256 (once per process and
    file version) when `content`; an InputError naming it and the rerun that rebuilds it otherwise."""
    path = directory / f"{shard['name']}.{kind}"
    record = shard.get(kind)
    if record is None and kind == "bin":  # format 1: no records; the size follows from the rows
        record = {"bytes": shard["rows"] * manifest["dims"] * FLOATS[manifest["dtype"]].itemsize}
    if not path.is_file():
        raise InputError(path, f"missing: the store's manifest lists it; {rebuild_hint(directory, manifest, shard)}")
    if record is None:
        return path
    size = path.stat().st_size
    if size != record["bytes"]:
        raise InputError(path, f"damaged: {size} bytes where {record['bytes']} were written (truncated or overwritten); "
                         f"{rebuild_hint(directory, manifest, shard)}")
    if content and "sha256" in record and file_sha256(path) != record["sha256"]:
        raise InputError(path, "damaged: its content differs from what was written (sha256 mismatch: a changed byte); "
                         f"{rebuild_hint(directory, manifest, shard)}")
    return path


def file_record(path: Path) -> dict:
    return {"bytes": path.stat().st_size, "sha256": file_sha256(path)}


def store_codec(directory: Path, manifest: dict) -> Codec:
    """The store's codec; a residual codebook read from codec.safetensors: its size checked on every call, its
    sha256 once per process and file version (a rewritten file is checked and read again)."""
    if not needs_training(manifest["dtype"]):
        return load_codec(manifest["dtype"], manifest["dims"])
    record, path = manifest["codec"], directory / CODEC
    stat = path.stat() if path.is_file() else None
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, record["sha256"]) if stat else None
    if key not in _codecs:
        if stat is None or stat.st_size != record["bytes"] or file_sha256(path) != record["sha256"]:
            raise InputError(path, f"missing or damaged (size or sha256 differ from the manifest's): every shard "
                             f"needs this codebook; {rebuild_hint(directory, manifest)}")
        from safetensors.numpy import load_file

        _codecs[key] = load_codec(manifest["dtype"], manifest["dims"], load_file(str(path)))
    return _codecs[key]

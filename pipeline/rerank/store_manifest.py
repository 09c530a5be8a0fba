"""A store's manifest and the checks of its files (pipeline/rerank/store.py): each listed file's size always, its
sha256 once per process and file version; a damaged file is an InputError (exit 2) naming it and the recorded
`irpipe encode` command whose rerun re-encodes that shard alone.

The manifest checks itself: it carries the sha256 of the rest of its content (`checksum`, over the canonical JSON:
sorted keys, no spaces), verified on every read, so a changed byte of it -- a digit of `dims` or of a shard's `rows`
-- is an InputError naming it, never a number trusted. Every size in it is also checked against the others and the
files before a shard is mapped (`check_fields`, `check_layout`): the only line of defence for the stores written
before manifests carried checksums (format 1, and format 2 until the checksum came), which read as before; an
`irpipe encode` into such a format-2 store (the same command) adds the checksum once its shards verify.
"""
from __future__ import annotations

import hashlib
import json
import re
import shlex
from pathlib import Path

from pipeline.data.files import atomic_write, file_sha256, parse_json
from pipeline.errors import InputError, OutputError
from pipeline.rerank.codecs import FLOATS, Codec, known, load_codec, needs_training

FORMAT = 2
READS = (1, 2)      # format 1: fp16/fp32 rows, no checksums
MANIFEST = "manifest.json"
CODEC = "codec.safetensors"
CHECKSUM = "checksum"  # the manifest's own: "sha256:" + the sha256 of its other keys' canonical JSON
_SHARD = re.compile(r"shard-[0-9]{5,}")
_STORE_FILE = re.compile(rf"{re.escape(MANIFEST)}|{re.escape(CODEC)}|shard-[0-9]{{5,}}\.(bin|ids)")
_STORE_SCRATCH = (f".{MANIFEST}.", ".shard-")  # its lock and scratch files (atomic_write, write_by_path, the codec)

_codecs: dict[tuple, Codec] = {}  # (codec file, size, mtime, sha256) -> its codec, per process


def manifest_digest(manifest: dict | None) -> str:
    """What identifies a store's contents: sha1 of its manifest (the shards it lists, the model that made it)."""
    return hashlib.sha1(json.dumps(manifest or {}, sort_keys=True).encode()).hexdigest()


def manifest_checksum(manifest: dict) -> str:
    body = {key: value for key, value in manifest.items() if key != CHECKSUM}
    return "sha256:" + hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def save_manifest(directory: Path, manifest: dict) -> None:
    """Write the manifest atomically, with its checksum."""
    with atomic_write(directory / MANIFEST) as out:
        json.dump({**manifest, CHECKSUM: manifest_checksum(manifest)}, out, indent=2)
        out.write("\n")


def sealed(directory: Path) -> bool:
    """Whether the manifest on disk carries its checksum (stores from before it do not)."""
    try:
        return CHECKSUM in parse_json((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def read_manifest(directory: Path) -> dict | None:
    """The store's manifest (without its checksum, which is verified first), every field checked; None when
    `directory` has none."""
    path = directory / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = parse_json(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise InputError(path, f"not a readable store manifest ({error}); {rebuild_hint(directory, {})}") from None
    if isinstance(manifest, dict) and CHECKSUM in manifest:
        if manifest.pop(CHECKSUM) != manifest_checksum(manifest):
            raise InputError(path, "damaged: its content differs from its checksum (a changed byte); remove "
                             f"{directory} and run {_command(directory, manifest)} again (the command as the "
                             "damaged manifest records it: check it)")
    if not isinstance(manifest, dict) or manifest.get("format") not in READS:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise InputError(path, f"store format {found!r}; this irpipe reads formats {', '.join(map(str, READS))} "
                         f"(encode the documents again into a new folder with this irpipe)", field="format")
    for key in ("model", "model_digest", "dtype", "dims", "shards"):
        if key not in manifest:
            raise InputError(path, "missing", field=key)
    if not isinstance(manifest["dtype"], str) or not (
            known(manifest["dtype"]) if manifest["format"] == FORMAT else manifest["dtype"] in FLOATS):
        raise InputError(path, f"unknown dtype {manifest['dtype']!r}", field="dtype")
    check_fields(path, manifest)
    return manifest


def _count(value, least: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _record(value) -> bool:
    return (isinstance(value, dict) and _count(value.get("bytes")) and isinstance(value.get("sha256"), str)
            and re.fullmatch(r"[0-9a-f]{64}", value["sha256"]) is not None)


def check_fields(path: Path, manifest: dict) -> None:
    """Each field of the kind it must be, and the totals the sums of the shards': an InputError naming the
    manifest and the field otherwise (what a store without a checksum has in its place)."""
    def bad(field: str, what: str) -> InputError:
        return InputError(path, f"{what}; {rebuild_hint(path.parent, manifest)}", field=field)

    shards = manifest["shards"]
    if not isinstance(shards, list) or not all(isinstance(shard, dict) for shard in shards):
        raise bad("shards", "not a list of shards")
    if not (_count(manifest["dims"], 1) or (manifest["dims"] is None and not shards)):
        raise bad("dims", f"{manifest['dims']!r} is not a number of dimensions")
    if manifest["format"] == FORMAT and not (manifest.get("row_bytes") is None and not shards
                                             or _count(manifest.get("row_bytes"), 1)):
        raise bad("row_bytes", f"{manifest.get('row_bytes')!r} is not a record size")
    if manifest["format"] == FORMAT and needs_training(manifest["dtype"]) and not _record(manifest.get("codec")):
        raise bad("codec", "no record of the codebook's size and sha256")
    for number, shard in enumerate(shards):
        if not isinstance(shard.get("name"), str) or not _SHARD.fullmatch(shard["name"]):
            raise bad(f"shards[{number}].name", f"{shard.get('name')!r} is not a shard's name")
        for key in ("count", "rows"):
            if not _count(shard.get(key)):
                raise bad(f"shards[{number}].{key}", f"{shard.get(key)!r} is not a count")
        for kind in ("bin", "ids") if manifest["format"] == FORMAT else ():
            if not _record(shard.get(kind)):
                raise bad(f"shards[{number}].{kind}", "no record of the file's size and sha256")
    for key in ("count", "rows"):
        if key in manifest and manifest[key] != sum(shard[key] for shard in shards):
            raise bad(key, f"{manifest[key]!r}, where its shards hold {sum(shard[key] for shard in shards)}")


def check_layout(directory: Path, manifest: dict, codec: Codec) -> None:
    """The record size that the dtype and dims (and a residual codebook) make is the manifest's, and each shard's
    .bin holds its rows of it exactly: checked before any shard is mapped."""
    path = directory / MANIFEST
    if manifest.get("row_bytes") not in (None, codec.row_bytes):
        raise InputError(path, f"{manifest['row_bytes']} bytes a row, where {manifest['dtype']} rows of "
                         f"{manifest['dims']} dims take {codec.row_bytes}; {rebuild_hint(directory, manifest)}",
                         field="row_bytes")
    for number, shard in enumerate(manifest["shards"]):
        written = (shard.get("bin") or {}).get("bytes", shard["rows"] * codec.row_bytes)
        if written != shard["rows"] * codec.row_bytes:
            raise InputError(path, f"{shard['rows']} rows of {codec.row_bytes} bytes, where {shard['name']}.bin was "
                             f"written with {written} bytes; {rebuild_hint(directory, manifest)}",
                             field=f"shards[{number}].rows")


def check_store_folder(directory: Path) -> None:
    """A folder to encode into: new, empty, a store (its manifest), or a store's first files (an encode interrupted
    before its first manifest); a folder of other files is an OutputError (exit 2), nothing written into it."""
    if not directory.is_dir() or (directory / MANIFEST).is_file():
        return
    others = sorted(entry.name for entry in directory.iterdir()
                    if not _STORE_FILE.fullmatch(entry.name) and not entry.name.startswith(_STORE_SCRATCH))
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise OutputError(directory, f"holds other files ({shown}) and is not an encoding store (no {MANIFEST}): "
                                     "encode into a new or empty folder")


def _command(directory: Path, manifest: dict) -> str:
    return (f"{manifest['command']} --output {shlex.quote(str(directory))}" if isinstance(manifest.get("command"), str)
            else f"the `irpipe encode ... --output {directory}` command that made it")


def rebuild_hint(directory: Path, manifest: dict, shard: dict | None = None) -> str:
    """How to get a sound store back: the recorded `irpipe encode` command, which re-encodes only damaged shards."""
    command = _command(directory, manifest)
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
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, record["sha256"], manifest["dtype"],
           manifest["dims"]) if stat else None
    if key not in _codecs:
        if stat is None or stat.st_size != record["bytes"] or file_sha256(path) != record["sha256"]:
            raise InputError(path, f"missing or damaged (size or sha256 differ from the manifest's): every shard "
                             f"needs this codebook; {rebuild_hint(directory, manifest)}")
        from safetensors.numpy import load_file

        arrays = load_file(str(path))
        if arrays["centroids"].shape[-1] != manifest["dims"]:
            raise InputError(directory / MANIFEST, f"{manifest['dims']} dims, where the codebook's centroids have "
                             f"{arrays['centroids'].shape[-1]}; {rebuild_hint(directory, manifest)}", field="dims")
        _codecs[key] = load_codec(manifest["dtype"], manifest["dims"], arrays)
    return _codecs[key]

"""Content digests of the files and folders that key caches (a dataset's files, a corpus folder, an index), read once
per file version and remembered across processes.

`content_digest(path)` is a file's sha256, or a folder's: the sha256 of its files' paths (relative to it) and sha256s,
in path order, hidden files left out as the corpus readers leave them out (pipeline/data/corpus.py). Two folders
with the same files hold the same content wherever they lie; a changed, added, removed or renamed file changes it.

Each file's sha256 is computed on first use and remembered under `<irpipe cache>/digests/` with the file's size,
mtime, ctime and inode; a later use that stats the file to the same four reads it back without reading the file (a
write changes the ctime, which no tool sets back). A record that cannot be written (a read-only cache) is only a
slower next use.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pipeline.data.files import atomic_write, cache_root, file_sha256, json_digest, read_json
from pipeline.errors import InputError, OutputError
from pipeline.log import logger

FOLDER = "digests"  # under the cache root: one record per file or folder digested


def content_digest(path: str | Path) -> str:
    """The sha256 of a file, or of a folder's files (see the module's docstring)."""
    path = Path(path).resolve()
    if not path.is_dir():
        return _file_digests(path, {"": path})[""]
    files = {file.relative_to(path).as_posix(): file for file in sorted(path.rglob("*"))
             if file.is_file() and not any(part.startswith(".") for part in file.relative_to(path).parts)}
    digests = _file_digests(path, files)
    listing = json.dumps(sorted(digests.items()), separators=(",", ":"))
    return hashlib.sha256(listing.encode()).hexdigest()


def _stamp(file: Path) -> list[int]:
    stat = file.stat()
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]


def _file_digests(root: Path, files: dict[str, Path]) -> dict[str, str]:
    """{name: sha256} of `files`, from the record of `root` where a file's stamp is unchanged, else read; the record
    rewritten when a file was read."""
    record_path = cache_root() / FOLDER / f"{json_digest(str(root))}.json"
    try:
        known = read_json(record_path)["files"] if record_path.is_file() else {}
    except (OSError, InputError, KeyError, TypeError):
        known = None
    known = known if isinstance(known, dict) else {}  # a damaged record: every file read again
    record, read = {}, 0
    for name, file in files.items():
        stamp = _stamp(file)
        remembered = known.get(name)
        if isinstance(remembered, list) and remembered[:-1] == stamp:
            record[name] = remembered
        else:
            record[name], read = [*stamp, file_sha256(file)], read + 1
    if read or set(known) != set(record):
        try:
            with atomic_write(record_path) as out:
                json.dump({"path": str(root), "files": record}, out)
        except (OSError, OutputError) as error:  # a full or read-only cache: read again next time
            logger.debug("digests: cannot remember %s (%s)", root, error)
    return {name: entry[-1] for name, entry in record.items()}


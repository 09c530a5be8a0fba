"""Small file helpers shared by every reader and writer: atomic writes and line iteration."""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator

from pipeline.errors import InputError, MissingResourceError


_digests: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256, per process


def file_sha256(path: Path) -> str:
    """The sha256 of a file, computed once per process for each (path, size, mtime)."""
    stat = path.stat()
    key = (str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _digests:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        _digests[key] = digest.hexdigest()
    return _digests[key]


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Write `path` through a temporary file in the same folder, renamed into place only on success.

    An interrupted or failed write leaves the previous file (or no file) behind, never a truncated one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def open_text(path: str | Path) -> IO[str]:
    """Open a (possibly gzipped) UTF-8 text file, with a clear error when it is missing."""
    path = Path(path)
    if not path.is_file():
        raise MissingResourceError(f"{path}: no such file")
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8-sig")
    return open(path, encoding="utf-8-sig")


def numbered_lines(path: str | Path, skip_blank: bool = True) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without newline); an empty file is an error."""
    empty = True
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if skip_blank and not line.strip():
                continue
            empty = False
            yield number, line
    if empty:
        raise InputError(path, "file is empty")


def plain_suffix(path: str | Path) -> str:
    """The lower-cased suffix, looking through a final `.gz` (`run.tsv.gz` -> `.tsv`)."""
    name = Path(path).name
    return Path(name[:-3] if name.endswith(".gz") else name).suffix.lower()


def first_line(path: str | Path) -> tuple[int, str]:
    """(line number, text) of the first non-blank line; an empty file raises InputError."""
    lines = numbered_lines(path)
    try:
        return next(lines)
    finally:
        lines.close()


def json_lines(path: str | Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each line of a JSON-lines file; a line that is not a JSON object is an error."""
    import json

    for number, line in numbered_lines(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(path, f"not a JSON object: {error.msg}", number) from None
        if not isinstance(record, dict):
            raise InputError(path, "expected one JSON object per line", number)
        yield number, record

"""Small file helpers shared by every reader and writer: atomic writes, text reading and line iteration.

Every text file is read as UTF-8 through `open_text`/`numbered_lines`/`read_text`, so a binary or mis-encoded
file is one `InputError` naming the file and the line, and one that is no regular file (a FIFO, a device, a
symlink loop: pipeline/data/paths.py) is refused before it is opened or hashed; every JSON text is parsed by
`parse_json`, its nesting bounded (MAX_JSON_DEPTH; YAML: pipeline/data/yaml_files.py). Every output is written
through `atomic_write` (a file object) or `write_by_path` (a writer that takes a path: safetensors, numpy), or
inside `writing(folder)`, so a read-only, forbidden or full place is one `OutputError` (exit 2) naming the file the
user asked for -- not the scratch file beside it, which is removed -- with the bytes free (and needed, where known)
on a full disk.
"""
from __future__ import annotations

import contextlib
import json
import errno
import glob
import gzip
import hashlib
import itertools
import os
import re
import tempfile
import time
import zlib
from pathlib import Path
from typing import IO, Callable, Iterator

from pipeline.data.paths import require_file
from pipeline.errors import InputError, OutputError
from pipeline.log import logger

def cache_root() -> Path:
    """The root of everything irpipe derives: `$IRPIPE_CACHE`, default `~/.cache/irpipe` (datasets/, indexes/,
    stages/, models/, jobs/, keywords/, jieba/, digests/)."""
    return Path(os.environ.get("IRPIPE_CACHE") or Path.home() / ".cache" / "irpipe").expanduser()


TMP_SUFFIX = ".tmp"  # atomic_write's scratch files: `.<name>.<random>.tmp` beside the target
STALE_SECONDS = 24 * 3600  # a pid-less scratch file this old belongs to a killed writer
_UMASK = os.umask(0)  # read once (os.umask can only be read by setting it) and put back at once
os.umask(_UMASK)
# errors of the place written to, not of the program: reported with the file and what to do
_FULL = (errno.ENOSPC, errno.EDQUOT)
_OUTPUT_ERRNOS = {errno.ENOSPC: "free some space or write elsewhere",
                  errno.EDQUOT: "free some space or write elsewhere",
                  errno.EROFS: "the file system is read-only: write elsewhere",
                  errno.EACCES: "make the folder writable or write elsewhere",
                  errno.EPERM: "make the folder writable or write elsewhere", errno.EFBIG: "write elsewhere"}
# the same errors as writers that are not Python's file objects report them, without an errno: safetensors (Rust's
# "... (os error 28)"), torch.save ("file write failed"), numpy's tofile ("N requested and M written")
_MESSAGES = ((errno.ENOSPC, ("No space left on device", "os error 28")),
             (errno.EDQUOT, ("Disk quota exceeded", "os error 122")),
             (errno.EROFS, ("Read-only file system", "os error 30")),
             (errno.EACCES, ("Permission denied", "os error 13")))
_SHORT_WRITE = ("requested and", "file write failed", "unexpected pos")  # no reason given: full when space is short


def free_bytes(path: str | Path) -> int | None:
    """Bytes free to this process on the file system holding `path` (or its nearest existing folder)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        system = os.statvfs(path)
    except OSError:
        return None
    return system.f_bavail * system.f_frsize


def _write_errno(path: Path, error: BaseException, needed: int | None) -> int | None:
    if isinstance(error, OSError) and error.errno is not None:
        return error.errno
    text = str(error)
    for number, words in _MESSAGES:
        if any(word in text for word in words):
            return number
    if any(words in text for words in _SHORT_WRITE):  # a short write with no reason: a full disk, if space is short
        free = free_bytes(path)
        if free is not None and free < max(needed or 0, 1 << 20):
            return errno.ENOSPC
    return None


def output_error(path: str | Path | None, error: BaseException, needed: int | None = None) -> OutputError | None:
    """An `OutputError` for an error caused by the place written to (full, read-only, no permission), else None.

    It names the file the user asked for, not a scratch file beside it (`.NAME.PID...`), and for a full disk the
    bytes free there and, where the writer knows them, the bytes `needed`."""
    if isinstance(error, OutputError):
        return error
    if path is None or not isinstance(error, Exception):
        return None
    number = _write_errno(Path(path), error, needed)
    hint = _OUTPUT_ERRNOS.get(number)
    if hint is None:
        return None
    filename = getattr(error, "filename", None)
    if filename and not Path(filename).name.startswith("."):
        path = filename  # the folder or file at fault (a parent that cannot be made), unless it is our scratch
    reason = os.strerror(number)
    if number in _FULL:
        free = free_bytes(path)
        space = [f"{count:,} bytes {what}" for count, what in ((needed, "needed"), (free, "free")) if count is not None]
        hint += f" ({', '.join(space)})" if space else ""
    return OutputError(path, f"cannot write: {reason}; {hint}")


def write_by_path(path: str | Path, write: Callable[[str], None], needed: int | None = None) -> Path:
    """`write(scratch)` for a writer that takes a path (safetensors, numpy's tofile, save_pretrained), then the
    scratch file renamed to `path`. A failed write leaves no scratch file and no `path` (or the previous one); a
    full, read-only or forbidden place is an `OutputError` naming `path` (and the `needed` bytes, where known)."""
    path = Path(path)
    tmp = path.with_name(f"{scratch_prefix(path.name)}tmp")
    try:
        write(str(tmp))
        os.replace(tmp, path)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        mapped = output_error(path, error, needed)
        if mapped is not None:
            raise mapped from None
        raise
    return path


@contextlib.contextmanager
def writing(path: str | Path, needed: int | None = None, cleanup: Callable[[], None] | None = None) -> Iterator[None]:
    """Writes into `path` (a folder, by several writers): an error of the place written to is an `OutputError`
    naming `path`; on any failure `cleanup()` runs first (removing what was written half)."""
    try:
        yield
    except BaseException as error:
        if cleanup is not None:
            with contextlib.suppress(OSError):
                cleanup()
        mapped = output_error(path, error, needed)
        if mapped is not None:
            raise mapped from None
        raise


_digests: dict[tuple[str, int, int, int, int], str] = {}  # (path, size, mtime_ns, ctime_ns, inode) -> sha256


def json_digest(obj) -> str:
    """The sha1 of an object's canonical JSON: the fingerprint of topics and runs (stage cache keys)."""
    return hashlib.sha1(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def file_sha256(path: Path) -> str:
    """The sha256 of a regular file (`require_file`: never a FIFO or device, which would be read forever), computed
    once per process for each (path, size, mtime, ctime, inode): a write changes the ctime even where the mtime is
    set back."""
    info = require_file(path)
    key = (str(Path(path).resolve()), info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        sweep_stale(path.parent, path.name)
        fd, tmp = tempfile.mkstemp(prefix=scratch_prefix(path.name), suffix=TMP_SUFFIX, dir=path.parent)
    except OSError as error:
        raise output_error(path, error) or error from None
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the mode open() would
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(error, OSError) and error.errno in (*_FULL, errno.EFBIG, errno.EROFS, errno.EACCES):
            raise output_error(path, error) from None  # the disk filled (or went read-only) while writing
        raise


def scratch_prefix(name: str) -> str:
    """The prefix of a scratch file or folder: `.NAME.PID.`, so the next run can tell a killed writer's leftovers
    (its process is gone) from a live writer's."""
    return f".{name}.{os.getpid()}."


def sweep_stale(folder: str | Path, name: str) -> list[Path]:
    """Remove the scratch of `name` in `folder` (`.NAME.PID.*`, see scratch_prefix) whose process no longer runs,
    and pid-less `.NAME.*.tmp` files older than STALE_SECONDS (from older versions); each removal is logged."""
    import shutil

    folder, removed = Path(folder), []
    for entry in sorted(folder.glob(f".{glob.escape(name)}.*")) if folder.is_dir() else []:
        pid = entry.name[len(name) + 2:].split(".", 1)[0]
        if pid.isdigit():
            if _running(int(pid)):
                continue
        elif entry.suffix != TMP_SUFFIX or time.time() - entry.lstat().st_mtime < STALE_SECONDS:
            continue
        try:
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        except OSError:
            continue  # not ours to remove (permissions) or already gone
        logger.warning("removed %s, left behind by an interrupted run", entry)
        removed.append(entry)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def open_text(path: str | Path) -> IO[str]:
    """Open a (possibly gzipped) UTF-8 text file, with a clear error when it is missing or not a regular file."""
    path = Path(path)
    require_file(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8-sig")
    return open(path, encoding="utf-8-sig")


def _open_binary(path: Path) -> IO[bytes]:
    require_file(path)
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def decoding_error(path: str | Path, error: Exception) -> InputError:
    """The InputError for a file that is not UTF-8 text (or a damaged .gz): the first bad line found by re-reading
    it as bytes (only on this error path, so reading good files costs nothing)."""
    path = Path(path)
    if not isinstance(error, UnicodeDecodeError):
        return InputError(path, f"damaged gzip file ({error}): fetch or compress it again")
    with contextlib.suppress(OSError, EOFError, zlib.error, gzip.BadGzipFile), _open_binary(path) as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as bad:
                return InputError(path, f"not UTF-8 text (byte {raw[bad.start:bad.start + 1]!r} at column "
                                        f"{bad.start + 1}): a binary file, or save it as UTF-8", number)
    return InputError(path, f"not UTF-8 text ({error.reason}): a binary file, or save it as UTF-8")


_DECODING = (UnicodeDecodeError, EOFError, zlib.error, gzip.BadGzipFile)


def read_text(path: str | Path) -> str:
    """The whole of a (possibly gzipped) UTF-8 text file; a binary or mis-encoded one is an InputError."""
    try:
        with open_text(path) as handle:
            return handle.read()
    except _DECODING as error:
        raise decoding_error(path, error) from None


def numbered_lines(path: str | Path, skip_blank: bool = True) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without newline); an empty file is an error, and so is one that is not
    UTF-8 text (naming its first bad line)."""
    empty = True
    with open_text(path) as handle:
        try:
            for number, line in enumerate(handle, start=1):
                line = line.rstrip("\r\n")
                if skip_blank and not line.strip():
                    continue
                empty = False
                yield number, line
        except _DECODING as error:
            raise decoding_error(path, error) from None
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


MAX_JSON_DEPTH = 100  # arrays and objects inside each other: no file irpipe reads or writes nests past a few
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def parse_json(text: str):
    """`json.loads(text)` with its nesting bounded by MAX_JSON_DEPTH: deeper is a json.JSONDecodeError (a
    ValueError, as every reader already handles a damaged file), not the RecursionError traceback Python's reader
    ends in at ~1,000 levels. The depth is counted only for text with more brackets than the bound."""
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH:
        brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
        if max(itertools.accumulate(1 if char in "[{" else -1 for char in brackets), default=0) > MAX_JSON_DEPTH:
            raise json.JSONDecodeError(f"nested deeper than {MAX_JSON_DEPTH} levels", text, 0)
    return json.loads(text)


def json_lines(path: str | Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each line of a JSON-lines file; a line that is not a JSON object is an error."""
    for number, line in numbered_lines(path):
        try:
            record = parse_json(line)
        except json.JSONDecodeError as error:
            raise InputError(path, f"not a JSON object: {error.msg}", number) from None
        if not isinstance(record, dict):
            raise InputError(path, "expected one JSON object per line", number)
        if "\\u" in line and _SURROGATE_ESCAPE.search(line):
            _no_lone_surrogate(record, path, number)
        yield number, record


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # a JSON escape of half a UTF-16 pair


def _no_lone_surrogate(record: dict, path, number: int) -> None:
    """An InputError for a JSON line holding half a surrogate pair (`"\\ud800"` alone): no UTF-8 text can hold it, so
    nothing read from it could be written again."""
    try:
        json.dumps(record, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as error:
        raise InputError(path, f"holds a lone surrogate U+{ord(error.object[error.start]):04X} (a \\u escape of half a "
                               "UTF-16 pair): not a character", number) from None


INDEX_METADATA = "irpipe-index.json"  # a Lucene index folder's build record, written beside its files


def read_json(path: str | Path):
    """A whole JSON file; one that does not parse is an InputError naming the file and line."""
    try:
        return parse_json(read_text(path))
    except json.JSONDecodeError as error:
        raise InputError(path, f"not valid JSON: {error.msg}", error.lineno) from None


def read_index_metadata(index_dir: str | Path) -> dict:
    """The build record of an index folder (source, documents, settings), or {} when it has none."""
    path = Path(index_dir) / INDEX_METADATA
    if not path.is_file():
        return {}
    try:
        return parse_json(read_text(path))
    except json.JSONDecodeError as error:
        raise InputError(path, f"damaged index record ({error.msg}): rebuild the index with `irpipe index ... "
                               "--overwrite`", error.lineno) from None

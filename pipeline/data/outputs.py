"""Outputs proven writable before any work, and a computed result kept when its final write fails anyway.

    check_writable(args.output, "file")       # a run file, a plot, a results JSON, a dictionary
    check_writable(args.output, "folder")     # an index, a store, a checkpoint folder
    keep_or_raise(path, write, "run")                      # write(path); on failure write(recovered copy), then raise

Every command calls `check_writable` on each path it will write before it reads a topic or loads a model: a folder
where a file is needed, a file where a folder is needed (the path or a folder above it), a device or pipe, a
folder where no file can be made (no permission, a read-only file system, a special one such as /proc or /sys)
are one `OutputError` (exit 2) naming the path and what is wrong, not a traceback after the work. Writability is
proven by making (and removing) an empty scratch file `.irpipe-probe.PID.*` in the folder the output goes to, or
in the nearest one that exists (the folders below it are made by the writer): permission bits say little to root,
and nothing about read-only or special file systems.

The final write can still fail (the disk filled, or the folder went away, while the work ran): `keep_or_raise`
then writes the result to $IRPIPE_CACHE/recovered/ (else the system's temporary folder) and the error names the
copy, so hours of search or reranking are not lost to a full disk.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path
from typing import Callable

from pipeline.data.files import cache_root, output_error, scratch_prefix
from pipeline.errors import OutputError
from pipeline.log import logger

KINDS = ("file", "folder")
RECOVERED = "recovered"  # under the cache root: results whose final write failed


def check_writable(path: str | Path, kind: str = "file") -> Path:
    """`path` if it can be written as a `kind` ("file": written whole, through a scratch file beside it;
    "folder": made, or written into); else an OutputError naming it (as given) and the fault."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    path = Path(path)
    if path.exists():
        if kind == "file" and path.is_dir():
            raise OutputError(path, f"is a folder, and a file is needed here: name a file (e.g. {path / 'NAME'})")
        if kind == "file" and not path.is_file():
            raise OutputError(path, "is not a regular file (a device, pipe or socket): name a regular file")
        if kind == "folder" and not path.is_dir():
            raise OutputError(path, "is a file, and a folder is needed here: name a folder, or remove the file")
    folder = path if kind == "folder" and path.is_dir() else path.parent
    existing = folder  # the nearest folder there is: a file is made in it (the folders below it can then be made)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise OutputError(path, f"{existing} is a file, so no folder can be made there: write elsewhere")
    try:
        fd, probe = tempfile.mkstemp(prefix=scratch_prefix("irpipe-probe"), suffix=".tmp", dir=existing)
    except OSError as error:
        mapped = output_error(path, error)  # no permission, read-only: the scratch file is not named
        if mapped is not None:
            raise mapped from None
        raise OutputError(path, f"cannot write: no file can be made in {existing} ({os.strerror(error.errno or 0)}; "
                                 "a special file system such as /proc or /sys?): write elsewhere") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return path


def keep_or_raise(path: str | Path, write: Callable[[Path], None], what: str = "result") -> Path:
    """`write(path)`; when that fails for the place written to (after the work that made the result), `write` to a
    recovered copy (under $IRPIPE_CACHE/recovered/, else the system's temporary folder) and raise an OutputError
    naming `path`, what went wrong and where the copy is."""
    path = Path(path)
    try:
        write(path)
        return path
    except OSError as error:
        failure = output_error(path, error) or OutputError(path, f"cannot write: {error.strerror or error}")
    except OutputError as error:
        failure = error
    reason = failure.reason
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    name = f"{path.stem}.{stamp}{path.suffix}"
    tried = []
    for folder in (cache_root() / RECOVERED, Path(tempfile.gettempdir()) / f"irpipe-{RECOVERED}"):
        try:
            write(folder / name)
        except (OSError, OutputError) as error:
            tried.append(f"{folder}: {getattr(error, 'strerror', None) or error}")
            continue
        logger.warning("%s: cannot write it; the computed %s is kept in %s", path, what, folder / name)
        raise OutputError(path, f"{reason}; the computed {what} is kept in {folder / name}: copy it from there "
                                f"(cp {folder / name} {path})") from None
    raise OutputError(path, f"{reason}; the computed {what} could not be kept elsewhere either "
                            f"({'; '.join(tried)})") from None

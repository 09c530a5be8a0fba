"""What a path given to irpipe is, asked of the file system before anything is read: a regular file (or folder)
irpipe can read, or an InputError saying what it is instead -- a FIFO, a device (`/dev/zero`), a folder, a socket, a
symlink loop -- since reading or hashing a FIFO or an endless device never ends (docs/input-rules.md, "Paths").
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from pipeline.errors import InputError, MissingResourceError

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a device"),
          (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))


def path_problem(path: str | Path, folder: bool = False) -> str | None:
    """Why `path` is not a regular file (`folder`: not a folder) irpipe can read, or None: asked of the file system
    before any read, since a FIFO, a device (`/dev/zero`) or an endless file would be read or hashed forever."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file" if not folder else "no such folder"
    except (OSError, ValueError) as error:  # ELOOP: a symlink loop; ENAMETOOLONG; a NUL in the name (ValueError)
        reason = "a symlink loop" if getattr(error, "errno", None) == errno.ELOOP else \
            getattr(error, "strerror", None) or str(error)
        return f"cannot be read ({reason})"
    if stat.S_ISDIR(mode) if folder else stat.S_ISREG(mode):
        return None
    kind = "a regular file" if stat.S_ISREG(mode) else next((name for test, name in _KINDS if test(mode)), "special")
    why = "" if folder or stat.S_ISDIR(mode) else \
        ": irpipe reads (and hashes) regular files only, never a pipe or device"
    return f"is {kind}, not {'a folder' if folder else 'a regular file'}{why}"


def require_file(path: str | Path, where: str | Path | None = None, field: str | None = None,
                 folder: bool = False) -> os.stat_result:
    """The stat of `path` when it is a regular file (`folder`: a folder), else an error before any read: a
    MissingResourceError when it does not exist, an InputError naming `where` (default: the path) and `field`."""
    problem = path_problem(path, folder)
    if problem is None:
        return os.stat(path)
    if problem.startswith("no such") and where is None:
        raise MissingResourceError(f"{path}: {problem}")
    raise InputError(where or path, problem if where is None else f"{path} {problem}", field=field)


def names_file(text: str) -> bool:
    """Whether `text` names an existing regular file: False, not an OSError, for text no file can be named (a
    pipeline spec longer than a file name may be, one holding a NUL)."""
    return path_problem(text) is None

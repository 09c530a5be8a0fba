"""One lock for work that two processes may start at once -- a stage-cache entry, a recipe's training: the first
process does the work and publishes it whole; the others wait for it, then find it done and reuse it.

    with file_lock(entry, "stage cache entry"):
        if not published(entry):
            ...compute, then publish through atomic_write...

The lock is an exclusive `fcntl.flock` on `.NAME.lock` beside the path. The kernel drops a flock when its holder
exits, however it exits (kill -9 and out-of-memory kills included), so a killed process never leaves a lock that
blocks the next run: the next process takes it at once, with nothing to detect or clean. The lock file names its
holder (pid and host), which a waiting process logs; the holder removes it when it is done. On NFS, Linux carries
flock over as a POSIX lock that every client sees.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from pathlib import Path
from typing import Iterator

from pipeline.data.files import output_error
from pipeline.log import logger

LOCK_SUFFIX = ".lock"


def lock_path(path: str | Path) -> Path:
    """The lock file of `path`: `.NAME.lock` in the same folder."""
    path = Path(path)
    return path.with_name(f".{path.name}{LOCK_SUFFIX}")


@contextlib.contextmanager
def file_lock(path: str | Path, what: str = "") -> Iterator[None]:
    """Hold the lock of `path` for the block, waiting (and saying for whom) while another process holds it."""
    lock = lock_path(path)
    fd = _acquire(lock, what or str(path))
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)  # while still holding it: a waiter that locked this file sees it gone and retries
        os.close(fd)  # releases the flock


def lock_holder(path: str | Path) -> str:
    """Who holds (or last held) the lock of `path`: 'pid N on HOST', or '' when no lock file is there."""
    return _holder(lock_path(path))


def _holder(lock: Path) -> str:
    try:
        pid, _, host = lock.read_text(encoding="utf-8").strip().partition(" ")
    except (OSError, UnicodeDecodeError):
        return ""
    return f"pid {pid} on {host}" if pid else ""


def _holder_note(lock: Path, tries: int = 20) -> str:
    """The holder's note, read again for up to a second while it is empty: a holder writes it just after taking the
    lock, so a waiter that comes in between would otherwise name no one."""
    for _ in range(tries):
        note = _holder(lock)
        if note:
            return note
        time.sleep(0.05)
    return ""


def _acquire(lock: Path, what: str) -> int:
    """An open descriptor of `lock`, flock-ed exclusively, the file still at its path, with this process in it."""
    waited = False
    while True:
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as error:
            raise output_error(lock, error) or error from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not waited:
                    logger.warning("%s: waiting for %s, which is working on it (%s)", what,
                                   _holder_note(lock) or "another process", lock)
                    waited = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            if _still_there(fd, lock):
                with contextlib.suppress(OSError):  # a note for waiters: a full disk must not stop the lock
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # its holder finished and removed it while this process waited: lock the path anew


def _still_there(fd: int, lock: Path) -> bool:
    try:
        return os.stat(lock).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False

"""Logging and progress bars: one switch (`-q`) silences both; and the peak memory a run reports."""
from __future__ import annotations

import logging
import sys

from tqdm.auto import tqdm

logger = logging.getLogger("irpipe")
_quiet = False


class _StderrNow(logging.StreamHandler):
    """A handler that writes to sys.stderr as it is when a record is emitted, not as it was when the handler was
    made: a caller (a test's capture, a notebook, a server) that swaps sys.stderr later still gets the lines."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ and setStream assign it; sys.stderr it stays
        pass


def configure(quiet: bool = False, verbose: bool = False) -> None:
    global _quiet
    _quiet = quiet
    level = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    if not logger.handlers:
        handler = _StderrNow()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
        logger.addHandler(handler)
    logger.setLevel(level)


def progress(iterable=None, desc: str = "", total: int | None = None, unit: str = "it"):
    """A tqdm bar on stderr, hidden with -q and when stderr is not a terminal (logs and CI stay clean)."""
    return tqdm(iterable, desc=desc, total=total, unit=unit, disable=True if _quiet else None, leave=False,
                dynamic_ncols=True)


def peak_rss_mib() -> int:
    """This process's peak resident memory since its program started, MiB: Linux's VmHWM (a JVM started in the
    process counts). Not getrusage's ru_maxrss, which a process forked from a larger one and then exec'd starts
    at its parent's size: `irpipe search` started by a benchmark holding a 7M-line run read 3 GB for 1.9. Where
    /proc is not there, ru_maxrss all the same."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024  # kB
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 2**20 if sys.platform == "darwin" else peak // 1024  # bytes on macOS, KiB on Linux

"""Logging and progress bars: one switch (`-q`) silences both; and the peak memory a run reports.

A Python user (a script, a notebook) sees irpipe's INFO lines -- each stage's start and end, with its counts and
rate -- on stderr without configuring anything, as the command line shows them: until the program gives the root
logger a handler of its own (`logging.basicConfig(...)`: the lines then reach that one) or sets the `irpipe`
logger's level (`logging.getLogger("irpipe").setLevel(logging.WARNING)` silences them). Progress bars are tqdm's
auto mode (a widget in a notebook, a text bar elsewhere): the command line shows them on a terminal only, as its
logs and CI's stay clean; a Python program shows them unless `-q` or `quiet()`.
"""
from __future__ import annotations

import logging
import sys

from tqdm.auto import tqdm

logger = logging.getLogger("irpipe")
_quiet = False
_bars_on_terminal_only = False  # the command line's rule (configure); a Python program's bars always show


class _StderrNow(logging.StreamHandler):
    """A handler that writes to sys.stderr as it is when a record is emitted, not as it was when the handler was
    made: a caller (a test's capture, a notebook, a server) that swaps sys.stderr later still gets the lines."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ and setStream assign it; sys.stderr it stays
        pass


class _UntilConfigured(_StderrNow):
    """A Python user's handler by default: silent once the root logger has a handler (which the lines then reach)."""

    def emit(self, record: logging.LogRecord) -> None:
        if not logging.getLogger().handlers:
            super().emit(record)


def _handler(cls: type[logging.Handler]) -> logging.Handler:
    handler = cls()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    return handler


def configure(quiet: bool = False, verbose: bool = False, command_line: bool = True) -> None:
    """The log's level (-q: warnings only; -v: debug) and, for the command line, its own handler and bar rule."""
    global _quiet, _bars_on_terminal_only
    _quiet, _bars_on_terminal_only = quiet, command_line
    level = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    if command_line:
        for handler in [h for h in logger.handlers if isinstance(h, _UntilConfigured)]:
            logger.removeHandler(handler)
    if not logger.handlers:
        logger.addHandler(_handler(_StderrNow if command_line else _UntilConfigured))
    logger.setLevel(level)


def quiet(on: bool = True) -> None:
    """A Python program's -q: warnings only, no bars (`quiet(False)`: back to INFO lines and bars)."""
    configure(quiet=on, command_line=False)


def progress(iterable=None, desc: str = "", total: int | None = None, unit: str = "it"):
    """A tqdm bar (auto: a notebook's widget, else text on stderr), hidden with -q, and on the command line when
    stderr is not a terminal (its logs and CI stay clean)."""
    disable = True if _quiet else None if _bars_on_terminal_only else False
    return tqdm(iterable, desc=desc, total=total, unit=unit, disable=disable, leave=False, dynamic_ncols=True)


if not logger.handlers and logger.level == logging.NOTSET:  # a Python program's default (the module's docstring)
    configure(command_line=False)


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

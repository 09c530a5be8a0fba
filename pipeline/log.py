"""Logging and progress bars: one switch (`-q`) silences both."""
from __future__ import annotations

import logging
import sys

from tqdm.auto import tqdm

logger = logging.getLogger("irpipe")
_quiet = False


def configure(quiet: bool = False, verbose: bool = False) -> None:
    global _quiet
    _quiet = quiet
    level = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
        logger.addHandler(handler)
    logger.setLevel(level)


def progress(iterable=None, desc: str = "", total: int | None = None, unit: str = "it"):
    """A tqdm bar on stderr, hidden with -q and when stderr is not a terminal (logs and CI stay clean)."""
    return tqdm(iterable, desc=desc, total=total, unit=unit, disable=True if _quiet else None, leave=False,
                dynamic_ncols=True)

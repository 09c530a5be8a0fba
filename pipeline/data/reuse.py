"""What a run took from irpipe's cache that an earlier run had computed: stage outputs, trained models, indexes.

Counted so that a result can say whether its wall time measured the whole work (nothing reused: a cold run, the
cost `irpipe reproduce` reports) or only what was left to do (eval/results files, `reused` and `cost`). What this
run made itself and then reads back (a baseline sharing the pipeline's first stage, a model trained for one seed
and reused by a fusion) is not a reuse: `made(key)` marks it. `begin()` starts the count of one run (an
experiment: pipeline/experiment.py), so that what an earlier run of the same process made counts as reused.
"""
from __future__ import annotations

KINDS = ("stage outputs", "trained models", "indexes")
_reused: dict[str, set[str]] = {}
_made: set[str] = set()


def begin() -> None:
    """Count from here: nothing reused, nothing made."""
    _reused.clear()
    _made.clear()


def made(key: str) -> None:
    """This run computed the cache entry `key` (a stage key, a model or index folder)."""
    _made.add(str(key))


def note(kind: str, key: str) -> None:
    """A `kind` (of KINDS) read from the cache: a reuse unless this run made it."""
    if str(key) not in _made:
        _reused.setdefault(kind, set()).add(str(key))


def counts() -> dict[str, int]:
    """How many different entries of each kind were reused since `begin()` (only kinds seen)."""
    return {kind: len(_reused[kind]) for kind in KINDS if _reused.get(kind)}

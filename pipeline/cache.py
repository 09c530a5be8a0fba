"""The user cache folder, and the cache of stage outputs.

Everything irpipe derives lives under one root: `$IRPIPE_CACHE`, default `~/.cache/irpipe` (datasets/,
indexes/, stages/, models/, digests/). A stage whose output depends only on its config and its input
(`cacheable = True`) is looked up by key = sha1(stage repr + the stage's own fingerprint, e.g. the content digest of
the index it searches (pipeline/data/digests.py) + topics + input run, each by content); a hit is read back instead
of recomputed, so re-running a pipeline whose BM25 step is unchanged does not search again. Caching is on inside
`using(StageCache(...))` and off elsewhere (`--no-cache` on the CLI).

Two processes that need the same missing entry at once (`fill`): one computes it, under the entry's lock
(pipeline/data/locks.py), and publishes it whole (atomic_write); the other waits, then reads it back. An entry is
gzip, whose CRC-32 and length are checked on every read: a damaged one (a flipped byte, a truncated file) is
removed and recomputed -- the result of a fault-free run, never a wrong one. An entry the cache cannot take once
its stage has computed (the disk filled, or went read-only) is a warning: the computed run goes on to the next stage
and to its output file (kept under recovered/ when that write fails too, pipeline/data/outputs.py), and is computed
again next time. A cache read-only from the start stops the run before the stage computes (the entry's lock).
"""
from __future__ import annotations

import contextlib
import contextvars
import gzip
import hashlib
import json
import zlib
from pathlib import Path
from typing import Callable, Iterator

from pipeline.data import reuse
from pipeline.data.files import atomic_write, cache_root, output_error, parse_json
from pipeline.data.locks import file_lock
from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.errors import OutputError
from pipeline.log import logger


class StageCache:
    """Stage outputs as gzipped JSON files under `<root>/stages/`."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root else cache_root() / "stages"
        self.hits = self.misses = 0

    @staticmethod
    def key(stage, topics: Topics, run: Run | None) -> str:
        parts = [repr(stage), stage.fingerprint(), topics.fingerprint(), run.fingerprint() if run is not None else ""]
        return hashlib.sha1("\x1f".join(parts).encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json.gz"

    def get(self, key: str) -> Run | None:
        run = self._read(key)
        self.hits, self.misses = self.hits + (run is not None), self.misses + (run is None)
        return run

    def fill(self, key: str, stage, compute: Callable[[], Run]) -> tuple[Run, bool]:
        """(the entry `key`, whether this process computed it): read back, else `compute()`-d and stored by one
        process at a time -- a process that waited for another's reads back what that one stored."""
        run = self._read(key)
        if run is None:
            with file_lock(self._path(key), f"stage cache: {stage!r}"):
                run = self._read(key)  # stored while this process waited
                if run is None:
                    self.misses += 1
                    run = compute()
                    self._store(key, stage, run)
                    reuse.made(key)
                    return run, True
        self.hits += 1
        reuse.note("stage outputs", key)
        return run, False

    def _read(self, key: str) -> Run | None:
        path = self._path(key)
        if not path.is_file():
            return None
        try:
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                data = parse_json(handle.read())
            run = Run({q: [(d, s) for d, s in hits] for q, hits in data["ranking"].items()}, data["texts"], data["tag"],
                      data.get("doc_fields", {}))
        except (OSError, EOFError, zlib.error, ValueError, KeyError, TypeError) as error:  # cut short, rotten
            logger.warning("stage cache: damaged entry %s (%s): recomputed", path, type(error).__name__)
            path.unlink(missing_ok=True)  # a damaged entry is recomputed, never trusted
            return None
        return run

    def _store(self, key: str, stage, run: Run) -> None:
        """`put`, or a warning naming the entry and why it cannot be written: a finished stage is never lost to
        its cache."""
        try:
            self.put(key, stage, run)
        except (OSError, OutputError) as error:
            reason = output_error(self._path(key), error) or f"{self._path(key)}: {error}"
            logger.warning("stage cache: %r: its output is not stored (%s); the run goes on without it", stage, reason)

    def put(self, key: str, stage, run: Run) -> None:
        with atomic_write(self._path(key), "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as handle:
            handle.write(json.dumps({"stage": repr(stage), "ranking": run.ranking, "texts": run.texts,
                                     "tag": run.tag, "doc_fields": run.doc_fields}, ensure_ascii=False).encode())


_current: contextvars.ContextVar[StageCache | None] = contextvars.ContextVar("irpipe_stage_cache", default=None)


def current() -> StageCache | None:
    return _current.get()


@contextlib.contextmanager
def using(cache: StageCache | None) -> Iterator[StageCache | None]:
    """Run stages with `cache` (None: no caching) for the duration of the block."""
    token = _current.set(cache)
    try:
        yield cache
    finally:
        _current.reset(token)

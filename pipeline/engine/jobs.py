"""A job folder: each finished shard's result as one JSON file, written atomically, so that a rerun of the same job
(same key: the work and everything its result depends on) skips the shards already done.

    job = JobFolder("rerank", [model digest, batch size, pairs digest, ...])   # <irpipe cache>/jobs/rerank-<sha1>/
    job.done(3)        # shard-00003.json exists
    job.save(3, result); job.load(3); job.remove()   # removed once the merged output is written

    merge = InOrder(consume, job.load)   # results merged in shard order, as soon as the shards before them are in
    merge.add(2, result); merge.add(0, result)   # consume(0, ..) now; 1 is awaited; 2 waits for it
    merge.skip(1)                                 # shard 1 was done by an earlier run: consume(1, job.load(1)), (2, ..)

Floats survive the JSON round trip exactly (Python writes the shortest repr that reads back to the same double),
so merged scores are the very values the workers computed. A result is encoded in one call of the C encoder
(`json.dump` to a file takes the pure-Python one: 3x slower on a search shard's 100,000 hits).
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Callable

from pipeline.data.files import cache_root
from pipeline.data.files import atomic_write


def digest(*parts) -> str:
    """sha1 of `parts` as JSON (strings, numbers, lists, dicts)."""
    return hashlib.sha1(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class JobFolder:
    def __init__(self, kind: str, key_parts: list, root: str | Path | None = None):
        self.key = digest(kind, key_parts)
        self.path = Path(root) if root is not None else cache_root() / "jobs" / f"{kind}-{self.key[:16]}"

    def _file(self, number: int) -> Path:
        return self.path / f"shard-{number:05d}.json"

    def done(self, number: int) -> bool:
        return self._file(number).is_file()

    def save(self, number: int, result) -> None:
        with atomic_write(self._file(number)) as out:
            out.write(json.dumps(result))

    def load(self, number: int):
        return json.loads(self._file(number).read_text(encoding="utf-8"))

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


class InOrder:
    """Shard results merged in shard order while the shards arrive in any order: `add(number, result)` keeps a result
    until every shard before it has been merged, so `consume(number, result)` sees 0, 1, 2, ... and the merge runs
    beside the shards still running rather than after the last. `skip(number)`: a shard an earlier run finished,
    read back (`load`) when its turn comes."""

    def __init__(self, consume: Callable[[int, object], None], load: Callable[[int], object]):
        self.consume, self.load = consume, load
        self.next = 0                        # the next shard to merge
        self.waiting: dict[int, object] = {}  # results that came before their turn
        self.skipped: set[int] = set()

    def add(self, number: int, result) -> None:
        self.waiting[number] = result
        self._flush()

    def skip(self, number: int) -> None:
        self.skipped.add(number)
        self._flush()

    def _flush(self) -> None:
        while True:
            if self.next in self.waiting:
                result = self.waiting.pop(self.next)
            elif self.next in self.skipped:
                self.skipped.discard(self.next)
                result = self.load(self.next)
            else:
                return
            self.consume(self.next, result)
            self.next += 1

    def finish(self, count: int) -> None:
        """Check that shards 0..count-1 were all merged (an engine bug otherwise, not the user's)."""
        if self.next != count or self.waiting or self.skipped:
            raise RuntimeError(f"merged {self.next} of {count} shards; still waiting: "
                               f"{sorted(self.waiting) + sorted(self.skipped)}")

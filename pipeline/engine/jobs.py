"""A job folder: each finished shard's result as one JSON file, written atomically, so that a rerun of the same job
(same key: the work and everything its result depends on) skips the shards already done.

    job = JobFolder("rerank", [model digest, batch size, pairs digest, ...])   # <irpipe cache>/jobs/rerank-<sha1>/
    job.done(3)        # shard-00003.json exists
    job.save(3, result); job.load(3); job.remove()   # removed once the merged output is written

Floats survive the JSON round trip exactly (Python writes the shortest repr that reads back to the same double),
so merged scores are the very values the workers computed.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

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
            json.dump(result, out)

    def load(self, number: int):
        return json.loads(self._file(number).read_text(encoding="utf-8"))

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

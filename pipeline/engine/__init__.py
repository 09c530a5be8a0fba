"""Where work runs: here (`local`, the default), or on a Ray cluster (`ray`).

    with engine.using(EngineOptions("ray", workers=2)):     # `--engine ray --workers 2` on the CLI,
        run = (bm25() % 100 >> monobert(ckpt=DIR))(topics)   # `engine: ray` in an experiment file

Inside `using`, the stages that do the heavy work hand it to the cluster: BM25 search shards the topics
(`shard_queries` to a shard), a neural cross-encoder shards its pairs (whole batches of the local scoring order,
about `shard_pairs` pairs to a shard), and `irpipe encode` shards the documents (one store shard each). Each shard's
result is written atomically under a job folder as it finishes, and the results are merged in the local order,
so the output is byte-identical to a local run's (pipeline/engine/jobs.py); a rerun of an interrupted job skips
its finished shards, and a worker that dies is restarted with its shards retried (pipeline/engine/cluster.py).

`address` (or `RAY_ADDRESS`) joins a running cluster; without one a local cluster starts on this machine (loopback
only, no dashboard, a small object store) with `workers` x `cpus_per_worker` CPUs. Ray is imported only here,
under pipeline/engine/, and only when the `ray` engine is used.
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from typing import Iterator

from pipeline.errors import ConfigError

ENGINES = ("local", "ray")


@dataclass(frozen=True)
class EngineOptions:
    kind: str = "local"
    address: str | None = None    # a running cluster's address; None: RAY_ADDRESS, else a local cluster
    workers: int = 2              # actors, each with its own model (or Lucene index) loaded once
    cpus_per_worker: float = 1.0  # also the worker's torch threads (rounded down, at least 1)
    gpus_per_worker: float = 0.0  # > 0: Ray places each worker on a GPU; device "auto" then uses it
    shard_queries: int = 100      # BM25: queries per shard
    shard_pairs: int = 2048       # reranking: pairs per shard, rounded up to whole batches
    retries: int = 3              # restarts of a dead worker (its shards are retried each time)

    def __post_init__(self):
        if self.kind not in ENGINES:
            raise ConfigError(f"engine {self.kind!r}; choose one of {', '.join(ENGINES)}", field="engine")
        for name in ("workers", "shard_queries", "shard_pairs"):
            if isinstance(getattr(self, name), bool) or not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {getattr(self, name)!r}", field=name)
        if self.cpus_per_worker <= 0 or self.gpus_per_worker < 0 or self.retries < 0:
            raise ConfigError("cpus per worker must be > 0, gpus per worker and retries >= 0", field="workers")


_current: contextvars.ContextVar[EngineOptions | None] = contextvars.ContextVar("irpipe_engine", default=None)


def current() -> EngineOptions | None:
    """The cluster engine in force, or None: work runs here (the local engine)."""
    return _current.get()


@contextlib.contextmanager
def using(options: EngineOptions | None) -> Iterator[EngineOptions | None]:
    """Run the stages called inside on `options`' engine (None or kind "local": here)."""
    active = options if options is not None and options.kind != "local" else None
    token = _current.set(active)
    try:
        yield active
    finally:
        _current.reset(token)

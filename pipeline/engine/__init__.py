"""Where work runs: here (`local`, the default), or on a Ray cluster (`ray`).

    pipeline = (bm25() % 100 >> monobert(ckpt=DIR)).bind(dataset, EngineOptions("ray", workers=2))
    run = pipeline(topics)     # `--engine ray --workers 2` on the CLI, `engine: ray` in an experiment file

Bound to a cluster engine (pipeline/binding.py), the stages that do the heavy work hand it to the cluster: BM25 search shards the topics
(`shard_queries` to a shard), a neural cross-encoder shards its pairs (whole batches of the local scoring order,
about `shard_pairs` pairs to a shard), and `irpipe encode` shards the documents (one store shard each). Each shard's
result is written atomically under a job folder as it finishes and merged, in shard order, as soon as the shards
before it are in (`InOrder`: the merge runs beside the shards still running, not after the last), so the output is
byte-identical to a local run's (pipeline/engine/jobs.py); a rerun of an interrupted job skips
its finished shards, and a worker that dies is restarted with its shards retried (pipeline/engine/cluster.py).

`address` (or `RAY_ADDRESS`) joins a running cluster; without one a local cluster starts on this machine (loopback
only, no dashboard, a small object store) with `workers` x `cpus_per_worker` CPUs. Ray is imported only here,
under pipeline/engine/, and only when the `ray` engine is used.
"""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.validate import above, at_least, choice

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
        self.check()  # on construction (and dataclasses.replace): before any work

    def check(self) -> None:
        """A ConfigError naming the field at fault, from the helpers every config uses (pipeline/validate.py)."""
        choice("engine", "kind", self.kind, ENGINES)
        for name in ("workers", "shard_queries", "shard_pairs"):
            at_least("engine", name, getattr(self, name), 1, integer=True)
        above("engine", "cpus_per_worker", self.cpus_per_worker, 0)
        at_least("engine", "gpus_per_worker", self.gpus_per_worker, 0)
        at_least("engine", "retries", self.retries, 0, integer=True)

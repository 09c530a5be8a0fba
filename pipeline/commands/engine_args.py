"""The engine arguments of the commands that do heavy work (search, encode, rerank, run): where it runs.

    --engine ray [--ray-address ADDR] [--workers N] [--cpus-per-worker N] [--gpus-per-worker N]
                 [--shard-queries N] [--shard-pairs N]

See pipeline/engine/ for what runs where and how shards are cut, written, resumed and merged.
"""
from __future__ import annotations

import argparse

from pipeline.engine import ENGINES, EngineOptions

_SHARD_ARGS = {"queries": ("--shard-queries", "shard_queries", "BM25: queries per shard"),
               "pairs": ("--shard-pairs", "shard_pairs", "reranking: pairs per shard, rounded up to whole batches")}


def add_engine_args(parser: argparse.ArgumentParser, shards: tuple[str, ...] = ("queries", "pairs")) -> None:
    """--engine and the Ray cluster's options; a `--shard-<unit>` for each of `shards` (what the command cuts)."""
    defaults = EngineOptions()
    group = parser.add_argument_group("where the work runs")
    group.add_argument("--engine", choices=ENGINES, help="local (default: this process) or ray (a Ray cluster's "
                                                         "workers; the output is identical)")
    group.add_argument("--ray-address", metavar="ADDR", help="join a running Ray cluster (default: $RAY_ADDRESS, "
                                                             "else a local cluster starts on this machine)")
    group.add_argument("--workers", type=int, default=defaults.workers, metavar="N",
                       help=f"ray workers (actors), each loading the model once (default {defaults.workers})")
    group.add_argument("--cpus-per-worker", type=float, default=defaults.cpus_per_worker, metavar="N",
                       help=f"CPUs of a worker, also its torch threads (default {defaults.cpus_per_worker:g})")
    group.add_argument("--gpus-per-worker", type=float, default=defaults.gpus_per_worker, metavar="N",
                       help="GPUs of a worker (default 0; 1: one GPU each, and --device auto uses it)")
    for unit in shards:
        flag, dest, text = _SHARD_ARGS[unit]
        group.add_argument(flag, type=int, default=getattr(defaults, dest), metavar="N",
                           help=f"{text} (default {getattr(defaults, dest)})")


def engine_from_args(args: argparse.Namespace, kind: str | None = None) -> EngineOptions:
    """The engine the arguments name (`kind`, e.g. an experiment file's, when --engine is not given)."""
    shard_sizes = {dest: getattr(args, dest) for _, dest, _ in _SHARD_ARGS.values() if hasattr(args, dest)}
    return EngineOptions(args.engine or kind or "local", args.ray_address, args.workers, args.cpus_per_worker,
                         args.gpus_per_worker, **shard_sizes)

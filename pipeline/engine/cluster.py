"""The Ray side of the `ray` engine: joining (or starting) a cluster, and running a fixed list of shards on a pool
of actors.

Why actors over a fixed shard list rather than Ray Data's `map_batches`: the work is already cut into a few
hundred coarse shards known up front (whole scoring batches, topic slices, store shards), and what the job needs
around them is per-shard: write each result atomically the moment it arrives (in whatever order), skip the ones
a previous run finished, and retry the ones a dead worker held. An actor with `max_restarts` reloads its model
after a crash and `max_task_retries` re-runs the shards it held, which is Ray's own retry machinery; the driver
keeps `IN_FLIGHT` shards queued per actor and hands the next one to whichever finishes. Ray Data would add a
streaming executor (threads, block buffering, autoscaling pools) that this fixed list does not need, and hide the
actors: they are named here (`irpipe-<what>-<job>-<i>`), so an operator (or a test) can find one and `ray.kill` it.
"""
from __future__ import annotations

import contextlib
import ctypes
import logging
import math
import os
import signal
import time
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Callable

from pipeline.engine import EngineOptions
from pipeline.engine.jobs import InOrder, JobFolder
from pipeline.errors import EngineError, IrpipeError, MissingResourceError
from pipeline.log import logger, peak_rss_mib, progress

OBJECT_STORE_BYTES = 256 * 2**20  # a local cluster's shared-memory store: shards are small, results smaller
IN_FLIGHT = 2                     # shards queued per worker, so that the next one is there when one finishes
LOG_EVERY = 60.0                  # seconds between the per-worker rate lines of a long job
# Ray starts its workers at nice 15 (its driver and daemons stay responsive); irpipe's workers do the job's whole
# work, which a local run does at nice 0, so a local cluster's workers run at 0 too: at 15, other processes of their
# scheduling group take their CPU first. (Measured on a shared 2-core machine whose Linux schedules by session,
# autogroup, the other sessions' load is not in that group: 0 and 15 searched alike there, see
# eval/benchmarks/ray-scale-200k*.json.) A joined cluster keeps its own setting (`RAY_worker_niceness=0 ray start`);
# each worker's stats report its niceness.
WORKER_NICENESS = 0
# ray.init installs Ray's C++ crash handler for these in the driver process; see `signal_handlers_kept`
CRASH_SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT, signal.SIGTRAP,
                 signal.SIGTERM)
_SIGACTION_BYTES = 256  # room for the C `struct sigaction` (152 bytes on Linux x86-64), kept as opaque bytes


def signal_handlers() -> dict[int, bytes]:
    """The process's C-level action of each crash signal (sigaction(2)), as opaque bytes."""
    libc = ctypes.CDLL(None, use_errno=True)
    actions = {}
    for number in CRASH_SIGNALS:
        action = ctypes.create_string_buffer(_SIGACTION_BYTES)
        libc.sigaction(int(number), None, action)
        actions[int(number)] = action.raw
    return actions


@contextlib.contextmanager
def signal_handlers_kept():
    """Put back the crash signals' handlers that ray.init (and ray.shutdown) replace. Its crash handler would take SIGSEGV from a JVM
    already running in this process (the first stage's Lucene): the JVM raises and handles SIGSEGV itself, so Lucene
    search would crash at random later (Ray's own Java driver turns the handler off for this reason); and it would
    take SIGTERM from irpipe's clean exit (stop children, remove scratch, exit 143)."""
    libc = ctypes.CDLL(None, use_errno=True)
    saved = signal_handlers()
    try:
        yield
    finally:
        for number, action in saved.items():
            libc.sigaction(number, ctypes.create_string_buffer(action, _SIGACTION_BYTES), None)


def connect(options: EngineOptions):
    """The `ray` module, connected: to the running cluster at `options.address` (or RAY_ADDRESS), to the one this
    process already joined, or to a new local one (loopback only, no dashboard, `workers` x `cpus_per_worker` CPUs)."""
    try:
        import ray
    except ImportError:
        raise MissingResourceError("the ray engine needs the `ray` package (part of irpipe's install: "
                                   "pip install -e .; or pip install ray)") from None
    if ray.is_initialized():
        return ray
    address = options.address or os.environ.get("RAY_ADDRESS")
    common = dict(logging_level=logging.WARNING, log_to_driver=True)
    try:
        with signal_handlers_kept():
            _init(ray, address, options, common)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise EngineError(f"cannot {'join the Ray cluster at ' + address if address else 'start a local Ray cluster'}:"
                          f" {error}") from None
    logger.info("ray: %s cluster, %s", "joined the" if address else "started a local",
                ", ".join(f"{v:g} {k}" for k, v in sorted(ray.cluster_resources().items()) if k in ("CPU", "GPU")))
    return ray


def disconnect() -> None:
    """Leave the cluster (and stop a local one this process started), keeping this process's signal handlers:
    `ray.shutdown` replaces them again (SIGSEGV among them), so call this rather than `ray.shutdown` in a process
    that goes on searching with Lucene."""
    import ray

    with signal_handlers_kept():
        ray.shutdown()


def _init(ray, address: str | None, options: EngineOptions, common: dict) -> None:
    if address:
        ray.init(address=address, **common)
    else:
        ray.init(num_cpus=math.ceil(options.workers * options.cpus_per_worker), include_dashboard=False,
                 object_store_memory=OBJECT_STORE_BYTES, _node_ip_address="127.0.0.1",
                 _system_config={"worker_niceness": WORKER_NICENESS}, **common)


class ShardWorker:
    """One actor: sets its task up once (loads the model; the search index opens on first use), then runs shards.
    A task is an object with `setup(threads)` and `run(payload) -> (result, items)` (pipeline/retrieve/on_cluster.py, pipeline/rerank/on_cluster.py)."""

    def __init__(self, task, threads: int):
        import ray

        self.task = task
        with warnings.catch_warnings():  # the property reads Ray's own deprecated actor_id
            warnings.simplefilter("ignore", DeprecationWarning)
            restarted = ray.get_runtime_context().was_current_actor_reconstructed  # after a crash, by Ray
        start = time.perf_counter()
        task.setup(threads)
        self.info = {"pid": os.getpid(), "restarted": restarted, "setup_seconds": time.perf_counter() - start,
                     "niceness": os.nice(0)}

    def run(self, number: int, payload) -> tuple[int, object, int, float, float, dict]:
        start, cpu = time.perf_counter(), time.process_time()  # CPU: all of the process's threads (a JVM's too)
        result, items = self.task.run(payload)
        self.info["peak_rss_mib"] = peak_rss_mib()
        return number, result, items, time.perf_counter() - start, time.process_time() - cpu, self.info


@dataclass
class WorkerStats:
    shards: int = 0
    items: int = 0
    seconds: float = 0.0  # time spent in shards (the worker's own rate: items / seconds)
    cpu_seconds: float = 0.0  # CPU time the worker process spent in them (on a shared machine: its cost)
    setup_seconds: float = 0.0  # in `task.setup` (a model loaded, an index opened), once per worker process
    niceness: int | None = None  # the worker process's (see WORKER_NICENESS)
    peak_rss_mib: float = 0.0  # the largest peak resident memory of its processes (a JVM's too), as of its last shard
    pids: list[int] = field(default_factory=list)  # one more for each restart that ran a shard

    def rate(self) -> float:
        return self.items / self.seconds if self.seconds else 0.0

    def as_dict(self) -> dict:
        return {"shards": self.shards, "items": self.items, "seconds": round(self.seconds, 2),
                "per_second": round(self.rate(), 2),
                "cpu_seconds": round(self.cpu_seconds, 2), "setup_seconds": round(self.setup_seconds, 2),
                "niceness": self.niceness, "restarts": max(len(self.pids) - 1, 0),
                "peak_rss_mib": round(self.peak_rss_mib)}


def run_shards(options: EngineOptions, task, count: int, payload: Callable[[int], object],
               done: Callable[[int], bool], save: Callable[[int, object], None], what: str,
               unit: str) -> dict:
    """Run shards 0..count-1 (those not `done`) on `options.workers` actors of `task`; `save(number, result)` as each
    arrives. Returns {"workers": [per-worker stats], "seconds": wall time, "skipped": shards done before}."""
    todo = [number for number in range(count) if not done(number)]
    logger.info("%s: %d shards, %d done before (skipped), %d to run on %d ray workers", what, count,
                count - len(todo), len(todo), options.workers)
    start, stats = time.perf_counter(), [WorkerStats() for _ in range(options.workers)]
    if todo:
        ray = connect(options)
        _check_room(ray, options)
        remote = ray.remote(ShardWorker)
        job = uuid.uuid4().hex[:8]
        threads = max(1, int(options.cpus_per_worker))
        actors = [remote.options(name=f"irpipe-{what}-{job}-{i}", num_cpus=options.cpus_per_worker,
                                 num_gpus=options.gpus_per_worker, max_restarts=options.retries,
                                 max_task_retries=options.retries).remote(task, threads)
                  for i in range(options.workers)]
        try:
            _drive(ray, actors, todo, payload, save, stats, count, what, unit)
        finally:
            for actor in actors:
                ray.kill(actor, no_restart=True)
    seconds = time.perf_counter() - start
    _log_rates(stats, what, unit)
    return {"workers": [s.as_dict() for s in stats], "seconds": round(seconds, 2), "skipped": count - len(todo)}


def _check_room(ray, options: EngineOptions) -> None:
    """An EngineError unless the cluster holds all workers at once (a worker waiting for room would hold its shards)."""
    resources = ray.cluster_resources()
    for name, each in (("CPU", options.cpus_per_worker), ("GPU", options.gpus_per_worker)):
        if each and resources.get(name, 0) < options.workers * each:
            raise EngineError(f"the Ray cluster has {resources.get(name, 0):g} {name}s; {options.workers} workers of "
                              f"{each:g} {name}s each need {options.workers * each:g}: ask for fewer workers, or "
                              f"join a bigger cluster")


def _drive(ray, actors, todo, payload, save, stats, count, what, unit) -> None:
    """Keep IN_FLIGHT shards queued per actor; save each result as it comes and give that actor the next shard."""
    queue, in_flight = iter(todo), {}

    def submit(worker: int) -> None:
        number = next(queue, None)
        if number is not None:
            in_flight[actors[worker].run.remote(number, payload(number))] = worker

    for _ in range(IN_FLIGHT):  # round robin: with fewer shards than IN_FLIGHT x workers, every worker gets one
        for worker in range(len(actors)):
            submit(worker)
    last_log = time.perf_counter()
    with progress(desc=what, total=count, unit="shard") as bar:
        bar.update(count - len(todo))
        while in_flight:
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            worker = in_flight.pop(ready[0])
            number, result, items, seconds, cpu, info = _result(ray, ready[0], worker, what)
            save(number, result)
            worker_stats = stats[worker]
            if info["pid"] not in worker_stats.pids:
                worker_stats.pids.append(info["pid"])
                worker_stats.setup_seconds += info["setup_seconds"]
                worker_stats.niceness = info["niceness"]
                if info["restarted"]:
                    logger.warning("%s: worker %d was restarted (now pid %d); its shards were retried", what, worker,
                                   info["pid"])
            worker_stats.shards, worker_stats.items = worker_stats.shards + 1, worker_stats.items + items
            worker_stats.seconds += seconds
            worker_stats.cpu_seconds += cpu
            worker_stats.peak_rss_mib = max(worker_stats.peak_rss_mib, info["peak_rss_mib"])
            bar.update(1)
            submit(worker)
            if time.perf_counter() - last_log > LOG_EVERY:
                _log_rates(stats, what, unit)
                last_log = time.perf_counter()


def _result(ray, ref, worker: int, what: str):
    from ray.exceptions import ActorDiedError, RayActorError, RayTaskError

    try:
        return ray.get(ref)
    except RayTaskError as error:  # the task itself raised: an irpipe error is the user's to read, as it is
        if isinstance(error.cause, IrpipeError):
            raise error.cause from None
        raise
    except (ActorDiedError, RayActorError) as error:
        raise EngineError(f"{what}: worker {worker} died past its retries ({error}); the finished shards are kept: "
                          f"run the same command again to resume") from None


def _log_rates(stats: list[WorkerStats], what: str, unit: str) -> None:
    for number, worker in enumerate(stats):
        if worker.shards:
            logger.info("%s: worker %d: %d shards, %d %s in %.1f s, %.1f %s/s", what, number, worker.shards,
                        worker.items, unit, worker.seconds, worker.rate(), unit)


def merged_shards(options: EngineOptions, task, count: int, payload: Callable[[int], object], job: JobFolder,
                  merge: Callable[[int, object], None], what: str, unit: str) -> dict:
    """`run_shards` with each result saved in `job` and merged (`merge(number, result)`) in shard order the moment
    the shards before it are in (those an earlier run finished read back in their turn). The stats add the
    arrival order and `tail_seconds`: the wall time from the last result's arrival to the end of the merge."""
    merger, arrived, last = InOrder(merge, job.load), [], [time.perf_counter()]

    def done(number: int) -> bool:
        if job.done(number):
            merger.skip(number)
            return True
        return False

    def save(number: int, result) -> None:
        arrived.append(number)
        last[0] = time.perf_counter()
        job.save(number, result)
        merger.add(number, result)

    stats = run_shards(options, task, count, payload, done, save, what, unit)
    merger.finish(count)
    return stats | {"arrived": arrived, "tail_seconds": round(time.perf_counter() - last[0], 3)}

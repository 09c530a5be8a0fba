"""What the ray engine runs: BM25 search, cross-encoder scoring and document encoding. Each is a task that
`ShardWorker` actors set up once and run shard by shard (pipeline/engine/cluster.py), and a driver function that
cuts the work into shards in a fixed order and merges their results in the local order:

    search_on_cluster   the topics in file order, `shard_queries` to a shard; each worker opens the same Lucene
                        index read-only (shared storage, or a copy at the same path on every node)
    score_on_cluster    the pairs in `predict`'s length order, cut into its batches (`scoring_batches`: the same
                        word-piece lengths, batch_size and batch_tokens), whole batches to a shard: every batch a
                        worker scores is the very batch a local run scores (padding, and so the float rounding,
                        included), so the scores are bit-identical, not merely close. The driver loads the model
                        once for this (its tokenizer counts the word pieces)
    encode_on_cluster   `irpipe encode`'s store shards, one Ray shard each, written into the store as they come

Workers get what they need to load a model again (its `ModelSource`: a checkpoint folder, a trained recipe's
included, or a pretrained model's name and config) or a retriever stage unbound but for its index, which each
worker binds (opens) once and then searches shard after shard. Texts come with the pairs (resolved on the
driver), so a scoring or encoding worker starts no JVM.
"""
from __future__ import annotations

import base64
import hashlib
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

import numpy as np

from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.engine import EngineOptions
from pipeline.engine.cluster import run_shards
from pipeline.engine.jobs import InOrder, JobFolder

if TYPE_CHECKING:  # not imported at run time: a search worker would import torch with them (2.3 s of its start)
    from pipeline.rerank.checkpoint import ModelSource
    from pipeline.rerank.pairs import Pair
    from pipeline.rerank.scoring import Runtime

RESULT_FORMAT = "packed-1"  # of a search shard's job file (`pack_run`): in the job's key, so no older file is read


class _ModelTask:
    """A neural model loaded once on the worker from its source, run as `runtime` says."""

    def __init__(self, source: ModelSource, runtime: Runtime):
        self.source, self.runtime = source, runtime

    def setup(self, threads: int) -> None:
        self.runtime = replace(self.runtime, threads=self.runtime.threads or threads)
        self.device = self.runtime.start()
        self.model = self.runtime.place(self.source.load(), self.device)


class ScoreTask(_ModelTask):
    def run(self, pairs: list[Pair]) -> tuple[dict, int]:
        from pipeline.rerank.scoring import predict

        scored = predict(self.model, pairs, self.runtime.batch_size, self.device, self.runtime.amp,
                         desc=self.source.name, order=list(range(len(pairs))),  # in scoring order, from a batch's
                         batch_tokens=self.runtime.batch_tokens)               # start: cut into the same batches
        return {"scores": scored.scores, "truncated": scored.truncated}, len(pairs)


class EncodeTask(_ModelTask):
    def __init__(self, source: ModelSource, runtime: Runtime, dtype: str):
        super().__init__(source, runtime)
        self.dtype = dtype

    def run(self, texts: list[str]):
        from pipeline.rerank.store import encode_shard

        rows = encode_shard(self.model, texts, self.dtype, self.runtime.batch_size, self.device, self.runtime.amp,
                            batch_tokens=self.runtime.batch_tokens)
        return rows, len(texts)


class SearchTask:
    """A retriever stage, unbound but for its index (`for_worker()`), bound (its index opened) once per worker."""

    def __init__(self, stage):
        self.stage = stage

    def setup(self, threads: int) -> None:
        from pipeline import java

        java.limit_processors(threads)  # the worker's CPUs, not the machine's: its JIT and GC threads too
        self.stage = self.stage.bind()  # the index opens, and the worker's one JVM starts, once

    def run(self, topics: Topics) -> tuple[dict, int]:
        return pack_run(self.stage.transform(topics, None)), len(topics)


def pack_run(run: Run) -> dict:
    """A shard's run as a few flat values (JSON-ready): a 100-query shard of top-1000 lists is 100,000 tuples, which
    Ray would pickle and the driver unpickle and write one by one; as flat lists and the scores' float64 bytes it
    crosses in one piece, and its job file is written in 21 ms instead of 620-1340 (measured on a loaded 2-core
    machine; the tuples as JSON through `json.dump`)."""
    hits = list(run.ranking.values())
    scores = np.fromiter((score for ranked in hits for _, score in ranked), np.float64, sum(map(len, hits)))
    return {"tag": run.tag, "qids": list(run.ranking), "counts": [len(ranked) for ranked in hits],
            "docids": [docid for ranked in hits for docid, _ in ranked],
            "scores": base64.b64encode(scores.astype("<f8").tobytes()).decode("ascii")}


def unpack_run(packed: dict) -> Iterator[tuple[str, list[tuple[str, float]]]]:
    """(qid, [(docid, score), ...]) of a `pack_run` result, in its order; the scores are the very doubles packed."""
    scores = np.frombuffer(base64.b64decode(packed["scores"]), "<f8").tolist()
    docids, start = packed["docids"], 0
    for qid, count in zip(packed["qids"], packed["counts"]):
        yield qid, list(zip(docids[start:start + count], scores[start:start + count]))
        start += count


def search_on_cluster(stage, topics: Topics, options: EngineOptions) -> tuple[Run, dict]:
    """`stage.transform(topics, None)` (a retriever, unbound but for its index) over shards of the topics; the run
    in topics order, merged shard by shard as they come (`InOrder`)."""
    qids = list(topics.queries)
    shards = [qids[start:start + options.shard_queries] for start in range(0, len(qids), options.shard_queries)]
    job = JobFolder(stage.name, [repr(stage), stage.fingerprint(), topics.fingerprint(), options.shard_queries,
                                 RESULT_FORMAT])
    ranking, tags = {}, []

    def merge(number: int, result: dict) -> None:
        ranking.update(unpack_run(result))
        tags.append(result["tag"])

    stats = merged_shards(options, SearchTask(stage), len(shards), lambda number: topics.subset(shards[number]), job,
                          merge, stage.name, "queries")
    job.remove()
    return Run(ranking, tag=tags[-1] if tags else stage.name), stats


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


def score_on_cluster(source: ModelSource, runtime: Runtime, model_digest: str, pairs: list[Pair],
                     options: EngineOptions) -> tuple[list[float], int, dict]:
    """(scores in input order, pairs truncated, stats) of a cross-encoder (loaded from `source`) over `pairs`."""
    from pipeline.rerank.scoring import scoring_batches

    runtime = worker_runtime(runtime, options)
    order, cuts = scoring_batches(source.load(), pairs, runtime.batch_size, runtime.batch_tokens)
    shards = batch_shards(order, cuts, options.shard_pairs)
    job = JobFolder(source.name, [model_digest, repr(source), repr(runtime), options.shard_pairs, pairs_digest(pairs)])
    scores, truncated = [0.0] * len(pairs), [0]

    def merge(number: int, result: dict) -> None:
        truncated[0] += result["truncated"]
        for i, score in zip(shards[number], result["scores"]):
            scores[i] = score

    stats = merged_shards(options, ScoreTask(source, runtime), len(shards),
                          lambda number: [pairs[i] for i in shards[number]], job, merge, source.name, "pairs")
    job.remove()
    return scores, truncated[0], stats


def worker_runtime(runtime: Runtime, options: EngineOptions, inference: bool = True) -> Runtime:
    """`runtime` with what a worker would otherwise decide for itself made explicit by the driver, for the workers'
    device (CUDA when they get GPUs and the device is "auto"): the batch limits, so that the driver cuts the very
    batches the workers then score; and amp="auto" resolved as the driver's cache key resolves it (bf16 on CUDA and,
    for `inference`, on a CPU with native bf16), so that every worker runs the precision the key names, whatever
    its own CPU."""
    import torch

    from pipeline.rerank.batching import batch_limits
    from pipeline.rerank.scoring import resolve_amp

    device = runtime.device if runtime.device != "auto" else ("cuda" if options.gpus_per_worker > 0 else "cpu")
    size, tokens = batch_limits(device, runtime.batch_size, runtime.batch_tokens)
    amp = resolve_amp(runtime.amp, torch.device(device), inference=inference and not runtime.quantize) or "none"
    return replace(runtime, batch_size=size, batch_tokens=tokens, amp=amp)


def batch_shards(order: list[int], cuts: list[slice], shard_pairs: int) -> list[list[int]]:
    """Shards of `order` made of whole batches (`cuts`), each of at least `shard_pairs` pairs (the last: the rest)."""
    shards, shard = [], []
    for cut in cuts:
        shard.extend(order[cut])
        if len(shard) >= shard_pairs:
            shards.append(shard)
            shard = []
    return shards + ([shard] if shard else [])


def pairs_digest(pairs: list[Pair]) -> str:
    """sha1 of everything a model reads of the pairs, in order."""
    digest = hashlib.sha1()
    for pair in pairs:
        fields = json.dumps([dict(pair.query_fields), dict(pair.doc_fields)], sort_keys=True, ensure_ascii=False,
                            default=str)
        digest.update("\x1f".join((pair.qid, pair.docid, pair.query, pair.text, fields, "\x1e")).encode())
    return digest.hexdigest()


def encode_on_cluster(directory: str | Path, source: ModelSource, runtime: Runtime, model_digest: str,
                      documents: Iterable[tuple[str, str]], dtype: str, shard_size: int,
                      options: EngineOptions) -> tuple[dict, dict]:
    """`write_store` on the cluster: the same plan of store shards, each encoded by a worker, written as it comes and
    listed in the manifest once those before it are; under the store's lock, as a local encode (two encoders into one
    store take turns). Returns (manifest, stats)."""
    from pipeline.rerank.store import store_lock

    with store_lock(directory):
        return _encode_on_cluster(Path(directory), source, runtime, model_digest, documents, dtype, shard_size,
                                  options)


def _encode_on_cluster(directory: Path, source: ModelSource, runtime: Runtime, model_digest: str,
                       documents: Iterable[tuple[str, str]], dtype: str, shard_size: int,
                       options: EngineOptions) -> tuple[dict, dict]:
    from pipeline.rerank.store import DTYPES, list_shard, plan_store, save_shard, saved_shard, shard_name

    manifest, chunks = plan_store(directory, source.name, model_digest, documents, dtype, shard_size)
    chunks = list(chunks)  # all planned: shards are handed out, and come back, in any order
    base = len(manifest["shards"])
    names = [shard_name(base + number) for number in range(len(chunks))]
    written: dict[int, int] = {}  # plan shard -> rows, written and waiting to be listed

    def done(number: int) -> bool:  # written by an interrupted run of the same plan: keep it
        found = saved_shard(directory, names[number])
        if found is None or found[0] != [docid for docid, _ in chunks[number]]:
            return False
        written[number] = found[1]
        if manifest["dims"] is None and found[1]:
            manifest["dims"] = (directory / f"{names[number]}.bin").stat().st_size // (
                found[1] * DTYPES[dtype]().itemsize)
        return True

    def list_ready() -> None:
        while (number := len(manifest["shards"]) - base) in written:
            list_shard(directory, manifest, names[number], len(chunks[number]), written.pop(number))

    def save(number: int, result) -> None:
        rows, lengths = result
        save_shard(directory, manifest, names[number], [docid for docid, _ in chunks[number]], rows, lengths)
        written[number] = int(rows.shape[0])
        list_ready()

    task = EncodeTask(source, worker_runtime(runtime, options, inference=False), dtype)  # stores: fp32 on a CPU
    stats = run_shards(options, task, len(chunks), lambda number: [text for _, text in chunks[number]], done, save,
                       f"encode {source.name}", "docs")
    list_ready()
    return manifest, stats

"""Cross-encoder scoring and document encoding on the ray engine (pipeline/engine/: `run_shards`, `merged_shards`).
Workers get what they need to load a model again (its `ModelSource`: a checkpoint folder, a trained recipe's
included, or a pretrained model's name and config); texts come with the pairs (resolved on the driver), so a
scoring or encoding worker starts no JVM.

    score_on_cluster    the pairs in `predict`'s length order, cut into its batches (`scoring_batches`: the same
                        word-piece lengths, batch_size and batch_tokens), whole batches to a shard: every batch a
                        worker scores is the very batch a local run scores (padding, and so the float rounding,
                        included), so the scores are bit-identical, not merely close. The driver loads the model
                        once for this (its tokenizer counts the word pieces)
    encode_on_cluster   `irpipe encode`'s store shards, one Ray shard each, written into the store as they come

The tasks live here, beside the scoring and the store they run, so that the engine sits below rerank/.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Iterable

from pipeline.engine import EngineOptions
from pipeline.engine.cluster import merged_shards, run_shards
from pipeline.engine.jobs import JobFolder
from pipeline.rerank.checkpoint import ModelSource
from pipeline.rerank.pairs import Pair
from pipeline.rerank.scoring import Runtime


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


def score_on_cluster(source: ModelSource, runtime: Runtime, model_digest: str, pairs: list[Pair],
                     options: EngineOptions) -> tuple[list[float], int, dict]:
    """(scores in input order, pairs truncated, stats) of a cross-encoder (loaded from `source`) over `pairs`."""
    from pipeline.rerank.scoring import scoring_batches

    model = source.load()
    runtime = worker_runtime(runtime, options, inference=model.auto_bf16)
    order, cuts = scoring_batches(model, pairs, runtime.batch_size, runtime.batch_tokens)
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

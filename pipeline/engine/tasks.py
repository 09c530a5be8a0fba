"""What the ray engine runs: BM25 search, cross-encoder scoring and document encoding. Each is a task that
`ShardWorker` actors set up once and run shard by shard (pipeline/engine/cluster.py), and a driver function that
cuts the work into shards in a fixed order and merges their results in the local order:

    search_on_cluster   the topics in file order, `shard_queries` to a shard; each worker opens the same Lucene
                        index read-only (shared storage, or a copy at the same path on every node)
    score_on_cluster    the pairs in `predict`'s length order, cut into its batches, whole batches to a shard: every
                        batch a worker scores is the very batch a local run scores (padding, and so the float
                        rounding, included), so the scores are bit-identical, not merely close
    encode_on_cluster   `irpipe encode`'s store shards, one Ray shard each, written into the store as they come

Workers get what they need to rebuild a stage (a model's name and arguments, a BM25 stage's config), never a
loaded model; texts come with the pairs (resolved on the driver), so a scoring or encoding worker starts no JVM.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Iterable

from pipeline.data.runs import Run, Topics
from pipeline.engine import EngineOptions
from pipeline.engine.cluster import run_shards
from pipeline.engine.jobs import JobFolder
from pipeline.errors import ConfigError
from pipeline.rerank.pairs import Pair


class _ModelTask:
    """A neural model rebuilt on the worker from its stage's name and arguments, loaded once."""

    def __init__(self, model: str, arguments: dict):
        self.model_name, self.arguments = model, arguments

    def setup(self, threads: int) -> None:
        import torch

        from pipeline.rerank import models
        from pipeline.rerank.scoring import resolve_device

        self.stage = models.model_class(self.model_name).stage(**self.arguments)
        torch.set_num_threads(self.stage.threads or threads)
        self.device = resolve_device(self.stage.device)
        self.model = self.stage.load().eval().to(self.device)


class ScoreTask(_ModelTask):
    def run(self, pairs: list[Pair]) -> tuple[dict, int]:
        from pipeline.rerank.scoring import predict

        scored = predict(self.model, pairs, self.stage.batch_size, self.device, self.stage.amp, desc=self.model_name,
                         order=list(range(len(pairs))))  # the pairs come in scoring order, batch-aligned
        return {"scores": scored.scores, "truncated": scored.truncated}, len(pairs)


class EncodeTask(_ModelTask):
    def __init__(self, model: str, arguments: dict, dtype: str):
        super().__init__(model, arguments)
        self.dtype = dtype

    def run(self, texts: list[str]):
        from pipeline.rerank.store import encode_shard

        return encode_shard(self.model, texts, self.dtype, self.stage.batch_size, self.device, self.stage.amp), len(texts)


class SearchTask:
    def __init__(self, stage):
        self.stage = stage

    def setup(self, threads: int) -> None:
        """Nothing yet: the index opens (and the worker's one JVM starts) with the first shard."""

    def run(self, topics: Topics) -> tuple[dict, int]:
        run = self.stage.transform(topics, None)
        return {"tag": run.tag, "ranking": list(run.ranking.items())}, len(topics)


def search_on_cluster(stage, topics: Topics, options: EngineOptions) -> tuple[Run, dict]:
    """`stage.transform(topics, None)` (a retriever) over shards of the topics; the run in topics order."""
    qids = list(topics.queries)
    shards = [qids[start:start + options.shard_queries] for start in range(0, len(qids), options.shard_queries)]
    job = JobFolder(stage.name, [repr(stage), stage.fingerprint(), topics.fingerprint(), options.shard_queries])
    stats = run_shards(options, SearchTask(stage), len(shards), lambda number: topics.subset(shards[number]),
                       job.done, job.save, stage.name, "queries")
    ranking, tag = {}, stage.name
    for number in range(len(shards)):
        result = job.load(number)
        ranking.update((qid, [(docid, score) for docid, score in hits]) for qid, hits in result["ranking"])
        tag = result["tag"]
    job.remove()
    return Run(ranking, tag=tag), stats


def score_on_cluster(stage, pairs: list[Pair], options: EngineOptions) -> tuple[list[float], int, dict]:
    """(scores in input order, pairs truncated, stats) of a neural cross-encoder stage over `pairs`."""
    from pipeline.rerank.model import LateInteraction
    from pipeline.rerank.scoring import length_order

    if issubclass(stage.model_class, LateInteraction):
        raise ConfigError(f"{stage.name} is a late-interaction model: on the ray engine, encode its documents "
                          f"(`irpipe encode --engine ray ... --out STORE`), then rerank from the store (store=STORE) "
                          f"with the local engine", field="engine")
    if stage.train:
        stage.recipe().ensure_trained()  # trained once, here; the workers load it from the irpipe cache
    order = length_order(pairs)
    size = math.ceil(options.shard_pairs / stage.batch_size) * stage.batch_size  # whole batches of `order`
    shards = [order[start:start + size] for start in range(0, len(order), size)]
    job = JobFolder(stage.name, [stage.model_digest(), stage.arguments(), size, pairs_digest(pairs)])
    stats = run_shards(options, ScoreTask(stage.name, stage.arguments()), len(shards),
                       lambda number: [pairs[i] for i in shards[number]], job.done, job.save, stage.name, "pairs")
    scores, truncated = [0.0] * len(pairs), 0
    for number, shard in enumerate(shards):
        result = job.load(number)
        truncated += result["truncated"]
        for i, score in zip(shard, result["scores"]):
            scores[i] = score
    job.remove()
    return scores, truncated, stats


def pairs_digest(pairs: list[Pair]) -> str:
    """sha1 of everything a model reads of the pairs, in order."""
    digest = hashlib.sha1()
    for pair in pairs:
        fields = json.dumps([dict(pair.query_fields), dict(pair.doc_fields)], sort_keys=True, ensure_ascii=False,
                            default=str)
        digest.update("\x1f".join((pair.qid, pair.docid, pair.query, pair.text, fields, "\x1e")).encode())
    return digest.hexdigest()


def encode_on_cluster(directory: str | Path, stage, documents: Iterable[tuple[str, str]], dtype: str, shard_size: int,
                      options: EngineOptions) -> tuple[dict, dict]:
    """`write_store` on the cluster: the same plan of store shards, each encoded by a worker, written as it comes and
    listed in the manifest once those before it are. Returns (manifest, stats)."""
    from pipeline.rerank.store import DTYPES, list_shard, plan_store, save_shard, saved_shard, shard_name

    directory = Path(directory)
    manifest, chunks = plan_store(directory, stage.name, stage.model_digest(), documents, dtype, shard_size)
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

    task = EncodeTask(stage.name, stage.arguments(), dtype)
    stats = run_shards(options, task, len(chunks), lambda number: [text for _, text in chunks[number]], done, save,
                       f"encode {stage.name}", "docs")
    list_ready()
    return manifest, stats

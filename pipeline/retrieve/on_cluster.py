"""BM25 search on the ray engine (pipeline/engine/: `run_shards`, `merged_shards`): the topics in file order,
`shard_queries` to a shard; each worker opens the same Lucene index read-only (shared storage, or a copy at the same
path on every node) and binds the retriever stage, unbound but for its index, once, then searches shard after shard.
The task lives here, beside the search it runs, so that the engine sits below retrieve/ and rerank/."""
from __future__ import annotations

import base64
from typing import Iterator

import numpy as np

from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.engine import EngineOptions
from pipeline.engine.cluster import merged_shards
from pipeline.engine.jobs import JobFolder

RESULT_FORMAT = "packed-1"  # of a search shard's job file (`pack_run`): in the job's key, so no older file is read


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

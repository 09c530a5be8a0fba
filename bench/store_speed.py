"""Benchmark: reranking with stored document encodings vs encoding on the fly vs a cross-encoder, in one run.

    python -m bench.store_speed [--dataset dl20-passage] [--model biencoder] [--threads 2] [--record]

On the dataset's shipped candidates (DL20: 54 queries x 100 BM25 passages), in this order and in one process:
1. `irpipe encode`'s code path writes the store of every candidate passage (fp16) into a temporary folder:
   passages/s, and the store's bytes per passage;
2. the late-interaction model (`--model`, default the zero-shot biencoder) reranks every query from the warm
   store: queries/s and pairs/s (the query encodings and the per-pair scoring, nothing else);
3. the same model reranks encoding each candidate on the fly: queries/s;
4. monobert (all-MiniLM-L6-v2 cross-encoder, the same backbone; its weights do not change its speed) reranks the
   first `--monobert-queries` queries: queries/s.
The rankings of 2 and 3 are compared (same order up to fp16 ties). The machine is described in the output.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench import machine, record, run_main

def _timed(stage, topics, run) -> tuple[float, object]:
    start = time.perf_counter()
    output = stage(topics, run)
    return time.perf_counter() - start, output


def bench(dataset_name: str, model: str, monobert_queries: int, batch_size: int) -> dict:
    import torch

    from pipeline.data.registry import get_dataset
    from pipeline.binding import Binding
    from pipeline.rerank import models
    from pipeline.stages.neural import reranker_class
    from pipeline.rerank.scoring import resolve_device
    from pipeline.rerank.store import write_store

    dataset = get_dataset(dataset_name)
    topics, run = dataset.topics(), dataset.run()
    topics = topics.subset(run.ranking)
    pairs = run.num_hits()
    stage_class = reranker_class(model)
    on_the_fly = stage_class(batch_size=batch_size).bind(Binding(candidates=run))
    documents = list(dict.fromkeys(d for hits in run.ranking.values() for d, _ in hits))
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        manifest = write_store(folder, on_the_fly.model, on_the_fly.model_digest(),
                               ((d, run.texts[d]) for d in documents), "fp16", 10_000, batch_size, resolve_device("cpu"))
        encode_seconds = time.perf_counter() - start
        store_bytes = sum(p.stat().st_size for p in Path(folder).iterdir() if p.suffix == ".bin")
        warm_stage = stage_class(batch_size=batch_size, store=folder).bind(Binding(candidates=run))
        warm_seconds, warm = _timed(warm_stage, topics, run)
    fly_seconds, fly = _timed(on_the_fly, topics, run)
    first = dict(list(run.ranking.items())[:monobert_queries])
    monobert = models.model_class("monobert")(models.model_class("monobert").config_class())
    cross_seconds = _time_monobert(monobert, topics.subset(first), type(run)(first, run.texts), batch_size)
    same = sum([d for d, _ in fly[q]] == [d for d, _ in warm[q]] for q in run.ranking)
    return {"dataset": dataset_name, "model": model, "queries": len(run.ranking), "pairs": pairs,
            "documents": len(documents), "threads": torch.get_num_threads(),
            "encode_passages_per_s": round(len(documents) / encode_seconds, 1),
            "store_bytes_per_passage": round(store_bytes / len(documents), 1), "store_dims": manifest["dims"],
            "warm_queries_per_s": round(len(run.ranking) / warm_seconds, 2),
            "warm_pairs_per_s": round(pairs / warm_seconds, 1),
            "on_the_fly_queries_per_s": round(len(run.ranking) / fly_seconds, 2),
            "monobert_queries": len(first), "monobert_queries_per_s": round(len(first) / cross_seconds, 3),
            "warm_over_monobert": round((len(run.ranking) / warm_seconds) / (len(first) / cross_seconds), 1),
            "queries_ranked_identically": same}


def _time_monobert(model, topics, run, batch_size: int) -> float:
    """Seconds for monobert to score every candidate of `run` (the framework's batched scorer)."""
    from pipeline.rerank.pairs import pairs_of
    from pipeline.rerank.scoring import predict

    pairs = pairs_of(topics, run, run.texts)
    start = time.perf_counter()
    predict(model, pairs, batch_size, "cpu")
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="dl20-passage", metavar="NAME", help="a dataset shipping candidates with texts")
    parser.add_argument("--model", default="biencoder", metavar="NAME", help="a pretrained late-interaction model")
    parser.add_argument("--monobert-queries", type=int, default=10, metavar="N", help="queries monobert reranks (default 10)")
    parser.add_argument("--batch-size", type=int, default=64, metavar="N")
    parser.add_argument("--threads", type=int, metavar="N", help="torch CPU threads (default: torch's own)")
    parser.add_argument("--record", action="store_true", help="write eval/benchmarks/store-speed.json")
    args = parser.parse_args(argv)

    import torch

    from pipeline import log

    log.configure(quiet=True)
    if args.threads:
        torch.set_num_threads(args.threads)
    row = bench(args.dataset, args.model, args.monobert_queries, args.batch_size)
    print(machine())
    for key, value in row.items():
        print(f"{key:<28} {value}")
    if args.record:
        record("store-speed", __spec__.name, argv, {"row": row})
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))

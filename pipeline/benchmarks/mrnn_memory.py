"""Benchmark: MRNN's peak memory when reranking against the candidates' length, chunked and unchunked.

    python -m pipeline.benchmarks.mrnn_memory [--lengths 256,1024,4096] [--pairs 256] [--query-length 40]

Each setting runs in a fresh process (its peak RSS its own): `--pairs` pairs of a `--query-length`-word question
and a document of L random words, scored by `predict` (batches of 64) with a randomly initialised MRNN
(length-free document attention, max_doc_length = L, s = 128, N = 4, 50-d random table), once with the
attention over the document axis in chunks of 128 positions and the feature maps in groups of at most 16,384
positions, once all at once (attention_chunk = 0, map_positions = 0: the defaults). Printed: one JSON line
per setting with the peak RSS (MiB) and the seconds, then whether the scores agree.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

from pipeline.benchmarks import run_main


def measure(length: int, pairs: int, query_length: int, chunked: bool) -> dict:
    import random
    import resource
    import time

    import torch

    from pipeline.rerank.model import Pair
    from pipeline.rerank.models.mrnn import MRNN, MRNNConfig
    from pipeline.rerank.scoring import predict

    torch.set_num_threads(1)
    rng = random.Random(0)
    words = [f"w{i}" for i in range(5000)]
    text = lambda n: " ".join(rng.choice(words) for _ in range(n))  # noqa: E731
    queries = [text(query_length) for _ in range(max(1, pairs // 16))]
    docs = [text(length) for _ in range(pairs)]
    torch.manual_seed(0)
    config = MRNNConfig(embeddings="random", embedding_dim=50, filters=128, blocks=4, doc_attention="length_free",
                        max_doc_length=length, max_query_length=query_length)
    model = MRNN.from_training_data(config, queries[:1], docs[:1])
    model.attention_chunk, model.map_positions = (128, 16_384) if chunked else (0, 0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    scores = predict(model, [Pair(f"q{i % len(queries)}", f"d{i}", queries[i % len(queries)], d)
                             for i, d in enumerate(docs)], 64).scores
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"length": length, "pairs": pairs, "chunked": chunked, "peak_rss_mib": round(peak / 1024),
            "rss_before_mib": round(before / 1024), "seconds": round(time.perf_counter() - start, 1),
            "scores": scores}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="256,1024,4096")
    parser.add_argument("--pairs", type=int, default=256)
    parser.add_argument("--query-length", type=int, default=40)
    parser.add_argument("--one", nargs=2, metavar=("LENGTH", "CHUNKED"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(int(args.one[0]), args.pairs, args.query_length, args.one[1] == "1")))
        return 0
    for length in map(int, args.lengths.split(",")):
        results = {}
        for chunked in (True, False):
            out = subprocess.run([sys.executable, "-m", "pipeline.benchmarks.mrnn_memory", "--one", str(length),
                                  str(int(chunked)), "--pairs", str(args.pairs), "--query-length",
                                  str(args.query_length)], capture_output=True, text=True, check=True)
            results[chunked] = json.loads(out.stdout.strip().splitlines()[-1])
            print(json.dumps({k: v for k, v in results[chunked].items() if k != "scores"}), flush=True)
        gap = max(abs(a - b) for a, b in zip(results[True]["scores"], results[False]["scores"]))
        print(json.dumps({"length": length, "max_score_difference": float(f"{gap:.3g}")}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))

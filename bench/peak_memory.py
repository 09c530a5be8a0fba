"""Benchmark: peak memory (RSS) of reranking and encoding against the number of candidates, and of MRNN against the
candidates' length.

    python -m bench.peak_memory [--candidates 10000,100000] [--encode 10000,100000]
                                              [--lengths 256,1024,4096] [--record [NAME]]
    python -m bench.peak_memory --candidates 1000000 --encode "" --lengths "" --record peak-memory-1m-rerank
    python -m bench.peak_memory --candidates "" --encode 1000000 --lengths "" --record peak-memory-1m-encode

Each setting runs in a fresh process with one torch thread; printed (one JSON line each): the peak RSS (MiB, the
process's ru_maxrss), the RSS before the measured step (inputs built, model loaded), their difference, and the
seconds. Inputs are random words from a 5,000-word list (seed 0).
- rerank N: N candidates, 100 per query (N / 100 queries of 8 words, passages of 30 words, their texts in the run as
  a dataset ships them), reranked by the `mrnn` stage (bind, then `transform`: pairs, `predict`'s batches, the run
  out) with a randomly initialised small MRNN checkpoint (16-d random word table, s = 16, N = 2, the fixed document
  attention over max_doc_length = 100): the cheapest real model per pair here (no BERT), so 1M candidates take
  minutes on one thread.
- encode N: N passages of 30 words streamed into a new fp16 store (`write_store`, 10,000 a shard) by `biencoder` on
  a randomly initialised 1-layer BERT of width 32 with all-MiniLM-L6-v2's word pieces (the store path and the
  tokeniser are the real ones; the encoder is small so that 1M passages take minutes).
- length L: 128 pairs (8 queries of 40 words, documents of L words) scored by `predict` with the MRNN of the former
  chunking benchmark (50-d random table, s = 128, N = 4, the length-free attention, max_doc_length = L).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import machine, record, record_name, run_main
from pipeline.log import peak_rss_mib

WORDS = [f"w{i}" for i in range(5000)]
PER_QUERY = 100


def random_texts(count: int, words: int, rng) -> list[str]:
    """`count` texts of `words` words drawn from WORDS."""
    picks = rng.integers(0, len(WORDS), size=(count, words))
    return [" ".join(WORDS[i] for i in row) for row in picks]


def rss_mib() -> tuple[int, int]:
    """(current RSS, peak RSS so far) of this process, MiB."""
    import resource

    with open("/proc/self/statm") as statm:
        current = int(statm.read().split()[1]) * resource.getpagesize()
    return round(current / 2**20), peak_rss_mib()


def small_mrnn(folder: Path) -> str:
    """A randomly initialised small MRNN checkpoint (see the module docstring) over WORDS; its folder."""
    import torch

    from pipeline.rerank.checkpoint import save_checkpoint
    from pipeline.rerank.models.mrnn import MRNN, MRNNConfig

    torch.manual_seed(0)
    config = MRNNConfig(embeddings="random", embedding_dim=16, filters=16, blocks=2)
    return str(save_checkpoint(MRNN.from_training_data(config, [" ".join(WORDS)], []).eval(), folder))


def rerank(candidates: int, work: Path) -> dict:
    import numpy as np

    from pipeline.binding import Binding
    from pipeline.data.runs import Run
    from pipeline.data.topics import Topics
    from pipeline.stages.neural import reranker_class

    rng = np.random.default_rng(0)
    queries = max(1, candidates // PER_QUERY)
    topics = Topics({f"q{i}": text for i, text in enumerate(random_texts(queries, 8, rng))})
    texts = {f"d{i}": text for i, text in enumerate(random_texts(candidates, 30, rng))}
    run = Run({f"q{i % queries}": [] for i in range(queries)}, texts)
    for i in range(candidates):
        run.ranking[f"q{i % queries}"].append((f"d{i}", -i / candidates))
    stage = reranker_class("mrnn")(ckpt=small_mrnn(work / "mrnn"), device="cpu", threads=1)
    bound = stage.bind(Binding(candidates=run))
    before = rss_mib()
    start = time.perf_counter()
    out = bound.transform(topics, run)
    return {"candidates": candidates, "queries": queries, "scored": out.num_hits(),
            "seconds": round(time.perf_counter() - start, 1)} | peaks(before)


def encode(passages: int, work: Path) -> dict:
    import numpy as np
    import torch
    from transformers import BertModel

    from pipeline.rerank.bert import DEFAULT_BERT, bert_folder, load_tokenizer, new_bert_config, write_bert_folder
    from pipeline.rerank.models.biencoder import BiEncoder, BiEncoderConfig
    from pipeline.rerank.store import write_store

    tokenizer = load_tokenizer(bert_folder(DEFAULT_BERT))
    torch.manual_seed(0)
    bert = BertModel(new_bert_config(tokenizer.vocab_size, 32, 1, 512, heads=2, intermediate=64))
    model = BiEncoder(BiEncoderConfig(bert=str(write_bert_folder(bert, tokenizer, work / "bert"))))

    def documents():  # streamed: a shard's worth of texts at a time, as a corpus file is read
        rng = np.random.default_rng(0)
        for start in range(0, passages, 10_000):
            for i, text in enumerate(random_texts(min(10_000, passages - start), 30, rng), start):
                yield f"d{i}", text

    before = rss_mib()
    start = time.perf_counter()
    manifest = write_store(work / "store", model, "random", documents(), "fp16")
    return {"passages": passages, "stored": manifest["count"],
            "seconds": round(time.perf_counter() - start, 1)} | peaks(before)


def length(words: int, work: Path) -> dict:
    import numpy as np
    import torch

    from pipeline.rerank.models.mrnn import MRNN, MRNNConfig
    from pipeline.rerank.pairs import Pair
    from pipeline.rerank.scoring import predict

    rng = np.random.default_rng(0)
    queries, docs = random_texts(8, 40, rng), random_texts(128, words, rng)
    torch.manual_seed(0)
    config = MRNNConfig(embeddings="random", embedding_dim=50, filters=128, blocks=4, doc_attention="length_free",
                        max_doc_length=words)
    model = MRNN.from_training_data(config, [" ".join(WORDS)], [])
    pairs = [Pair(f"q{i % 8}", f"d{i}", queries[i % 8], doc) for i, doc in enumerate(docs)]
    before = rss_mib()
    start = time.perf_counter()
    scores = predict(model, pairs, device="cpu").scores
    return {"words": words, "pairs": len(scores), "seconds": round(time.perf_counter() - start, 1)} | peaks(before)


def peaks(before: tuple[int, int]) -> dict:
    _, peak = rss_mib()
    return {"rss_before_mib": before[0], "peak_rss_mib": peak, "peak_over_before_mib": peak - before[0]}


MEASURES = {"rerank": rerank, "encode": encode, "length": length}


def measure(kind: str, size: int) -> dict:
    """One setting in a fresh process (its peak RSS its own)."""
    out = subprocess.run([sys.executable, "-m", "bench.peak_memory", "--one", kind, str(size)],
                         capture_output=True, text=True, env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    if out.returncode:
        raise RuntimeError(f"{kind} {size}: {out.stderr.strip()[-2000:]}")
    return {"kind": kind} | json.loads(out.stdout.strip().splitlines()[-1])


def sizes(text: str) -> list[int]:
    return [int(value) for value in text.split(",") if value.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", default="10000,100000", help="rerank settings: candidates (comma-separated)")
    parser.add_argument("--encode", default="10000,100000", help="encode settings: passages (comma-separated)")
    parser.add_argument("--lengths", default="256,1024,4096", help="MRNN settings: document words (comma-separated)")
    parser.add_argument("--record", nargs="?", const="peak-memory", metavar="NAME", type=record_name,
                        help="write eval/benchmarks/NAME.json (default name peak-memory)")
    parser.add_argument("--one", nargs=2, metavar=("KIND", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        import torch

        torch.set_num_threads(1)
        with tempfile.TemporaryDirectory(prefix="irpipe-peak-memory-") as work:
            print(json.dumps(MEASURES[args.one[0]](int(args.one[1]), Path(work))))
        return 0
    rows = []
    for kind, values in (("rerank", args.candidates), ("encode", args.encode), ("length", args.lengths)):
        for size in sizes(values):
            rows.append(measure(kind, size))
            print(json.dumps(rows[-1]), flush=True)
    print(f"machine: {machine()}")
    if args.record:
        record(args.record, "bench.peak_memory", argv, {"rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))

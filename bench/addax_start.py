"""Benchmark (effectiveness, no training): what ADDAX scores right after initialisation, per head variant.

    python -m bench.addax_start [--dataset dl19-passage] [--threads 1] [--record]

ADDAX puts new layers (MAGS, highway, hashing denoiser, query projection) on a pretrained siamese encoder
(all-MiniLM-L6-v2). Fine-tuning starts from this score: with a few dozen training queries (TREC DL) it cannot
climb far, so the start decides. The dataset's shipped top-100 candidates are encoded once (an fp32 store, as
`irpipe encode` writes it), and each untrained head reranks them from it:
- init=random: PyTorch's default initialisation of the new layers (seeds 0 and 1);
- init=identity: MAGS the identity and the denoiser a sign projection shared with the query side (addax.py), also
  with sign codes and for the ablations that keep a head;
- no_mags + init=identity: MaxSim over the encoder's own token vectors, through the sign projection.
Measures: nDCG@10, RR@10 and AP at the dataset's relevance level; the zero-shot biencoder (mean pooling) of the
same encoder is in eval/dl19-biencoder.yaml / dl20-biencoder.yaml.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile

from bench import machine, record, rounded, run_main

VARIANTS = {"random, seed 0": {"init": "random"}, "random, seed 1": {"init": "random", "seed": 1},
            "identity": {"init": "identity"}, "identity, sign codes": {"init": "identity", "codes": "sign"},
            "identity, no_mags": {"init": "identity", "ablation": "no_mags"},
            "identity, no_denoiser": {"init": "identity", "ablation": "no_denoiser"},
            "identity, no_highway": {"init": "identity", "ablation": "no_highway"},
            "identity, attention_only_mags": {"init": "identity", "ablation": "attention_only_mags"}}
MEASURES = ["nDCG@10", "RR@10", "AP"]


def bench(dataset: str, threads: int | None, batch_size: int, max_doc_length: int) -> dict:
    import torch

    from pipeline.data.registry import get_dataset
    from pipeline.evaluation import evaluate
    from pipeline.rerank.models.addax import ADDAX, ADDAXConfig
    from pipeline.rerank.pairs import pairs_of, scores_by_query
    from pipeline.rerank.store import EncodingStore, score_late_interaction, write_store

    if threads:
        torch.set_num_threads(threads)
    data = get_dataset(dataset)
    run = data.run()
    pairs, qrels = pairs_of(data.topics(), run, run.texts), data.qrels()
    cpu = torch.device("cpu")
    encoder = ADDAX(ADDAXConfig(max_doc_length=max_doc_length))
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        write_store(folder, encoder, "start", {p.docid: p.text for p in pairs}.items(), dtype="fp32",
                    batch_size=batch_size)
        store = EncodingStore.open(folder, "addax", "start")
        for name, options in VARIANTS.items():
            options = dict(options)
            torch.manual_seed(options.pop("seed", 0))
            model = ADDAX(ADDAXConfig(max_doc_length=max_doc_length, **options), encoder.bert, encoder.tokenizer)
            scores = score_late_interaction(model, pairs, store, batch_size, cpu, desc=name)
            results[name] = rounded(evaluate(scores_by_query(pairs, scores), qrels, MEASURES, data.rel_level))
    return {"dataset": dataset, "queries": len(run.ranking), "max_doc_length": max_doc_length,
            "threads": torch.get_num_threads(), "untrained_heads": results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="dl19-passage", metavar="NAME", help="a dataset with a shipped run")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's own)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-doc-length", type=int, default=180,
                        help="L_D word pieces (docs/models.md §3: 180 on MS MARCO)")
    parser.add_argument("--record", action="store_true", help="write eval/benchmarks/addax-start-<dataset>.json")
    args = parser.parse_args(argv)

    from pipeline import log

    log.configure(quiet=True)
    result = bench(args.dataset, args.threads, args.batch_size, args.max_doc_length)
    print(machine())
    print(json.dumps(result, indent=2))
    if args.record:
        record(f"addax-start-{args.dataset.replace('/', '-')}", __spec__.name, argv, {"result": result})
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))

"""Benchmark: ADDAX reranking throughput with a warm document-encoding store, encoding on the fly, and monobert (the
same BERT backbone) on the same candidates, in one run; plus the per-pair multiply-adds of each on paper.

    python -m bench.addax_speed [--dataset dl20-passage] [--queries 5] [--threads 1] [--record]

The first `--queries` queries of the dataset's shipped run (100 candidates each) are reranked by:
- addax, warm store: the candidates' BERT token vectors encoded once into an fp16 store (`write_store`, timed apart:
  that is `irpipe encode`'s work), then `score_late_interaction` reads them and runs only the per-pair head (MAGS,
  denoiser, MaxSim), batched over each query's candidates;
- addax, on the fly: the same `score_late_interaction` with no store (BERT over every candidate, then the head);
- monobert: `predict`, BERT over "[CLS] q [SEP] d [SEP]" of every pair.
The weights are fresh (speed does not depend on training). queries/s = queries / seconds after one warm-up query.
Multiply-adds per pair on paper come from the models' shapes and the mean real lengths of the candidates
(`head_macs`, `bert_macs`): the ratio of monobert's to the warm head's is what the measured ratio can approach.
Store size: the bytes per passage of the fp16 store (rows x dims x 2), projected to MS MARCO's 8,841,823 passages.
ADDAX's codes cannot be stored: the document-side MAGS makes them depend on the query. Only the no_mags ablation has
query-independent codes; their packed size (1 bit per code dimension: rows x h / 8) is printed for it.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

from bench import machine, record, run_main

MSMARCO_PASSAGES = 8_841_823


def head_macs(l: int, t: float, d: int, h: int, hidden: int) -> float:
    """Multiply-adds of ADDAX's per-pair head: l query rows, t document rows, width d, h code bits."""
    mags_side = lambda rows, other: rows * other * d * 3 + rows * (2 * (2 * d) ** 2 + 2 * d * d)  # noqa: E731
    # S, R, S W1 (3 products of rows x other x d) + highway W3, W4 (2d x 2d) and W5 (2d x d) per row
    denoiser = t * (d * hidden + hidden * hidden + hidden * h)                 # encoder only (the decoder trains)
    return mags_side(l, t) + mags_side(t, l) - l * t * d + denoiser + l * d * h + l * t * h  # S once, W_q, MaxSim


def bert_macs(tokens: float, layers: int, d: int, intermediate: int) -> float:
    """Multiply-adds of a BERT pass over `tokens` word pieces: QKVO and FFN per token, attention per token pair."""
    return layers * (tokens * (4 * d * d + 2 * d * intermediate) + 2 * tokens * tokens * d)


def bench(dataset: str, queries: int, threads: int | None, batch_size: int) -> dict:
    import torch

    from pipeline.data.registry import get_dataset
    from pipeline.rerank.models.addax import ADDAX, ADDAXConfig
    from pipeline.rerank.models.monobert import MonoBERT, MonoBERTConfig
    from pipeline.rerank.pairs import pairs_of
    from pipeline.rerank.scoring import predict
    from pipeline.rerank.store import EncodingStore, score_late_interaction, write_store

    if threads:
        torch.set_num_threads(threads)
    data = get_dataset(dataset)
    run = data.run()
    qids = list(run.ranking)[:queries + 1]                                   # the first one warms up
    run = type(run)({q: run.ranking[q] for q in qids}, run.texts)
    pairs = pairs_of(data.topics(), run, run.texts)
    warm, timed = [p for p in pairs if p.qid == qids[0]], [p for p in pairs if p.qid != qids[0]]
    cpu = torch.device("cpu")
    torch.manual_seed(0)
    addax = ADDAX(ADDAXConfig(max_doc_length=180)).eval()
    monobert = MonoBERT(MonoBERTConfig(max_length=256)).eval()

    def seconds(function) -> float:
        start = time.perf_counter()
        function()
        return time.perf_counter() - start

    with tempfile.TemporaryDirectory() as folder:
        docs = {p.docid: p.text for p in pairs}
        encode_s = seconds(lambda: write_store(folder, addax, "bench", docs.items(), batch_size=batch_size))
        store = EncodingStore.open(folder, "addax", "bench")
        rows = [store.get(d).shape[0] for d in docs]
        score = lambda ps, s: score_late_interaction(addax, ps, s, batch_size, cpu, desc="addax")  # noqa: E731
        score(warm, store)
        warm_s = seconds(lambda: score(timed, store))
        score(warm, None)
        fly_s = seconds(lambda: score(timed, None))
    predict(monobert, warm, batch_size, cpu)
    mono_s = seconds(lambda: predict(monobert, timed, batch_size, cpu))

    config, bert = addax.config, addax.bert.config
    query_rows = sum(len(addax.encode_queries([q])[0]) for q in dict.fromkeys(p.query for p in timed)) / queries
    doc_rows = sum(rows) / len(rows)
    head = head_macs(query_rows, doc_rows, bert.hidden_size, config.hash_bits, config.hash_hidden)
    full = bert_macs(query_rows + doc_rows - 1, bert.num_hidden_layers, bert.hidden_size, bert.intermediate_size)
    store_bytes = doc_rows * bert.hidden_size * 2                          # fp16 rows
    code_bytes = doc_rows * config.hash_bits / 8                            # packed sign codes (no_mags only)
    gib = lambda per_passage: round(per_passage * MSMARCO_PASSAGES / 2 ** 30, 1)  # noqa: E731
    return {"dataset": dataset, "queries": queries, "candidates_per_query": len(timed) / queries,
            "threads": torch.get_num_threads(), "mean_query_rows": round(query_rows, 1),
            "mean_doc_rows": round(doc_rows, 1), "encode_docs_per_s": round(len(docs) / encode_s, 1),
            "queries_per_s": {"addax_warm_store": round(queries / warm_s, 3),
                              "addax_on_the_fly": round(queries / fly_s, 3), "monobert": round(queries / mono_s, 3)},
            "measured_ratio_warm_vs_monobert": round(mono_s / warm_s, 2),
            "paper_macs_per_pair": {"addax_head": round(head / 1e6, 1), "monobert_bert": round(full / 1e6, 1),
                                    "ratio": round(full / head, 2)},
            "store_bytes_per_passage": {"fp16_rows": round(store_bytes),
                                        "no_mags_packed_sign_codes": round(code_bytes)},
            "msmarco_projection_gib": {"fp16_rows": gib(store_bytes), "no_mags_packed_sign_codes": gib(code_bytes)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="dl20-passage", metavar="NAME", help="a dataset with a shipped run")
    parser.add_argument("--queries", type=int, default=5, help="timed queries (default 5; one more warms up)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's own)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--record", action="store_true", help="write eval/benchmarks/addax-speed.json")
    args = parser.parse_args(argv)

    from pipeline import log

    log.configure(quiet=True)
    result = bench(args.dataset, args.queries, args.threads, args.batch_size)
    print(machine())
    print(json.dumps(result, indent=2))
    if args.record:
        record("addax-speed", __spec__.name, argv, {"result": result})
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))

"""MS MARCO dev-small end to end on this CPU, projected from measured parts: hours on 1 and 2 cores.

    python -m bench.dev_small_projection [--search bm25-speed-8.8m] [--rerank rerank-speed-msmarco]
        [--record]

Nothing here is timed; every rate is read from a recorded benchmark (eval/benchmarks/NAME.json):
- BM25 top-1,000 for the 6,980 dev-small queries: irpipe's rows at 1,000 hits (1 and 2 threads, a fresh process
  each) on the 8.8M-passage synthetic collection, from `python -m bench.bm25_speed --dataset
  msmarco-passage/dev-small --queries 1000 --repeat 1 --index /tmp/msmarco-full/index-8841823 --threads 1 2 ...`
  (bm25-speed-8.8m.json, the default) or the `local` rows of `python -m bench.ray_scale --size
  8841823 ...` (msmarco-full-size.json);
- reranking: each model's inference pairs/s on real MS MARCO passages (the DL19 BM25 top-100 candidates) at 1 and 2
  torch threads, `python -m bench.rerank_speed --test dl19-passage --threads 1 2 ... --output
  rerank-speed-msmarco`. The precision is fp32: on this CPU (no native bf16) it is the fastest mode that keeps the
  ranking (int8 moves DL19 nDCG@10 by more than 0.002, eval/benchmarks/inference-quality-int8-schemes.json).

hours = (6,980 / search q/s + 6,980 x depth / rerank pairs/s) / 3,600, for depth 100 and 1,000. A rate measured on
the DL19 candidates stands for all of dev-small's (the same collection's passages); the models are untrained copies
of each architecture, which score at the speed of trained ones. Loads of the two recordings are printed beside them.
"""
from __future__ import annotations

import argparse
import sys

from bench import REPO, record, record_name, run_main

QUERIES = 6980
DEPTHS = (100, 1000)


def _load(name: str) -> dict:
    from pipeline.data.files import read_json
    from pipeline.errors import MissingResourceError

    path = REPO / "eval" / "benchmarks" / f"{name}.json"
    if not path.is_file():
        raise MissingResourceError(f"no recorded benchmark {path}: run the command in this module's docstring")
    return read_json(path)


def search_rates(recorded: dict) -> dict[int, float]:
    """threads -> BM25 top-1,000 queries/s of irpipe's local search (a fresh process per row), from a ray_scale
    record (its `local` rows) or a bm25_speed one (its 1,000-hit rows without RM3)."""
    if "search" in recorded:
        return {row["threads"]: row["queries_per_s"] for row in recorded["search"] if row["engine"] == "local"}
    return {row["threads"]: row["ours_qps"] for row in recorded["rows"] if row["hits"] == 1000 and not row["rm3"]}


def rerank_rates(recorded: dict) -> dict[str, dict[int, float]]:
    """model -> threads -> inference pairs/s."""
    rates: dict[str, dict[int, float]] = {}
    for row in recorded["rows"]:
        rates.setdefault(row["model"], {})[row["threads"]] = row["inference_pairs_per_s"]
    return rates


def project(search: dict[int, float], rerank: dict[str, dict[int, float]]) -> list[dict]:
    """One row per (model, cores): hours for BM25 alone and BM25 then a rerank of the top 100 / top 1,000."""
    rows = []
    for model, by_threads in sorted(rerank.items()):
        for cores in sorted(set(by_threads) & set(search)):
            search_hours = QUERIES / search[cores] / 3600
            rows.append({"model": model, "cores": cores, "search_qps": search[cores],
                         "rerank_pairs_per_s": by_threads[cores], "bm25_hours": round(search_hours, 3),
                         **{f"top{depth}_hours": round(search_hours + QUERIES * depth / by_threads[cores] / 3600, 1)
                            for depth in DEPTHS}})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--search", default="bm25-speed-8.8m", metavar="NAME", type=record_name,
                        help="the recorded 8.8M-passage search benchmark (default bm25-speed-8.8m)")
    parser.add_argument("--rerank", default="rerank-speed-msmarco", metavar="NAME", type=record_name,
                        help="the recorded rerank_speed benchmark on MS MARCO passages (default rerank-speed-msmarco)")
    parser.add_argument("--record", action="store_true", help="write eval/benchmarks/dev-small-projection.json")
    args = parser.parse_args(argv)
    searched, reranked = _load(args.search), _load(args.rerank)
    rows = project(search_rates(searched), rerank_rates(reranked))
    print(f"dev-small: {QUERIES} queries, BM25 top-1,000 then a rerank of the top 100 / 1,000 (fp32)")
    print(f"search: {args.search}.json ({searched['machine']}); rerank: {args.rerank}.json ({reranked['machine']})")
    print(f"{'model':<10} {'cores':>5} {'BM25 q/s':>9} {'pairs/s':>8} {'BM25 h':>7} {'top-100 h':>10} {'top-1000 h':>11}")
    for row in rows:
        print(f"{row['model']:<10} {row['cores']:>5} {row['search_qps']:>9} {row['rerank_pairs_per_s']:>8} "
              f"{row['bm25_hours']:>7} {row['top100_hours']:>10} {row['top1000_hours']:>11}")
    if args.record:
        record("dev-small-projection", __spec__.name, argv, {
            "search": {"name": args.search, "command": searched["command"], "machine": searched["machine"]},
            "rerank": {"name": args.rerank, "command": reranked["command"], "machine": reranked["machine"]},
            "queries": QUERIES, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))

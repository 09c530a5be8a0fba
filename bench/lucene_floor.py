"""Benchmark: Lucene's own time per query, the floor under any bridge to it (irpipe's and Pyserini's alike).

    python -m bench.lucene_floor --dataset msmarco-passage/dev-small --queries 600 \
        --index /tmp/msmarco-full/index-8841823 --hits 10 1000 --record lucene-floor-8.8m

In one warm process, the queries are parsed first (outside the clock), then searched from Python through pyjnius
twice per depth, on alternate halves of the queries: sorted by score then by the `id` doc values (Anserini's
BREAK_SCORE_TIES_BY_DOCID, what Pyserini's and irpipe's runs are, so what both pay) and by score alone (Lucene's
TopScoreDocCollector, which may skip non-competitive documents: block-max WAND). Each half is timed first with one
collector, then with the other, and the halves swap, so JIT warm-up falls on both. A query's time here is Lucene's
search plus one JNI crossing; what a bridge adds on top of it is bounded by (bridge's time - this).
"""
from __future__ import annotations

import argparse
import sys
import time

from bench import positive, record, record_name, run_main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cacm", help="registered dataset with topics (default cacm)")
    parser.add_argument("--index", help="this index instead of the dataset's cached one")
    parser.add_argument("--queries", type=positive, help="the dataset's first N topics only (default: all)")
    parser.add_argument("--hits", type=positive, nargs="+", default=[10, 1000])
    parser.add_argument("--record", nargs="?", const="lucene-floor", metavar="NAME", type=record_name,
                        help="write eval/benchmarks/NAME.json (default lucene-floor)")
    args = parser.parse_args(argv)

    from pipeline.data.registry import get_dataset
    from pipeline.retrieve.index import dataset_index, open_index

    dataset = get_dataset(args.dataset)
    index = open_index(args.index or dataset_index(dataset))
    texts = list(dataset.topics().queries.values())[:args.queries]
    searcher = index._searcher(0.9, 0.4)
    parsed = [index._query_generator.buildQuery("contents", index._analyzer, text) for text in texts]
    halves = (parsed[:len(parsed) // 2], parsed[len(parsed) // 2:])
    collectors = {"score_then_id_ms": lambda query, k: searcher.search(query, k, index._sort, False),
                  "score_only_ms": lambda query, k: searcher.search(query, k)}
    rows = []
    for hits in args.hits:
        spent = dict.fromkeys(collectors, 0.0)
        for turn, half in enumerate(halves):
            for name in (list(collectors) if turn == 0 else list(collectors)[::-1]):
                start = time.perf_counter()
                for query in half:
                    collectors[name](query, hits)
                spent[name] += time.perf_counter() - start
        row = {"hits": hits, "queries": len(parsed)} | {name: round(1000 * seconds / len(parsed), 2)
                                                         for name, seconds in spent.items()}
        rows.append(row)
        print(row, flush=True)
    if args.record:
        record(args.record, "bench.lucene_floor", argv,
               {"dataset": args.dataset, "index": str(index.path), "documents": index.num_docs, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))

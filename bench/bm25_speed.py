"""Benchmark: our BM25 stage vs Pyserini's own CLI, same index, same topics, same machine, one run.

    python -m bench.bm25_speed --dataset cacm --repeat 50 --threads 1 2 --hits 10 100 1000 [--rm3]
    python -m bench.bm25_speed --dataset msmarco-passage/dev-small --queries 2000 --repeat 1 \
        --index /tmp/msmarco-full/index-8841823   # the 8.8M synthetic passages that ray_scale --size 8841823 builds

Pyserini's CLI gets `--batch-size 128` beside `--threads N` (N > 1): it searches a batch's queries on N threads, and
with its default batch of 1 it searches one query at a time whatever `--threads` says (before 2026-11-26 this
benchmark did not pass it, which understated Pyserini at 2 threads). Each side runs in its own fresh process (its
own JVM); the clock starts after imports and JVM start-up and covers opening the index, searching every query and
writing the TREC run. Both runs must hold the same lines (ranks and scores to the printed digit; Pyserini orders the
query blocks by query id, we keep the topic file's order), else the benchmark fails. Prints queries/s for each and
the ratio ours / Pyserini, and writes the table to
eval/benchmarks/bm25-speed.json when --record is given.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import hardware, positive, record_name, run_main
from pipeline.data.files import atomic_write
from pipeline.log import peak_rss_mib

REPO = Path(__file__).resolve().parents[1]
PYSERINI_BATCH = 128  # Pyserini's CLI searches on --threads only in batches of --batch-size (default 1: one thread)


def _worker(kind: str, index: str, topics: str, output: str, hits: int, threads: int, rm3: bool) -> None:
    from pipeline import java

    java.start()
    if kind == "pyserini":
        import runpy

        import pyserini.search.lucene  # noqa: F401  (import cost is not search cost)

        sys.argv = ["pyserini.search.lucene", "--index", index, "--topics", topics, "--output", output, "--bm25",
                    "--k1", "0.9", "--b", "0.4", "--hits", str(hits), "--threads", str(threads),
                    "--batch-size", str(PYSERINI_BATCH if threads > 1 else 1)] + ["--rm3"] * rm3
        start, cpu = time.perf_counter(), time.process_time()
        runpy.run_module("pyserini.search.lucene", run_name="__main__")
    else:
        from pipeline import log
        from pipeline.data.topics import read_topics
        from pipeline.stages.bm25 import BM25

        log.configure(quiet=True)
        start, cpu = time.perf_counter(), time.process_time()
        BM25(index, 0.9, 0.4, hits, threads, rm3=rm3).bind()(read_topics(topics)).write(output, tag="Anserini")
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu  # CPU: every thread, the JVM's too
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "peak_rss_mib": peak_rss_mib()}))  # the JVM's too


def same_lines(a: Path, b: Path) -> bool:
    """The same run lines (ranks, scores, tags); only the order of the query blocks may differ (Pyserini's CLI
    writes queries sorted by id, we keep the topic file's order)."""
    return sorted(a.read_text().splitlines()) == sorted(b.read_text().splitlines())


def timed_search(kind: str, index: Path, topics: Path, output: Path, hits: int, threads: int, rm3: bool) -> dict:
    """{"seconds", "cpu_seconds", "peak_rss_mib"} of one side ("ours": irpipe's BM25 stage; "pyserini": Pyserini's own CLI) writing
    the TREC run of `topics` to `output`, in a fresh process (its own JVM)."""
    command = [sys.executable, "-m", "bench.bm25_speed", "--worker", kind, "--index", str(index),
               "--topics", str(topics), "--output", str(output), "--hits", str(hits), "--threads", str(threads)]
    command += ["--rm3"] * rm3
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{kind} worker failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cacm", help="registered dataset with a corpus (default cacm)")
    parser.add_argument("--index", help="use this index instead of the dataset's cached one")
    parser.add_argument("--repeat", type=int, default=50, help="topics repeated this many times (default 50)")
    parser.add_argument("--queries", type=positive, help="the dataset's first N topics only (default: all)")
    parser.add_argument("--threads", type=int, nargs="+", default=[2])
    parser.add_argument("--rm3", action="store_true", help="BM25 with RM3 on both sides (Pyserini's --rm3)")
    parser.add_argument("--hits", type=int, nargs="+", default=[10, 1000])
    parser.add_argument("--trials", type=int, default=2, help="best of N runs per side (default 2)")
    parser.add_argument("--record", nargs="?", const="bm25-speed", metavar="NAME", type=record_name,
                        help="write eval/benchmarks/NAME.json (default bm25-speed)")
    parser.add_argument("--worker", choices=("ours", "pyserini"), help=argparse.SUPPRESS)
    parser.add_argument("--topics", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.index, args.topics, args.output, args.hits[0], args.threads[0], args.rm3)
        return 0

    from pipeline.data.registry import get_dataset
    from pipeline.retrieve.index import dataset_index

    dataset = get_dataset(args.dataset)
    index = Path(args.index) if args.index else dataset_index(dataset)
    topics = dataset.topics()
    if args.queries:
        topics = topics.subset(list(topics.queries)[:args.queries])
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        topics_file = Path(scratch) / "topics.tsv"
        with open(topics_file, "w", encoding="utf-8") as out:
            for copy in range(args.repeat):
                for qid, text in topics.items():
                    out.write(f"{qid}-{copy}\t{' '.join(text.split())}\n")
        queries = len(topics) * args.repeat
        for threads, hits in ((t, h) for t in args.threads for h in args.hits):
            ours_run, theirs_run = Path(scratch) / "ours.trec", Path(scratch) / "pyserini.trec"
            ours, theirs = (min(timed_search(kind, index, topics_file, run, hits, threads, args.rm3)["seconds"]
                                for _ in range(args.trials)) for kind, run in (("ours", ours_run), ("pyserini", theirs_run)))
            identical = same_lines(ours_run, theirs_run)
            rows.append({"hits": hits, "queries": queries, "threads": threads, "rm3": args.rm3,
                         "ours_qps": round(queries / ours, 1), "pyserini_qps": round(queries / theirs, 1),
                         "ratio": round(theirs / ours, 2), "identical_runs": identical})
    print(f"{'threads':>7} {'hits':>6} {'queries':>8} {'ours q/s':>10} {'pyserini q/s':>13} {'ratio':>6}  identical")
    for row in rows:
        print(f"{row['threads']:>7} {row['hits']:>6} {row['queries']:>8} {row['ours_qps']:>10} {row['pyserini_qps']:>13} "
              f"{row['ratio']:>6}  {row['identical_runs']}")
    if args.record:
        record = {"command": "python -m bench.bm25_speed " + " ".join(argv or sys.argv[1:]),
                  "dataset": args.dataset, "index": str(index), "machine": hardware(),
                  "load_average_1m_at_end": round(os.getloadavg()[0], 2),
                  "rows": rows}
        with atomic_write(REPO / "eval" / "benchmarks" / f"{args.record}.json") as out:
            json.dump(record, out, indent=2)
    return 0 if all(row["identical_runs"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(run_main(main))

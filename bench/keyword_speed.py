"""Benchmark: keyword-augmented BM25 vs plain BM25, queries/s on the same index, same topics, one process.

    python -m bench.keyword_speed [--threads 2] [--hits 100] [--trials 3] [--record]

For each setting (dataset, index, dictionary) the plain `bm25` stage and `bm25kw` (weight 1, the paper's appended
keywords, and weight 0.5, a boosted query) search every topic of the dataset; no stage cache. One warm-up pass of
each comes first (JIT, index pages, the dictionary and jieba loaded). Then the topics are searched in blocks of
`--block` queries, the three sides one after the other on each block in a rotating order, so that a machine
whose load drifts (shared cores) slows every side alike; each side's time is summed over `--trials` passes, as
wall-clock (queries/s) and as the CPU time of the whole process (Python and the in-process JVM; less sensitive
to other processes on the machine than wall-clock: queries per CPU-second). The
keyword memos (keywords per text, index terms per word) are emptied before every pass, so each pass costs what a
first run over the topics costs. Prints queries/s and the ratio kw / plain (target >= 0.8; exit status 1 below it);
`--record` writes eval/benchmarks/keyword-speed.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from bench import hardware, run_main
from pipeline.data.files import atomic_write

REPO = Path(__file__).resolve().parents[1]
SETTINGS = {  # name: (dataset, segment, dictionary)
    "lcqmc-jieba": ("lcqmc/questions", "jieba", "thucnews"),
    "lcqmc-bigram": ("lcqmc/questions", "bigram", "thucnews"),
    "squad-en": ("squad-v1.1/dev", None, "squad-dev"),
}


def _seconds(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def _clocks(function) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this whole process: Python and the in-process JVM's threads)."""
    wall, cpu = time.perf_counter(), time.process_time()
    function()
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(setting: str, hits: int, threads: int, trials: int, block: int) -> dict:
    from pipeline.data.registry import get_dataset
    from pipeline.retrieve.index import open_index
    from pipeline.stages.bm25 import BM25
    from pipeline.retrieve.keywords import extractor_for
    from pipeline.stages.keywords import BM25KW

    dataset_name, segment, dictionary = SETTINGS[setting]
    dataset = get_dataset(dataset_name)
    topics = dataset.topics()
    sides = {"bm25": BM25(hits=hits, threads=threads, segment=segment).bind(dataset)}
    for weight in (1.0, 0.5):
        sides[f"bm25kw(w={weight:g})"] = BM25KW(dictionary, weight=weight, hits=hits, threads=threads,
                                                 segment=segment).bind(dataset)
    sides["bm25"](topics)  # warm-up: JIT, index pages
    first_seconds = _seconds(lambda: sides["bm25kw(w=1)"](topics))  # warm-up: dictionary, jieba with its words
    memos = [extractor_for(dictionary, None).keywords, open_index(sides["bm25"].index_path).analyze_cached]
    qids = list(topics.queries)
    blocks = [topics.subset(qids[i:i + block]) for i in range(0, len(qids), block)]
    seconds, cpu = dict.fromkeys(sides, 0.0), dict.fromkeys(sides, 0.0)
    for trial in range(trials):
        for memo in memos:  # every pass segments, analyzes and looks up its queries afresh, as a first run does
            memo.cache_clear()
        for number, part in enumerate(blocks):
            names = list(sides)
            shift = (trial + number) % len(names)  # rotate who goes first: load drift hits every side alike
            for name in names[shift:] + names[:shift]:
                spent = _clocks(lambda: sides[name](part))
                seconds[name] += spent[0]
                cpu[name] += spent[1]
    queries = len(qids) * trials
    qps = {name: round(queries / spent, 1) for name, spent in seconds.items()}
    return {"setting": setting, "dataset": dataset_name, "index": Path(sides["bm25"].index_path).name,
            "dictionary": dictionary, "queries": len(qids), "trials": trials, "hits": hits, "threads": threads,
            "qps": qps, "ratio": {name: round(seconds["bm25"] / spent, 3) for name, spent in seconds.items()
                                  if name != "bm25"},
            "queries_per_cpu_second": {name: round(queries / spent, 1) for name, spent in cpu.items()},
            "cpu_ratio": {name: round(cpu["bm25"] / spent, 3) for name, spent in cpu.items() if name != "bm25"},
            "first_bm25kw_seconds": round(first_seconds, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--hits", type=int, default=100)
    parser.add_argument("--trials", type=int, default=2, help="passes over the topics per side (default 2)")
    parser.add_argument("--block", type=int, default=1000, help="queries per timed block (default 1000)")
    parser.add_argument("--record", action="store_true", help="write eval/benchmarks/keyword-speed.json")
    args = parser.parse_args(argv)
    from pipeline import log

    log.configure(quiet=True)
    rows = [measure(setting, args.hits, args.threads, args.trials, args.block) for setting in args.settings]
    print(f"{'setting':<13} {'queries':>8} {'bm25 q/s':>9} {'bm25kw q/s':>11} {'ratio':>6} {'w=0.5 q/s':>10} "
          f"{'ratio':>6}  {'CPU ratio w=1':>13} {'w=0.5':>6}")
    for row in rows:
        qps, ratio, cpu = row["qps"], row["ratio"], row["cpu_ratio"]
        print(f"{row['setting']:<13} {row['queries']:>8} {qps['bm25']:>9} {qps['bm25kw(w=1)']:>11} "
              f"{ratio['bm25kw(w=1)']:>6} {qps['bm25kw(w=0.5)']:>10} {ratio['bm25kw(w=0.5)']:>6}  "
              f"{cpu['bm25kw(w=1)']:>13} {cpu['bm25kw(w=0.5)']:>6}")
    if args.record:
        record = {"command": "python -m bench.keyword_speed " + " ".join(argv or sys.argv[1:]),
                  "machine": hardware(),
                  "load_average_after": [round(x, 1) for x in os.getloadavg()],
                  "rows": rows}
        with atomic_write(REPO / "eval" / "benchmarks" / "keyword-speed.json") as out:
            json.dump(record, out, indent=2)
            out.write("\n")
    return 0 if all(row["ratio"]["bm25kw(w=1)"] >= 0.8 for row in rows) else 1


if __name__ == "__main__":
    sys.exit(run_main(main))

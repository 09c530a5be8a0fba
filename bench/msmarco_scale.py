"""Benchmark: indexing an MS MARCO-shaped collection.tsv is streamed (memory flat in the collection size), and
dev-small topics over it produce the leaderboard-format run.

    python -m bench.msmarco_scale --sizes 100000 1000000 [--record]

The real collection.tsv (8.8M passages) is not available offline, so this writes synthetic `pid<TAB>passage`
files of each size: passages of 40-80 words drawn from the word distribution of the SQuAD v1.1 dev paragraphs
(seeded). Each size is indexed by `irpipe index` in a fresh process; the peak resident memory of the Python
process and of the Anserini JVM are read from the index's irpipe-index.json. The JVM's heap is bounded by the
Lucene RAM buffer (`--memory-buffer`), so once a collection is large enough to fill the buffer the JVM's peak stops
growing; the Python side streams and stays flat at any size. The largest index is then searched
with the 6,980 MS MARCO dev-small queries (`irpipe search --output-format msmarco`, 1,000 hits): scores on a
synthetic corpus mean nothing, the run's shape does (6,980 queries x 1,000 `qid<TAB>pid<TAB>rank` lines).
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench import run_main
from pipeline.data.files import atomic_write

REPO = Path(__file__).resolve().parents[1]


def write_synthetic_collection(path: Path, size: int, seed: int = 13) -> None:
    from pipeline.data.registry import get_dataset

    counts = Counter(w for doc in get_dataset("squad-v1.1/dev").docs() for w in re.findall(r"\w+", doc["contents"].lower()))
    words, weights = zip(*counts.most_common())
    cumulative = list(itertools.accumulate(weights))
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as out:
        for pid in range(size):
            out.write(f"{pid}\t{' '.join(rng.choices(words, cum_weights=cumulative, k=rng.randint(40, 80)))}\n")


def run_irpipe(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pipeline.cli", "-q", *args], check=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 3_000_000])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--memory-buffer", type=int, default=256, metavar="MB",
                        help="Lucene RAM buffer (bounds the JVM heap; default 256, small enough to fill)")
    parser.add_argument("--workdir", help="keep files here (default: a temporary folder)")
    parser.add_argument("--record", action="store_true", help="write eval/benchmarks/msmarco-scale.json")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(args.workdir or scratch)
        work.mkdir(parents=True, exist_ok=True)
        for size in sorted(args.sizes):
            collection, index = work / f"collection-{size}.tsv", work / f"index-{size}"
            if not collection.exists():
                write_synthetic_collection(collection, size)
            seconds = run_irpipe("index", "--input", str(collection), "--output", str(index), "--threads",
                              str(args.threads), "--memory-buffer", str(args.memory_buffer), "--overwrite")
            meta = json.loads((index / "irpipe-index.json").read_text())
            rows.append({"lines": size, "tsv_mb": round(collection.stat().st_size / 2**20, 1),
                         "index_seconds": round(seconds, 1), "documents": meta["documents"],
                         "peak_rss_mb_python": meta["peak_rss_mb"]["python"],
                         "peak_rss_mb_java": meta["peak_rss_mb"]["java"]})
            print(json.dumps(rows[-1]), flush=True)
        largest = work / f"index-{max(args.sizes)}"
        run = work / "dev-small.msmarco.tsv"
        seconds = run_irpipe("search", "--index", str(largest), "--dataset", "msmarco-passage/dev-small", "--hits", "1000",
                          "--threads", str(args.threads), "--output-format", "msmarco", "--output", str(run))
        lines = run.read_text().splitlines()
        search = {"queries": len({line.split("\t")[0] for line in lines}), "lines": len(lines),
                  "seconds": round(seconds, 1), "first_line": lines[0]}
        print(json.dumps(search))
    if args.record:
        record = {"command": "python -m bench.msmarco_scale " + " ".join(argv or sys.argv[1:]),
                  "indexing": rows, "dev_small_search": search}
        with atomic_write(REPO / "eval" / "benchmarks" / "msmarco-scale.json") as out:
            json.dump(record, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))

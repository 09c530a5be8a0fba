"""Benchmark: `irpipe index` vs Pyserini's own indexer on the same JSONL, one run, side by side.

    python -m bench.index_speed --corpus cacm --threads 2
    python -m bench.index_speed --corpus synthetic --size 1000000 --threads 2

Both sides build the same kind of index (JsonCollection, DefaultLuceneDocumentGenerator, positions, document vectors
and raw documents): ours with `irpipe index --input FILE --output DIR`, Pyserini's with `irpipe pyserini index.lucene
--collection JsonCollection ... --storePositions --storeDocvectors --storeRaw` (Pyserini's module on irpipe's Java;
`python -m pyserini.index.lucene` needs a Java 21 on PATH). Each side runs in a fresh process: wall seconds and the
peak RSS of its largest process (the indexing JVM on both sides; `ru_maxrss` of the waited-for children). Then the two
indexes must agree: the same documents, terms and postings statistics (Anserini's IndexReaderUtils.getIndexStats),
and the same BM25 run for the dataset's topics (irpipe's BM25 on each; for the synthetic collection, 200 queries
made of its own words), else the benchmark fails. `synthetic` is msmarco_scale's collection (words drawn from
SQuAD's paragraphs), written as JSONL once into the scratch folder.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import REPO, hardware, record_name, run_main
from pipeline.data.files import atomic_write

FLAGS = ["--storePositions", "--storeDocvectors", "--storeRaw"]


def write_corpus(corpus: str, size: int, folder: Path) -> tuple[Path, dict[str, str]]:
    """(the JSONL file both sides index, topics qid -> text to search both indexes with)."""
    path = folder / "corpus" / "docs.jsonl"
    path.parent.mkdir(parents=True)
    if corpus == "synthetic":
        from bench.msmarco_scale import write_synthetic_collection

        tsv = folder / "collection.tsv"
        write_synthetic_collection(tsv, size)
        rng, words = random.Random(7), []
        with open(tsv, encoding="utf-8") as lines, open(path, "w", encoding="utf-8") as out:
            for line in lines:
                pid, text = line.rstrip("\n").split("\t")
                out.write(json.dumps({"id": pid, "contents": text}) + "\n")
                if len(words) < 20000:
                    words.extend(text.split()[:5])
        return path, {f"s{i}": " ".join(rng.sample(words, 6)) for i in range(200)}
    from pipeline.data.registry import get_dataset

    dataset = get_dataset(corpus)
    with open(path, "w", encoding="utf-8") as out:
        for doc in dataset.docs():
            out.write(json.dumps({"id": doc["id"], "contents": doc["contents"]}) + "\n")
    return path, dict(dataset.topics().items())


def timed(command: list[str]) -> dict:
    """{"seconds", "peak_rss_mib"} of `command` run by a fresh worker process (its children's largest RSS)."""
    worker = [sys.executable, "-m", "bench.index_speed", "--worker", json.dumps(command)]
    done = subprocess.run(worker, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _worker(command: list[str]) -> None:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-2000:] + done.stderr[-2000:])
        raise SystemExit(done.returncode)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB -> MiB, the largest descendant
    print(json.dumps({"seconds": seconds, "peak_rss_mib": round(peak, 1)}))


def index_stats(index: Path) -> dict:
    from pipeline import java

    utils = java.autoclass("io.anserini.index.IndexReaderUtils")
    reader = utils.getReader(str(index))
    stats = utils.getIndexStats(reader, "contents")
    found = {key: str(stats.get(key)) for key in stats.keySet().toArray()}
    if found.get("unique_terms") == "-1":  # Lucene's MultiTerms.size() is unknown (-1) over several segments:
        # an index flushed in parts (irpipe's bounded RAM buffer) against one written in a single flush; count them
        terms = java.autoclass("org.apache.lucene.index.MultiTerms").getTerms(reader, "contents").iterator()
        count = 0
        while terms.next() is not None:
            count += 1
        found["unique_terms"] = str(count)
    return found


def run_lines(index: Path, topics: dict[str, str], hits: int = 1000) -> list[str]:
    from pipeline.data.topics import Topics
    from pipeline.stages.bm25 import BM25

    run = BM25(str(index), 0.9, 0.4, hits).bind()(Topics(dict(topics)))
    return [f"{qid} {docid} {score:.6f}" for qid, ranking in run.ranking.items() for docid, score in ranking]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="cacm", help="a registered dataset with documents, or synthetic")
    parser.add_argument("--size", type=int, default=1_000_000, help="passages of the synthetic corpus")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--record", metavar="NAME", type=record_name, help="write eval/benchmarks/NAME.json")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(json.loads(args.worker))
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        corpus, topics = write_corpus(args.corpus, args.size, folder)
        ours, theirs = folder / "irpipe-index", folder / "pyserini-index"
        irpipe = [sys.executable, "-m", "pipeline.cli", "-q", "index", "--input", str(corpus), "--output", str(ours),
                  "--threads", str(args.threads)]
        pyserini = [sys.executable, "-m", "pipeline.cli", "-q", "pyserini", "index.lucene", "--collection",
                    "JsonCollection", "--generator", "DefaultLuceneDocumentGenerator", "--input", str(corpus.parent),
                    "--index", str(theirs), "--threads", str(args.threads), *FLAGS]
        sides = {"irpipe": timed(irpipe), "pyserini": timed(pyserini)}
        stats = {"irpipe": index_stats(ours), "pyserini": index_stats(theirs)}
        same_runs = run_lines(ours, topics) == run_lines(theirs, topics)
    row = {"corpus": args.corpus, "documents": stats["irpipe"].get("documents"), "threads": args.threads,
           **{f"{side}_seconds": round(result["seconds"], 1) for side, result in sides.items()},
           **{f"{side}_peak_rss_mib": result["peak_rss_mib"] for side, result in sides.items()},
           "time_ratio_pyserini_over_irpipe": round(sides["pyserini"]["seconds"] / sides["irpipe"]["seconds"], 2),
           "same_index_stats": stats["irpipe"] == stats["pyserini"], "index_stats": stats["irpipe"],
           "same_runs": same_runs, "queries": len(topics)}
    print(json.dumps(row, indent=2))
    if args.record:
        record = {"command": "python -m bench.index_speed " + " ".join(argv or sys.argv[1:]),
                  "machine": hardware(), "load_average_1m_at_end": round(os.getloadavg()[0], 2), "row": row}
        if not row["same_index_stats"]:
            record["pyserini_index_stats"] = stats["pyserini"]
        with atomic_write(REPO / "eval" / "benchmarks" / f"{args.record}.json") as out:
            json.dump(record, out, indent=2)
    return 0 if row["same_index_stats"] and same_runs else 1


if __name__ == "__main__":
    sys.exit(run_main(main))

"""Benchmark: what keying caches by content costs (pipeline/data/digests.py), on a folder of N documents and on the
same documents as one file.

    python -m bench.digest_speed --docs 1000000 --files 10 --workdir /tmp/digest-1m \
        --record digest-speed-1m

Writes msmarco_scale's synthetic collection (words drawn from SQuAD's paragraphs, seed 13: the same bytes on every
machine) under `--workdir` (kept, and reused by the next run, when given): `folder/part-NN.tsv`, `--files` parts of a
corpus folder, and `collection.tsv`, the same documents in one file (the form of MS MARCO's 8.8M collection.tsv).
Then times `content_digest` of each in this process, its per-process memo emptied before each pass:

- cold: no record under the cache's digests/ -- every file read and hashed (from the OS page cache where the files
  are still there, as just after writing them: the benchmark does not drop the page cache);
- warm: the record the cold pass wrote -- every file stat'ed, none read (what each later process pays).

The digests folder is a scratch one, never the user's cache. The record carries the CPU's name and the load average.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from bench import hardware, positive, record, record_name, run_main

COLLECTION = "collection.tsv"


def written_mark(docs: int, parts: int) -> str:
    return f".written-{docs}-{parts}"


def write_corpus(work: Path, docs: int, parts: int) -> tuple[Path, Path]:
    """(the corpus folder of `parts` TSV files, the one-file collection), written unless already there."""
    from bench.msmarco_scale import write_synthetic_collection

    collection, folder = work / COLLECTION, work / "folder"
    done = work / written_mark(docs, parts)  # the last step of a completed write, so that a cut one is redone
    if not done.exists():
        folder.mkdir(parents=True, exist_ok=True)
        write_synthetic_collection(collection, docs)
        per_part = -(-docs // parts)
        with open(collection, encoding="utf-8") as lines:
            for part in range(parts):
                with open(folder / f"part-{part:02d}.tsv", "w", encoding="utf-8") as out:
                    out.writelines(line for _, line in zip(range(per_part), lines))
        done.touch()
    return folder, collection


def timed_digest(path: Path) -> tuple[float, str]:
    """(seconds, digest) of `content_digest(path)` with this process's memo of file digests emptied."""
    from pipeline.data import files
    from pipeline.data.digests import content_digest

    files._digests.clear()
    start = time.perf_counter()
    digest = content_digest(path)
    return time.perf_counter() - start, digest


def measure(path: Path) -> dict:
    """Cold and warm digest seconds of a file or folder, with a scratch digests record."""
    size = sum(file.stat().st_size for file in ([path] if path.is_file() else path.iterdir()))
    before = os.environ.get("IRPIPE_CACHE")
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["IRPIPE_CACHE"] = scratch
        try:
            cold, digest = timed_digest(path)
            warm, again = timed_digest(path)
        finally:
            if before is None:
                del os.environ["IRPIPE_CACHE"]
            else:
                os.environ["IRPIPE_CACHE"] = before
    assert again == digest, "the warm digest differs from the cold one"
    return {"mb": round(size / 2**20, 1), "files": 1 if path.is_file() else len(list(path.iterdir())),
            "cold_seconds": round(cold, 3), "cold_mb_per_s": round(size / 2**20 / cold, 1),
            "warm_seconds": round(warm, 4), "digest": digest}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=positive, default=1_000_000, help="documents (default 1,000,000)")
    parser.add_argument("--files", type=positive, default=10, help="files of the corpus folder (default 10)")
    parser.add_argument("--workdir", help="write (and keep) the corpus here (default: a temporary folder)")
    parser.add_argument("--record", type=record_name, metavar="NAME", help="write eval/benchmarks/NAME.json")
    args = parser.parse_args(argv)
    from bench._inference_models import cpu_name

    with tempfile.TemporaryDirectory() as scratch:
        work = Path(args.workdir or scratch)
        start, reused = time.perf_counter(), (work / written_mark(args.docs, args.files)).exists()
        folder, collection = write_corpus(work, args.docs, args.files)
        written = None if reused else round(time.perf_counter() - start, 1)
        rows = {"folder": measure(folder), "one_file": measure(collection)}
    loads = [round(load, 2) for load in os.getloadavg()]
    payload = {"cpu": cpu_name(), "hardware": hardware(), "load_average_1_5_15": loads,
               "docs": args.docs, "write_seconds": written, **rows}  # None: found written in --workdir
    for name, row in rows.items():
        print(f"{name}: {row['files']} file(s), {row['mb']} MB: cold {row['cold_seconds']} s "
              f"({row['cold_mb_per_s']} MB/s), warm {row['warm_seconds']} s")
    print(f"{payload['cpu']}; load average {' '.join(f'{x:.2f}' for x in payload['load_average_1_5_15'])}")
    if args.record:
        record(args.record, "bench.digest_speed", argv, payload)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))

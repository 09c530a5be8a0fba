"""Property-based fuzzing of every reader irpipe has (hypothesis): topics, qrels, runs, corpora, dataset.yaml, dataset
folders (answer selection, BEIR, MS MARCO), experiment files, pipeline specs, measures, checkpoints' config.json.

    python -m bench.fuzz_readers --cases 100000 --record     # eval/benchmarks/fuzz-readers.json

--cases is the total, shared evenly by the readers (--readers picks some). Each case is a valid input the case
builds from known data, or one mutated with the characters readers trip on (bench/_fuzz_cases.py
says what a case must give). A finding is a case that did otherwise: a traceback (an exception that is not one of
the package's), a message that is not printable, an id breaking the id rule in a result, a valid input refused or
read otherwise, or a run or qrels file read otherwise than ir-measures' reader reads it. Findings are grouped by
kind, with a count and the first case of each; the exit status is 1 when there is any. tests/test_fuzz_readers.py
runs the same properties, a few dozen derandomized cases per reader, and lets hypothesis shrink a finding.
"""
from __future__ import annotations

import argparse
import logging
import multiprocessing
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench import machine, record, run_main


def fuzz(reader, cases: int, seed: int | None = None, derandomize: bool = False, stop: bool = False) -> dict:
    """Run `cases` hypothesis cases of `reader` (a _fuzz_cases.Reader): {"cases", "seconds", "findings"}. With
    `stop`, the first finding raises AssertionError after hypothesis has shrunk it (the tests' way)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as fixed_seed

    from bench._fuzz_cases import check, write

    findings: dict[str, dict] = {}
    count = 0
    root = Path(tempfile.mkdtemp(prefix="irpipe-fuzz-"))
    deep = root / "a" / "b" / "c"  # a spec naming `..` or `../..` reads this empty tree, not the system's /tmp
    deep.mkdir(parents=True)

    @settings(max_examples=cases, derandomize=derandomize, database=None, deadline=None, print_blob=False,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate, *([Phase.shrink] if stop else [])])
    @given(reader.cases)
    def one(case):
        nonlocal count
        count += 1
        folder = Path(tempfile.mkdtemp(dir=deep))
        try:
            write(case, folder)
            finding = check(reader, case, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if finding is None:
            return
        if stop:
            raise AssertionError(f"{reader.name}: {finding}")
        kind = re.sub(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\d+", "_", finding)[:140]  # the message less values
        entry = findings.setdefault(kind, {"finding": finding, "case": repr(case.files)[:400], "count": 0})
        entry["count"] += 1

    if seed is not None:
        one = fixed_seed(seed)(one)
    start = time.perf_counter()
    quiet = logging.getLogger("irpipe")
    level, quiet.level = quiet.level, logging.ERROR  # a reader's warnings (a nickname's left-out measures), not ours
    try:
        one()
    finally:
        quiet.setLevel(level)
        shutil.rmtree(root, ignore_errors=True)
    return {"cases": count, "seconds": round(time.perf_counter() - start, 1), "findings": list(findings.values())}


def readers() -> dict:
    """Every fuzzed reader (a _fuzz_cases.Reader) by name."""
    from bench._fuzz_cases import file_readers
    from bench._fuzz_more import more_readers

    return {reader.name: reader for reader in (*file_readers(), *more_readers())}


def _fuzz_one(task: tuple[str, int, int]) -> dict:
    name, cases, seed = task
    return fuzz(readers()[name], cases, seed=seed)


def _show(name: str, row: dict) -> None:
    found = sum(finding["count"] for finding in row["findings"])
    print(f"{name:24} {row['cases']:>7} cases {row['seconds']:>8.1f} s  {found} findings ({len(row['findings'])} "
          "kinds)", flush=True)
    for finding in row["findings"]:
        print(f"    {finding['count']} x {finding['finding']}\n      first: {finding['case']}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz_readers", description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="cases in all, shared by the readers (10000)")
    parser.add_argument("--readers", nargs="+", metavar="NAME", help="fuzz these readers only (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed (0)")
    parser.add_argument("--jobs", type=int, default=1, help="readers fuzzed at once, one process each (1)")
    parser.add_argument("--record", action="store_true", help="write eval/benchmarks/NAME.json")
    parser.add_argument("--name", default="fuzz-readers", help="the record's name (fuzz-readers)")
    args = parser.parse_args(argv)
    known = readers()
    names = args.readers or list(known)
    unknown = [name for name in names if name not in known]
    if unknown:
        parser.error(f"unknown reader {unknown[0]!r}; known: {', '.join(known)}")
    rows = {}
    tasks = [(name, max(1, args.cases // len(names)), args.seed) for name in names]
    start = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(max(1, args.jobs)) as pool:
        for name, row in zip(names, pool.imap(_fuzz_one, tasks)):  # in the readers' order, each as it ends
            rows[name] = row
            _show(name, row)
    total = {"cases": sum(row["cases"] for row in rows.values()),
             "seconds": round(sum(row["seconds"] for row in rows.values()), 1),
             "findings": sum(len(row["findings"]) for row in rows.values()),
             "wall_seconds": round(time.perf_counter() - start, 1), "jobs": args.jobs}
    print(f"{'all':24} {total['cases']:>7} cases {total['seconds']:>8.1f} s ({total['wall_seconds']} s wall, "
          f"{args.jobs} jobs)  {total['findings']} kinds of finding; {machine()}")
    if args.record:
        record(args.name, "bench.fuzz_readers", argv, {"seed": args.seed, "total": total,
                                                                         "readers": rows})
    return 1 if total["findings"] else 0


if __name__ == "__main__":
    sys.exit(run_main(main))

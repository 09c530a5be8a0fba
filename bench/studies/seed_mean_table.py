"""The p-value beside each seeded pin's mean, before and after it became the seed mean's: a markdown table.

    python bench/studies/seed_mean_table.py > eval/benchmarks/seed-mean-pvalues.md

Results written before 2026-12-02 (before commit 35cf11b) held, beside the mean over seeds, the first seed's
run tested against the baseline. Since then a run tests the per-query seed means (pipeline/significance.py
PAIRED_SEED_MEANS). For every pinned experiment (eval/*.yaml) with seeds and a baseline, this prints each measure's
p-value then (from `git show BEFORE:eval/results/NAME.json`) and now (eval/results/NAME.json), where the now-value
came from (made again from the kept per-query differences, or a re-run of every seed, whose weights may differ
from the pinned ones on another CPU, or the seed-mean `irpipe eval` command the pin's description states, on the
pinned runs: pipeline/provenance.py `stated_seed_means`), and whether the 0.05 conclusion changed. A measure still
pending a re-run says so. Reads only tracked files and the git history; writes nothing.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from pipeline.reproduce import pins

ROOT = Path(__file__).resolve().parents[2]
BEFORE = "35cf11b^"  # the results before they were made the seed mean's (35cf11b): seed 0's p-values
LEVEL = 0.05
STATED = "seed-mean `irpipe eval` its description states"


def _before(name: str, rev: str) -> dict | None:
    shown = subprocess.run(["git", "show", f"{rev}:eval/results/{name}.json"], cwd=ROOT, capture_output=True,
                           text=True)
    return json.loads(shown.stdout) if shown.returncode == 0 else None


def _p(p: float | None) -> str:
    return "-" if p is None else f"{p:.2g}"


def _change(old: float | None, new: float | None) -> str:
    if old is None or new is None:
        return ""
    return "" if (old < LEVEL) == (new < LEVEL) else f"**crosses {LEVEL}**"


def rows(eval_dir: Path, rev: str) -> list[list[str]]:
    table = []
    for pin in pins(eval_dir, eval_dir / "results"):
        experiment, now = pin.experiment, pin.result
        if not (experiment.seeds and experiment.baseline and now):
            continue
        then = _before(experiment.name, rev) or {}
        if "baseline" not in then:  # first run with this baseline after the change: the seed mean's from the start
            then = {"baseline": {"pvalues": dict.fromkeys(now["baseline"]["pvalues"])}}
        rerun = now.get("seeds") != then.get("seeds")
        pending = now["baseline"].get("pending") or {}
        stated = now["baseline"].get("stated") or []
        moved = "spec" in then["baseline"] and then["baseline"]["spec"] != now["baseline"]["spec"]
        for measure, old in then["baseline"]["pvalues"].items():
            new = now["baseline"]["pvalues"].get(measure)
            source = ("first run since" if "seeds" not in then else
                      f"re-run against another baseline, `{now['baseline']['spec'][:40]}...`" if moved else
                      "re-run, every seed" if rerun else "pending re-run" if measure in pending
                      else STATED if measure in stated else "per-query differences kept")
            table.append([experiment.name, measure, _p(old), _p(new), source, "" if moved else _change(old, new)])
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--eval-dir", type=Path, default=ROOT / "eval", metavar="DIR")
    parser.add_argument("--before", default=BEFORE, metavar="REV", help=f"the commit of the seed-0 values ({BEFORE})")
    args = parser.parse_args(argv)
    table = rows(args.eval_dir, args.before)
    print(f"# Seed-mean p-values beside the seed-0 ones they replaced\n\n`python bench/studies/seed_mean_table.py`"
          f" (seed 0: eval/results at {args.before}; seed mean: eval/results now). The test: two-sided paired t-test"
          f" over per-query seed means vs the experiment's baseline.\n")
    print("| pin | measure | seed 0 p (before) | seed-mean p (now) | now from | conclusion at 0.05 |")
    print("|---|---|---:|---:|---|---|")
    for row in table:
        print("| " + " | ".join(row) + " |")
    changed = sum(1 for row in table if row[-1])
    print(f"\n{len(table)} p-values of {len({row[0] for row in table})} pins; {changed} cross {LEVEL}; "
          f"{sum(1 for row in table if row[4] == STATED)} from the seed-mean command a pin's description states; "
          f"{sum(1 for row in table if row[4] == 'pending re-run')} pending a re-run.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The p-values of the seeded results against their baselines made the seed mean's, without retraining:

    python bench/studies/seed_mean_pvalues.py && irpipe leaderboard --prose && irpipe leaderboard --html

Results written before 2026-12-02 hold, beside each seed mean, the first seed's run against the baseline. The runs
were not kept; what was kept is `win_loss`: the first measure's per-query differences of the seed means from the
baseline (4 decimals), every query where there are at most 400. From those the two-sided paired t-test over
per-query seed means is made again (pipeline/provenance.py `seed_mean_pvalues`); every other measure, and every
result whose record holds quantiles or nothing, keeps seed 0's p-value in `baseline.pending` ("seed-0 only, pending
re-run") and none in `baseline.pvalues` until `irpipe run` runs it again, unless the result's description states
that measure's seed-mean p-value with the `irpipe eval --seed-mean` command that measured it on the pinned runs
(`stated_seed_means`): then that one, and `baseline.stated` says so. It prints each changed p-value, old and
new; a result already holding the seed mean's (a later run, or this command before) is left as it is. A results
file that is not JSON is an error naming its file and line (exit status 2).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipeline.data.files import atomic_write, read_json
from pipeline.errors import IrpipeError
from pipeline.provenance import seed_mean_pvalues

RESULTS = Path(__file__).resolve().parents[2] / "eval" / "results"


def _shown(p: float | None) -> str:
    return "none" if p is None else f"{p:.3g}"


def rewrite(results_dir: Path) -> None:
    """Each seeded results file in `results_dir` with its baseline's p-values the seed mean's, written in place."""
    for path in sorted(results_dir.glob("*.json")):
        result = read_json(path)
        if "baseline" not in result:
            continue
        baseline = seed_mean_pvalues(result)
        if baseline == result["baseline"]:
            continue
        for measure, old in result["baseline"]["pvalues"].items():
            old = (result["baseline"].get("pending") or {}).get(measure, old)
            new = baseline["pvalues"][measure]
            if new == old:
                continue
            print(f"{result['name']} {measure}: seed 0 {_shown(old)} -> "
                  + ("pending re-run" if new is None else f"seed mean {_shown(new)}"))
        result["baseline"] = baseline
        with atomic_write(path) as out:
            json.dump(result, out, indent=2)
            out.write("\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results-dir", type=Path, default=RESULTS, metavar="DIR",
                        help="the results files to rewrite (default eval/results)")
    args = parser.parse_args(argv)
    try:
        rewrite(args.results_dir)
    except IrpipeError as error:
        print(f"seed_mean_pvalues: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What an experiment's result says about how it was obtained: when, in which environment, what it reused from
the cache, what a cold run of it costs, and its per-query wins and losses against its baseline.

Fields added to the result file (runs/results/<name>.json; with `--record`, eval/results/) by `irpipe run`
(pipeline/experiment.py):

    date         when this run finished (UTC, ISO 8601)
    environment  pipeline/environment.py `capture()`
    reused       what this run read from the cache that an earlier process had computed (pipeline/data/reuse.py)
    cost         the last cold run (nothing reused): {"seconds", "date", "cores", "load_average" (1-minute, at its
                 end)}. A run that reused cached work measured only what was left, so it keeps the previous file's
                 cost; none yet: no cost field
    resumed      a cold run of `irpipe reproduce` resumed over several attempts (pipeline/cold_attempts.py): their
                 seconds and what the last read back from the earlier ones; its cost is their sum, its reused empty
    win_loss     with a baseline: the first measure's per-query differences (run - baseline; the mean over seeds
                 per query for a seeded experiment), sorted, as at most WIN_LOSS_POINTS quantiles, with the counts

and `cost_class(result)` is what `irpipe reproduce` lists: seconds / minutes / hours, or unmeasured.
`seed_mean_pvalues(result)` makes a seeded result from before 2026-12-02 (its p-values the first seed's) hold the seed
mean's p-value of its win_loss measure, made again from the recorded differences, and the rest as pending a re-run;
a pending measure whose seed-mean p-value the result's description states, with the `irpipe eval --seed-mean`
command that measured it on the pinned runs (`stated_seed_means`), takes that one.
"""
from __future__ import annotations

import math
import os
import re
import statistics
from datetime import datetime, timezone
from pathlib import Path

from pipeline import environment
from pipeline.data import reuse
from pipeline.data.files import parse_json
from pipeline.data.yaml_files import load_yaml

WIN_LOSS_POINTS = 400
CPU_SENSITIVITY = Path("eval") / "benchmarks" / "cpu-sensitivity.yaml"  # the checkout's, where irpipe is run from
UNMEASURED = "unmeasured"
RECOMPUTE = "python bench/studies/seed_mean_pvalues.py"
PENDING = "seed-0 only, pending re-run"  # how a `pending` p-value is shown: its seed-mean test needs the runs again
STATED = "the seed-mean `irpipe eval` command its description states, on the pinned runs"  # baseline["stated"]
_STATED = re.compile(r"--seed-mean [^`]*-m ([^`]+)`.*?\bp = (\S+(?: / \S+)*)")


def previous(path: Path) -> dict:
    """The result file a run is about to replace ({} when there is none or it is not readable JSON)."""
    try:
        data = parse_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record(result: dict, before: dict, comparison=None, runs: list[str] = ()) -> None:
    """Add date, environment, reused (since `reuse.begin()` at the run's start), cost and (with a baseline)
    win_loss to `result`; `before` is the result file this one replaces, `runs` the run names (seeds)."""
    now = datetime.now(timezone.utc).replace(microsecond=0)
    result["date"] = now.isoformat()
    result["environment"] = environment.capture()
    result["reused"] = reuse.counts()
    if not result["reused"]:
        result["cost"] = {"seconds": result["seconds"], "date": result["date"], "cores": os.cpu_count(),
                          "load_average": round(os.getloadavg()[0], 1)}  # a shared machine's seconds need it beside
    elif isinstance(before.get("cost"), dict):
        result["cost"] = before["cost"]
    if comparison is not None and comparison.baseline is not None and runs:
        result["win_loss"] = win_loss(comparison, list(runs))


def win_loss(comparison, runs: list[str]) -> dict:
    """The first measure's per-query differences of `runs` (averaged per query) from the baseline."""
    measure = comparison.measures[0]
    per_run = [comparison.differences(run, measure) for run in runs]
    common = [qid for qid in per_run[0] if all(qid in d for d in per_run)]
    deltas = sorted((statistics.fmean(d[qid] for d in per_run) for qid in common), reverse=True)
    points = deltas if len(deltas) <= WIN_LOSS_POINTS else [
        deltas[round(i * (len(deltas) - 1) / (WIN_LOSS_POINTS - 1))] for i in range(WIN_LOSS_POINTS)]
    return {"measure": measure, "queries": len(deltas), "wins": sum(d > 0 for d in deltas),
            "losses": sum(d < 0 for d in deltas), "ties": sum(d == 0 for d in deltas),
            "differences": [round(d, 4) for d in points]}


def seed_mean_pvalue(record: dict | None) -> float | None:
    """The paired t-test of a win_loss record's measure, from its per-query differences (the seed means' minus the
    baseline's, to 4 decimals; the test pairs them with 0); None where the record keeps quantiles, not every query,
    or the test is undefined."""
    from pipeline.significance import paired_ttest

    if not record or len(record["differences"]) != record["queries"]:
        return None
    differences = dict(enumerate(record["differences"]))
    p = paired_ttest(differences, dict.fromkeys(differences, 0.0))
    return None if math.isnan(p) else p


def seed_mean_pvalues(result: dict) -> dict:
    """A seeded result's `baseline` as a run now writes it, made from one whose p-values are its first seed's
    run against the baseline (results from before 2026-12-02, their runs not kept): the win_loss measure's
    p-value made again from its per-query differences, every other measure's seed-0 p-value set apart in
    `pending` (seed-0 only, pending re-run), the test named."""
    from pipeline.significance import PAIRED_SEED_MEANS

    baseline = dict(result["baseline"])
    if not result.get("seeds") or baseline.get("test"):
        return _stated(baseline, result.get("description", ""))  # one run, or already the seed mean's
    record = result.get("win_loss")
    recomputed = seed_mean_pvalue(record)
    measure = record["measure"] if recomputed is not None else None
    seed0 = baseline["pvalues"]
    baseline["pvalues"] = {m: recomputed if m == measure else None for m in seed0}
    baseline["test"] = PAIRED_SEED_MEANS
    baseline["pending"] = {m: p for m, p in seed0.items() if m != measure}
    if measure:
        baseline["recomputed"] = (f"{measure} from win_loss (the per-query seed-mean differences, 4 decimals): "
                                  f"{RECOMPUTE}")
    return _stated(baseline, result.get("description", ""))


def stated_seed_means(description: str) -> dict[str, float]:
    """measure -> the seed-mean p-value a description states after its `irpipe eval --seed-mean` command
    ("... --seed-mean RUNS --baseline B -m R@1 R@5 RR@10`: p = 3.7e-06 / 9.5e-09 / 5.8e-15"); empty when it states
    none, or not one value per measure."""
    found = _STATED.search(description or "")
    if not found:
        return {}
    measures, values = found.group(1).split(), [v.rstrip(",;.)") for v in found.group(2).split(" / ")]
    try:
        return dict(zip(measures, map(float, values), strict=True))
    except ValueError:
        return {}


def _stated(baseline: dict, description: str) -> dict:
    """`baseline` with each pending measure whose seed-mean p-value `description` states (`stated_seed_means`)
    moved from `pending` to `pvalues`, and `stated` naming them (their source: STATED)."""
    pending = baseline.get("pending") or {}
    found = {m: p for m, p in stated_seed_means(description).items() if m in pending}
    if not found:
        return baseline
    baseline["pvalues"] = {**baseline["pvalues"], **found}
    baseline["pending"] = {m: p for m, p in pending.items() if m not in found}
    if not baseline["pending"]:
        del baseline["pending"]
    baseline["stated"] = list(found)  # the measures whose p-value comes from STATED
    return baseline


def cost_class(result: dict | None) -> str:
    """seconds (under a minute), minutes (under an hour) or hours, from the last cold run; unmeasured without."""
    seconds = cost_seconds(result)
    if seconds is None:
        return UNMEASURED
    return "seconds" if seconds < 60 else "minutes" if seconds < 3600 else "hours"


def format_seconds(seconds: float | None) -> str:
    """12.3 s, 4.5 min or 1.23 h; `unmeasured` for None."""
    if seconds is None:
        return UNMEASURED
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 3600 else f"{seconds / 3600:.2f} h"


def cost_seconds(result: dict | None) -> float | None:
    cost = (result or {}).get("cost")
    return cost.get("seconds") if isinstance(cost, dict) else None


def cpu_notes(spec: str, path: Path = CPU_SENSITIVITY) -> list[str]:
    """What eval/benchmarks/cpu-sensitivity.yaml says about the models this pipeline trains (`MODEL(train=` in the spec):
    each entry's `note`, for a model measured to move with the CPU's kernels."""
    if not path.is_file():
        return []
    compact = spec.replace(" ", "")
    return [f"{entry['model']}: {entry['note']}" for entry in load_yaml(path) or []
            if isinstance(entry, dict) and entry.get("moves") and f"{entry['model']}(" in compact
            and "train=" in compact.split(f"{entry['model']}(", 1)[1].split(")", 1)[0]]


def environment_notes(before: dict, result: dict, spec: str) -> list[str]:
    """The notes `irpipe run --check` prints: how this run's environment differs from the replaced result's (the
    one its pin was last checked in), and what is known of the pin's trained models and the CPU."""
    notes = []
    changed = environment.differences(before.get("environment"), result.get("environment") or {})
    if changed:
        notes.append(f"the environment differs from the last recorded run's ({before.get('date', 'date unknown')}): "
                     + "; ".join(changed))
    elif before and not before.get("environment"):
        notes.append("the last recorded run's environment was not recorded: nothing to compare with")
    notes += [f"known to move with the CPU's kernels -- {note}" for note in cpu_notes(spec)]
    return notes

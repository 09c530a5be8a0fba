"""How an experiment's result prints on the command line (`irpipe run`): its scores in the table `irpipe eval`
prints, their checks, and with a baseline the comparison table and where the runs and the plot went."""
from __future__ import annotations

from pipeline.experiment import BASELINE


def _listed(paths: str | list[str]) -> str:
    return paths if isinstance(paths, str) else ", ".join(paths)


def score_table(name: str, scores: dict[str, float], queries: int) -> list[str]:
    """The header and the row of one run's scores as `irpipe eval` prints them (pipeline/compare.py's table): the
    one layout of scores that `irpipe eval`, `irpipe run` and `irpipe rerank --eval` share."""
    from pipeline.compare import Comparison

    return Comparison(list(scores), {name: scores}, {name: queries}, {}).to_table().splitlines()[:2]


def format_result(result: dict) -> str:
    """The scores with their checks; with a baseline, the comparison table and where the plot went."""
    width = max(len(m) for m in result["measures"]) if result["measures"] else 8
    lines = [f"{result['name']}  {result['dataset']}  {result['pipeline']}  ({result['queries']} queries)"]
    seeds = result.get("seeds")
    if seeds:
        lines.append(f"  mean ± sd over {len(seeds)} seeds; " + "; ".join(
            f"seed {seed}: " + " ".join(f"{m} {scores[m]:.4f}" for m in result["measures"])
            for seed, scores in seeds.items()))
    if not seeds:  # the table `irpipe eval` prints (its header and row), then the checks
        lines += score_table(result["name"], result["measures"], result["queries"])
    for measure, score in result["measures"].items():
        check = result["checks"].get(measure)
        spread = f" ± {result['sd'][measure]:.4f}" if seeds else ""
        note = f"  expected {check['expected']:.4f}  {check['status']}" if check else ""
        if check and seeds:
            note += f"  (tolerance {result['tolerance']:g}; from the spread {result['spread_tolerance'][measure]:.4f})"
        if seeds or check:
            lines.append(f"  {measure:<{width}}  {score:.4f}{spread}{note}")
    if "baseline" in result:
        baseline = result["baseline"]
        beside = result.get("beside", {})
        lines += ["", f"{result['name']} = {result['spec']}", f"{BASELINE} = {baseline['spec']}",
                  *(f"{label} = {row['spec']}" for label, row in beside.items()), baseline["table"].rstrip("\n"),
                  f"runs: {baseline['run']} (baseline), {_listed(result['run'])}"
                  + "".join(f", {row['run']} ({label})" for label, row in beside.items())
                  + f"; per-query wins and losses: {baseline['plot']}"]
    lines += [f"note: {note}" for note in result.get("notes", [])]  # the environment against the last run's
    return "\n".join(lines)

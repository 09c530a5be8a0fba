"""`irpipe tune`: grid search of a pipeline's parameters on a tuning set (PyTerrier's GridSearch, from a spec).

The spec names each tuned value with a `{placeholder}`; every combination of the `--grid` values is substituted,
run on the dataset and scored with one measure. Example — the weight of a neural score against IDF overlap,
tuned on the dev questions (only the ratio of the two weights matters for the ranking):

    irpipe tune "fusion(hcan(ckpt=DIR), overlap(idf=true), method=weighted, weights=[{w}, 1], norm=zscore)" \\
        --dataset trecqa/raw-dev --grid w=0.5,1,2,3 --measure AP

Stage outputs are cached, so a stage whose spec does not change across the grid (here hcan and overlap) runs
once. Ties keep the first combination in grid order. The winning spec is printed last; `--output` writes every
row as JSON (atomically).

Runs made elsewhere, with no spec to run (a benchmark's BM25 and model scores of one candidate list): their fusion
weight is tuned the same way on a tuning query set by `tune_fusion_weight(runs, qrels, grid, measure)`, and applied
to another query set's runs by `pipeline.rerank.fusion.fuse` (bench/keyword_bert.py's `--fusion`).
"""
from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING, Sequence

from pipeline.errors import ConfigError
from pipeline.log import logger

if TYPE_CHECKING:
    from pipeline.data.runs import Run

PLACEHOLDER = re.compile(r"\{(\w+)\}")


def parse_grid(items: list[str]) -> dict[str, list[str]]:
    """["w=0.5,1,2", "k=10,20"] -> {"w": ["0.5", "1", "2"], "k": ["10", "20"]} (values stay spec text)."""
    grid: dict[str, list[str]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        name = name.strip()
        choices = [v.strip() for v in values.split(",") if v.strip()] if sep else []
        if not re.fullmatch(r"\w+", name) or not choices:
            raise ConfigError(f"--grid {item!r}: expected NAME=V1,V2,... (e.g. w=0.5,1,2)")
        if name in grid:
            raise ConfigError(f"--grid {name} given twice")
        grid[name] = choices
    return grid


def expand(spec: str, grid: dict[str, list[str]]) -> list[tuple[dict[str, str], str]]:
    """Every combination of the grid values (in grid order) with the spec it makes."""
    used = set(PLACEHOLDER.findall(spec))
    if used - grid.keys():
        raise ConfigError(f"no --grid for placeholder(s) {', '.join(sorted(used - grid.keys()))} in {spec!r}")
    if grid.keys() - used:
        raise ConfigError(f"--grid {', '.join(sorted(grid.keys() - used))} not used by the spec: write "
                          f"{{name}} where a value goes")
    names = list(grid)
    combinations = [dict(zip(names, values)) for values in itertools.product(*(grid[n] for n in names))]
    return [(values, PLACEHOLDER.sub(lambda m, v=values: v[m.group(1)], spec)) for values in combinations]


def grid_search(spec: str, dataset, grid: dict[str, list[str]], measure: str,
                extra_measures: list[str] = (), rel_level: int | None = None) -> list[dict]:
    """Run and score every combination on `dataset` (a `Dataset`, or a name or folder); rows in grid order, each
    {"values", "spec", "measures"}."""
    from pipeline.experiment import run_pipeline

    rows = []
    for number, (values, concrete) in enumerate(expand(spec, grid), start=1):
        logger.info("tune %d: %s", number, concrete)
        run, _, dataset = run_pipeline(concrete, dataset)
        level = rel_level if rel_level is not None else dataset.rel_level
        rows.append(scored_row(values, concrete, run, dataset.qrels(), measure, extra_measures, level))
    return rows


def tune_fusion_weight(runs: Sequence[Run], qrels, grid: Sequence[float], measure: str,
                       extra_measures: list[str] = (), norm: str = "zscore", rel_level: int = 1) -> tuple[float, list[dict]]:
    """The weight of the last of `runs` (runs made elsewhere, e.g. a benchmark's BM25 and model scores of one tuning
    query set), each other run weighing 1, in `fuse(runs, method="weighted", weights=[1, ..., w], norm=norm)`
    (pipeline/stage.py, the `fusion` stage's arithmetic): the `grid` value whose fusion scores best on `qrels` by
    `measure`, the first in grid order among equals (`best`), and every value's row as `grid_search` makes them.
    Apply the weight to the test queries' runs with the same `fuse`: tuned on one query set, used on another."""
    from pipeline.rerank.fusion import fuse

    rows = []
    for weight in grid:
        weights = [1.0] * (len(runs) - 1) + [weight]
        spec = (f"fusion({', '.join(f'run{i}' for i in range(1, len(runs) + 1))}, method=weighted, "
                f"weights=[{', '.join(map(str, weights))}], norm={norm})")
        fused = fuse(runs, "weighted", weights=weights, norm=norm)
        rows.append(scored_row({"w": str(weight)}, spec, fused, qrels, measure, extra_measures, rel_level))
    return grid[rows.index(best(rows))], rows


def scored_row(values: dict[str, str], spec: str, run: Run, qrels, measure: str, extra_measures: list[str],
               rel_level: int) -> dict:
    """One row of a grid: its values, the spec they make, and `run`'s scores on `qrels` by `measure` (the tuned one,
    "key") and the extra measures."""
    from pipeline.evaluation import evaluate, parse_measure

    measures = list(dict.fromkeys([measure, *extra_measures]))
    return {"values": values, "spec": spec, "measures": evaluate(run, qrels, measures, rel_level),
            "key": str(parse_measure(measure, rel_level))}


def best(rows: list[dict]) -> dict:
    """The row with the highest tuned measure; the first in grid order among equals."""
    return max(rows, key=lambda row: row["measures"][row["key"]])  # max keeps the first of equal scores


def format_rows(rows: list[dict]) -> str:
    names = list(rows[0]["values"])
    measures = list(rows[0]["measures"])
    top = best(rows)
    header = [*names, *measures]
    lines = ["  ".join(f"{h:>10}" for h in header)]
    for row in rows:
        cells = [*row["values"].values(), *(f"{row['measures'][m]:.4f}" for m in measures)]
        lines.append("  ".join(f"{c:>10}" for c in cells) + ("  <- best" if row is top else ""))
    lines.append(f"best {top['key']} {top['measures'][top['key']]:.4f}: {top['spec']}")
    return "\n".join(lines)

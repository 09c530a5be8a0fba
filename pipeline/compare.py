"""Runs compared on the same qrels: a table of runs by measures, paired t-tests against a baseline (optionally
Holm/Bonferroni-corrected), formats for people and programs, and the per-query win/loss plot.

    comparison = compare({"bm25": run_a, "biencoder": run_b}, qrels, ["nDCG@10", "AP"], baseline="bm25")
    print(comparison)                        # the table, p-values beside the compared runs
    plot_differences(comparison, "runs/x.png")

With `seed_mean=True`, the runs of one system trained with several seeds (names that differ only in `.seedN`,
as `irpipe run` writes them: runs/x.seed0.trec, runs/x.seed1.trec ...) are one row: each query's score is
averaged over the seeds first, and the t-test pairs those means query by query -- a test of the systems, not of
one seed's luck. `fold_seeds(comparison)` does it to a comparison made run by run, as `irpipe run` does.
"""
from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from pipeline import log
from pipeline.data.files import atomic_write
from pipeline.errors import UnknownNameError
from pipeline.evaluation import (QUERY_SETS, EvalError, QrelsLike, RunLike, as_qrels, evaluation_inputs, evaluator,
                               parse_measures)
from pipeline.significance import BELOW_RANGE, CORRECTIONS, OVER_SEED_MEANS, TESTS, adjust_pvalues, paired_pvalue, wins_losses

SEED = re.compile(r"\.seed(\d+)(?=\.|$)")  # runs/x.seed2.trec: seed 2 of system runs/x.seed{...}.trec
FORMATS = ("table", "json", "csv", "markdown")


@dataclass
class Comparison:
    """Runs (rows) by measures (columns), with p-values against a baseline when one is given."""

    measures: list[str]
    scores: dict[str, dict[str, float]]  # run -> measure -> aggregate
    queries: dict[str, int]  # run -> number of evaluated queries
    per_query: dict[str, dict[str, dict[str, float]]]  # run -> measure -> qid -> score
    baseline: str | None = None
    correction: str | None = None
    pvalues: dict[str, dict[str, float]] = field(default_factory=dict)  # run (not the baseline) -> measure -> p
    query_set: str = "qrels"
    seed_mean: bool = False  # rows are systems whose per-query scores are means over their seeds' runs
    depth: int | None = None  # trec_eval -M: each ranking's first `depth` documents
    judged_only: bool = False  # trec_eval -J
    missing: dict[str, int] = field(default_factory=dict)  # run -> judged queries it has no hits for
    tied: dict[str, int] = field(default_factory=dict)  # run -> queries whose ranking has tied scores
    test: str = "t"  # the paired test of the p-values: a key of significance.TESTS

    @property
    def runs(self) -> list[str]:
        return list(self.scores)

    def differences(self, run: str, measure: str) -> dict[str, float]:
        """qid -> run score minus baseline score, over the queries both were evaluated on."""
        if self.baseline is None:
            raise EvalError("per-query differences need a baseline")
        if measure not in self.measures:
            raise UnknownNameError("measure", measure, self.measures)
        mine, base = self.per_query[run][measure], self.per_query[self.baseline][measure]
        return {qid: mine[qid] - base[qid] for qid in base if qid in mine}

    def rows(self, per_query: bool = False, summary: bool = True) -> list[dict]:
        """One dict per run (and per query first, with qid 'all' on the aggregate row, when `per_query`); no
        aggregate rows without `summary` (trec_eval -n)."""
        out = []
        for run in self.runs:
            if per_query:
                qids = next(iter(self.per_query[run].values()), {})
                for qid in qids:
                    row = {"run": run, "qid": qid, "queries": None}
                    row.update({m: self.per_query[run][m].get(qid) for m in self.measures})
                    if self.baseline is not None:
                        row.update({f"{m} p-value": None for m in self.measures})
                    out.append(row)
            if not summary:
                continue
            row = {"run": run, **({"qid": "all"} if per_query else {}), "queries": self.queries[run]}
            row.update(self.scores[run])
            if self.baseline is not None:
                row.update({f"{m} p-value": self.pvalues.get(run, {}).get(m) for m in self.measures})
            out.append(row)
        return out

    def note(self) -> str:
        """One line saying which queries were evaluated and how p-values were computed."""
        counts = sorted(set(self.queries.values()))
        text = f"queries: {'/'.join(map(str, counts))} -- {QUERY_SETS[self.query_set]}."
        lacking = {run: n for run, n in self.missing.items() if n} if self.query_set == "qrels" else {}
        if lacking:
            text += (" " + "; ".join(f"{run} lacks {n}" for run, n in lacking.items())
                     + ": each scores 0 here (trec_eval without -c, --queries run, leaves them out).")
        tied = {run: n for run, n in self.tied.items() if n}
        if tied:
            text += (" Tied scores (" + "; ".join(f"{run}: {n} quer{'y' if n == 1 else 'ies'}" for run, n in tied.items()) + ") are ordered "
                     "as trec_eval orders them, docid descending; pt.Experiment's RR@k (ir-measures' msmarco "
                     "provider) orders them otherwise, so its number can differ.")
        if self.depth is not None:
            text += f" -M {self.depth}: each ranking's first {self.depth} documents."
        if self.judged_only:
            text += " -J: judged documents only."
        if self.seed_mean:
            text += " A .seed{...} row: each query's score is the mean over those seeds' runs."
        if self.baseline is not None:
            compared = len(self.runs) - 1
            text += f" p-values: {self.significance_test()} vs {self.baseline}"
            if self.correction:
                text += f", {self.correction.capitalize()}-corrected over {compared} run{'s' * (compared != 1)}"
            text += "."
        return text

    def significance_test(self) -> str:
        """The test behind the p-values, in words."""
        return TESTS[self.test] + (OVER_SEED_MEANS if self.seed_mean else "")

    def to_json_lines(self, per_query: bool = False) -> str:
        """One JSON object per run: {"run", "measures", "queries"} (+ "baseline", "p_values", "per_query")."""
        lines = []
        for run in self.runs:
            obj = {"run": run, "measures": nan_as_none(self.scores[run]), "queries": self.queries[run]}
            if self.baseline is not None:
                obj["baseline"] = self.baseline
                obj["correction"] = self.correction
                obj["p_values"] = nan_as_none(self.pvalues[run]) if run in self.pvalues else None
            if per_query:
                obj["per_query"] = {m: nan_as_none(v) for m, v in self.per_query[run].items()}
            lines.append(json.dumps(obj, allow_nan=False))
        return "\n".join(lines) + "\n"

    def to_csv(self, per_query: bool = False, summary: bool = True) -> str:
        import csv
        import io

        rows = self.rows(per_query, summary)
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None or (isinstance(v, float) and math.isnan(v)) else v
                             for k, v in row.items()})
        return buffer.getvalue()

    def _cells(self, per_query: bool, summary: bool = True) -> tuple[list[str], list[list[str]]]:
        rows = self.rows(per_query, summary)
        header = list(rows[0])
        return header, [[_cell(key, row[key]) for key in header] for row in rows]

    def to_dataframe(self, per_query: bool = False):
        """One row per run: run, queries, the measures, and with a baseline each measure's `+` and `-` (queries
        better and worse than the baseline, as pt.Experiment counts them) and p-value. `per_query`: pt.Experiment's
        long frame instead, name, qid, measure, value, one row per run, query and measure."""
        import pandas

        if per_query:
            return pandas.DataFrame([(run, qid, m, value) for run in self.runs for m in self.measures
                                     for qid, value in self.per_query[run][m].items()],
                                    columns=["name", "qid", "measure", "value"])
        rows = self.rows()
        if self.baseline is not None:
            for row in rows:
                for m in self.measures:
                    counts = wins_losses(self.per_query[row["run"]][m], self.per_query[self.baseline][m]) \
                        if row["run"] != self.baseline else (None, None)
                    row[f"{m} +"], row[f"{m} -"] = counts
                    row[f"{m} p-value"] = row.pop(f"{m} p-value")
        return pandas.DataFrame(rows)

    def to_markdown(self, per_query: bool = False, summary: bool = True) -> str:
        header, body = self._cells(per_query, summary)
        align = ["---" if h in ("run", "qid") else "---:" for h in header]
        lines = ["| " + " | ".join(cells) + " |" for cells in [header, align, *body]]
        return "\n".join(lines) + f"\n\n{self.note()}\n"

    def to_table(self, per_query: bool = False, summary: bool = True) -> str:
        header, body = self._cells(per_query, summary)
        widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
        lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
                 for cells in [header, *body]]
        return "\n".join(lines) + f"\n{self.note()}\n"

    def format(self, fmt: str = "table", per_query: bool = False, summary: bool = True) -> str:
        """The comparison in `fmt`; without `summary` (trec_eval -n), the per-query rows alone (not in json)."""
        if fmt not in FORMATS:
            raise UnknownNameError("output format", fmt, list(FORMATS))
        if not summary and (fmt == "json" or not per_query):
            raise EvalError("no summary (-n) keeps the per-query rows (-q) of a table, csv or markdown: add -q, "
                            "or leave out -n" + (" (json lines carry both)" if fmt == "json" else ""))
        if fmt == "json":
            return self.to_json_lines(per_query)
        render = {"table": self.to_table, "csv": self.to_csv, "markdown": self.to_markdown}
        return render[fmt](per_query, summary)

    def __str__(self) -> str:
        return self.to_table()


def nan_as_none(values: Mapping[str, float]) -> dict[str, float | None]:  # JSON's None for NaN (identical scores)
    return {k: None if v is None or math.isnan(v) else v for k, v in values.items()}


def _cell(key: str, value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float) and key.endswith("p-value"):
        return BELOW_RANGE if value == 0 else f"{value:.4f}" if value >= 1e-4 else f"{value:.1e}"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def compare(runs: Mapping[str, RunLike], qrels: QrelsLike, measures, baseline: str | None = None,
            correction: str | None = None, rel_level: int = 1, queries: str = "qrels",
            seed_mean: bool = False, depth: int | None = None, judged_only: bool = False,
            test: str = "t") -> Comparison:
    """Evaluate several runs on the same qrels; with a baseline, paired tests on per-query scores (`test`: "t", the
    paired t-test, or "wilcoxon", the signed-rank test).

    `baseline` names one of `runs` (it becomes the first row). `correction` ('holm' or 'bonferroni') adjusts,
    per measure, the p-values of the runs compared with the baseline. `seed_mean`: the seeds of a system are one
    row, scored per query by their mean (the module's docstring); `baseline` is then any one of its seeds' runs.
    `depth` and `judged_only` are trec_eval's -M and -J (pipeline/evaluation.py, `trec_cut`).
    """

    measures = parse_measures(measures, rel_level)
    names = [str(m) for m in measures]
    if not runs:
        raise EvalError("no run to evaluate")
    if baseline is not None and baseline not in runs:
        raise UnknownNameError("baseline run", str(baseline), list(runs))
    if correction is not None and baseline is None:
        raise EvalError("a correction for multiple comparisons needs a baseline")
    if correction is not None and correction not in CORRECTIONS:
        raise UnknownNameError("correction", str(correction), list(CORRECTIONS))
    if test not in TESTS:
        raise UnknownNameError("significance test", str(test), list(TESTS))
    qrels = as_qrels(qrels)
    order = ([baseline] if baseline is not None else []) + [name for name in runs if name != baseline]
    shared = evaluator(measures, qrels) if queries == "qrels" else None
    result = Comparison(names, {}, {}, {}, baseline, correction, {}, queries, depth=depth, judged_only=judged_only,
                        test=test)
    for name in log.progress(order, desc="evaluating", unit="run") if len(order) > 1 else order:
        run, run_qrels, qids, tied = evaluation_inputs(runs[name], qrels, queries, depth, judged_only)
        result.tied[name] = len(tied)
        missing = result.missing[name] = sum(1 for qid in qrels if qid not in run)
        if missing and queries == "qrels":
            log.logger.warning("%s has no hits for %d of %d judged queries; they score 0 "
                               "(--queries run / queries='run' evaluates only the queries a run answers)",
                               name, missing, len(qrels))
        aggregate, metrics = (shared or evaluator(measures, run_qrels)).calc(run)
        table: dict[str, dict[str, float]] = {m: {} for m in names}
        for metric in metrics:
            table[str(metric.measure)][metric.query_id] = float(metric.value)
        result.scores[name] = {str(m): float(aggregate[m]) for m in measures}
        result.per_query[name] = table
        result.queries[name] = len(qids)
    return fold_seeds(result) if seed_mean else _tested(result)


def fold_seeds(comparison: Comparison) -> Comparison:
    """`comparison` with each system's seeds one row, scored per query by their mean, and its p-values so."""
    return _tested(_seed_means(comparison))


def _tested(result: Comparison) -> Comparison:
    """`result` with the paired test of every row against its baseline, corrected as it says (none without one)."""
    if result.baseline is None:
        return result
    base = result.per_query[result.baseline]
    compared = [name for name in result.runs if name != result.baseline]
    raw = {name: {m: paired_pvalue(result.per_query[name][m], base[m], result.test) for m in result.measures}
           for name in compared}
    for m in result.measures:
        adjusted = adjust_pvalues({name: raw[name][m] for name in raw}, result.correction)
        for name in raw:
            result.pvalues.setdefault(name, {})[m] = adjusted[name]
    return result


def seed_groups(names) -> dict[str, list[str]]:
    """System label -> its runs' names by seed, systems in the order first given: runs/x.seed0.trec and
    runs/x.seed1.trec are runs/x.seed{0,1}.trec; a name without `.seedN` is a system of its own."""
    members: dict[str, list[tuple[int, str]]] = {}  # name with .seed* -> (seed, name) of each run
    for name in names:
        match = SEED.search(name)
        members.setdefault(SEED.sub(".seed*", name, count=1), []).append((int(match[1]) if match else -1, name))
    groups = {}
    for key, seeded in members.items():
        seeded.sort()
        seeds = ",".join(str(seed) for seed, _ in seeded)
        label = seeded[0][1] if len(seeded) == 1 else key.replace(".seed*", f".seed{{{seeds}}}", 1)
        groups[label] = [name for _, name in seeded]
    return groups


def mean_over_seeds(tables: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Key (a query; a benchmark's test pair) -> its mean over the tables of one system's seeds, in the first
    table's order: what `seed_mean` pairs query by query (each table must have the first one's keys)."""
    return {key: statistics.fmean(table[key] for table in tables) for key in tables[0]}


def _seed_means(result: Comparison) -> Comparison:
    """`result` with each system's seeds folded into one row: per-query scores averaged over the seeds."""
    groups = seed_groups(result.runs)
    folded = Comparison(result.measures, {}, {}, {}, None, result.correction, {}, result.query_set, seed_mean=True,
                        depth=result.depth, judged_only=result.judged_only, test=result.test)
    for label, members in groups.items():
        tables = [result.per_query[run] for run in members]
        for run, table in zip(members[1:], tables[1:]):
            if any(table[m].keys() != tables[0][m].keys() for m in result.measures):
                raise EvalError(f"{run} scores other queries than {members[0]}: the seeds of a system must "
                                "answer the same queries to be averaged (or evaluate --queries qrels)")
        folded.per_query[label] = {m: mean_over_seeds([t[m] for t in tables]) for m in result.measures}
        folded.scores[label] = {m: statistics.fmean(result.scores[run][m] for run in members)
                                for m in result.measures}
        folded.queries[label] = result.queries[members[0]]
        if result.baseline in members:
            folded.baseline = label
    return folded


# -- plot -----------------------------------------------------------------------------------------------------


def plot_format(path: str | Path) -> str:
    """The image format a plot path's suffix names (PNG without a suffix), checked against matplotlib's."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    supported = FigureCanvasAgg.get_supported_filetypes()
    if fmt not in supported:
        raise EvalError(f"cannot write a plot as {fmt!r}; use one of {', '.join(sorted(supported))}")
    return fmt


def plot_differences(comparison: Comparison, path: str | Path, measure: str | None = None) -> Path:
    """Per-query differences of each run vs the baseline on one measure, as sorted bars (wins up, losses down).

    One panel per compared run; written atomically, in the format the file suffix names (default PNG).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if comparison.baseline is None:
        raise EvalError("a per-query difference plot needs a baseline run")
    measure = measure or comparison.measures[0]
    others = [r for r in comparison.runs if r != comparison.baseline]
    if not others:
        raise EvalError("a per-query difference plot needs at least one run besides the baseline")
    path = Path(path)
    fmt = plot_format(path)
    fig = Figure(figsize=(8, 2.6 * len(others)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(others), 1, sharey=True, squeeze=False)[:, 0]
    for ax, run in zip(axes, others):
        deltas = sorted(comparison.differences(run, measure).values(), reverse=True)
        wins, losses = sum(d > 0 for d in deltas), sum(d < 0 for d in deltas)
        colors = ["tab:green" if d > 0 else "tab:red" if d < 0 else "tab:gray" for d in deltas]
        ax.bar(range(len(deltas)), deltas, width=0.85 if len(deltas) <= 200 else 1.0, color=colors)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xlim(-0.5, len(deltas) - 0.5)
        ax.set_xticks([])
        ax.set_ylabel(f"Δ {measure}")
        ax.set_title(f"{Path(run).name} vs {Path(comparison.baseline).name}: "
                     f"{wins} better, {losses} worse, {len(deltas) - wins - losses} tied", fontsize=10)
    axes[-1].set_xlabel(f"queries, sorted by difference ({len(deltas)})")
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format=fmt, dpi=120)
    return path

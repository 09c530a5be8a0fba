"""Paired tests of one system's per-query scores against a baseline's, their correction for multiple comparisons,
and the wins and losses behind them (pipeline/compare.py tabulates them; pt.Experiment offers the same tests).

    paired_pvalue(values, baseline, test="t" | "wilcoxon")   two-sided p over the queries both have
    adjust_pvalues({run: p}, "holm" | "bonferroni")          statsmodels' multipletests, NaN kept out
    wins_losses(values, baseline)                            (queries better, queries worse)
"""
from __future__ import annotations

import math
import statistics
import warnings
from typing import Mapping

from pipeline.errors import UnknownNameError

CORRECTIONS = ("holm", "bonferroni")
TESTS = {"t": "two-sided paired t-test", "wilcoxon": "two-sided Wilcoxon signed-rank test"}
OVER_SEED_MEANS = " over per-query seed means"  # the test of a row that folds a system's seeds (compare.fold_seeds)
PAIRED = TESTS["t"]
PAIRED_SEED_MEANS = PAIRED + OVER_SEED_MEANS
BELOW_RANGE = "< 1e-300"  # how a p-value scipy underflows to 0.0 (below a double's range) is printed: never a p of 0


def _pairs(values: Mapping[str, float], baseline: Mapping[str, float]) -> tuple[list[float], list[float]]:
    common = [qid for qid in baseline if qid in values]
    return [values[q] for q in common], [baseline[q] for q in common]


def paired_pvalue(values: Mapping[str, float], baseline: Mapping[str, float], test: str = "t") -> float:
    """Two-sided p-value of `test` (TESTS: scipy.stats.ttest_rel or scipy.stats.wilcoxon) over the queries both
    have; NaN if undefined (fewer than 2 queries, or no difference at all)."""
    from scipy import stats

    if test not in TESTS:
        raise UnknownNameError("significance test", str(test), list(TESTS))
    mine, base = _pairs(values, baseline)
    if len(mine) < 2 or (test == "wilcoxon" and mine == base):
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # identical lists: zero variance -> NaN
        tested = stats.ttest_rel(mine, base) if test == "t" else stats.wilcoxon(mine, base)
    return float(tested.pvalue)


def paired_ttest(values: Mapping[str, float], baseline: Mapping[str, float]) -> float:
    """Two-sided paired t-test p-value (scipy.stats.ttest_rel) over the queries both have; NaN if undefined."""
    return paired_pvalue(values, baseline, "t")


def paired_difference(values: Mapping[str, float], baseline: Mapping[str, float]) -> dict[str, float | list[float]]:
    """Mean paired difference (values - baseline) over the keys both have, with its two-sided 95% t confidence
    interval (the interval of the same test `paired_ttest` makes)."""
    from scipy import stats

    diffs = [values[k] - baseline[k] for k in baseline if k in values]
    if len(diffs) < 2:
        return {"difference": math.nan, "ci95": [math.nan, math.nan]}
    mean, sem = statistics.fmean(diffs), statistics.stdev(diffs) / math.sqrt(len(diffs))
    half = float(stats.t.ppf(0.975, len(diffs) - 1)) * sem
    return {"difference": mean, "ci95": [mean - half, mean + half]}


def wins_losses(values: Mapping[str, float], baseline: Mapping[str, float]) -> tuple[int, int]:
    """(queries that score higher than the baseline, queries that score lower), over the queries both have."""
    mine, base = _pairs(values, baseline)
    return sum(m > b for m, b in zip(mine, base)), sum(m < b for m, b in zip(mine, base))


def adjust_pvalues(pvalues: Mapping[str, float], method: str | None) -> dict[str, float]:
    """Family-wise correction over the compared runs of one measure (statsmodels' multipletests); NaN p-values stay
    NaN and are not counted.

    bonferroni: min(1, m p).  holm: sort p ascending, p'_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)).
    """
    from statsmodels.stats.multitest import multipletests

    if method is None:
        return dict(pvalues)
    if method not in CORRECTIONS:
        raise UnknownNameError("correction", str(method), list(CORRECTIONS))
    tested = [name for name, p in pvalues.items() if not math.isnan(p)]
    adjusted = {name: math.nan for name in pvalues}
    if tested:
        corrected = multipletests([pvalues[name] for name in tested], method=method)[1]
        adjusted.update({name: float(p) for name, p in zip(tested, corrected)})
    return adjusted


def format_pvalue(p: float | None) -> str:
    """A p-value for a reader: 2 significant digits; scipy's 0.0 is BELOW_RANGE; None (no test) is empty."""
    if p is None:
        return ""
    return BELOW_RANGE if p == 0 else f"{p:.2g}"

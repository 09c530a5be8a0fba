"""Evaluation with ir-measures: aggregate scores, per-query scores, and run comparisons with significance.

Measures are ir-measures objects written the ir-measures way (`RR@10 AP P@10 nDCG@10 R@1000 AP(rel=2)`); no
metric is computed here, and every measure prints as `str(measure)`.

Relevance level: `rel_level=2` (the TREC DL convention for graded 0-3 qrels) gives every measure that takes a
`rel` threshold (AP, RR, P, R, Success, Rprec, Bpref, ...) `rel=2`, unless the measure names its own `rel`;
nDCG has no threshold and keeps the graded gains. Such a measure prints with it: `AP` becomes `AP(rel=2)`.

Which queries count (`queries=`):
  "qrels" (default): every query in the qrels (each has at least one judgement); a query the run lacks scores
          0 (the measure's default). This is `trec_eval -c`, ir-measures' own behaviour, and what Pyserini's
          and Anserini's regression numbers use; a run cannot gain by dropping hard queries.
  "run":  only the judged queries that the run has hits for (`trec_eval` without `-c`).
Queries in the run but not in the qrels are never evaluated. The number of evaluated queries is reported.

Ties in score are broken the trec_eval way for every measure: score descending, then docid descending (the
run's rank column is ignored). ir-measures alone is not consistent here: it hands RR@k to its msmarco provider,
which breaks ties docid ascending, and the other measures to pytrec_eval (trec_eval's order), so tied rankings
are made tie-free in trec_eval's order before they reach it. `RR@10` is then `trec_eval -M 10 -m recip_rank`.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Iterable, Mapping

from pipeline import log
from pipeline.data.files import atomic_write
from pipeline.data.qrels import Qrels, read_qrels
from pipeline.data.runs import Run, read_run
from pipeline.errors import IrpipeError, UnknownNameError

QUERY_SETS = {
    "qrels": "every judged query in the qrels; a query missing from a run scores 0 (trec_eval -c)",
    "run": "only the judged queries a run has hits for (trec_eval without -c)",
}
CORRECTIONS = ("holm", "bonferroni")
FORMATS = ("table", "json", "csv", "markdown")
DEFAULT_MEASURES = ("RR@10", "AP", "P@10", "nDCG@10", "R@1000")
EXPECTED_FORM = "an ir-measures measure such as RR@10, AP, P@10, nDCG@10, R@1000, AP(rel=2), Success@5"

RunLike = Run | Mapping[str, Mapping[str, float]] | str | Path
QrelsLike = Mapping[str, Mapping[str, int]] | str | Path


class EvalError(IrpipeError):
    """A measure, option or input that evaluation cannot work with."""


# ---------------------------------------------------------------------------------------------- measures


def _split_measures(text: str) -> list[str]:
    """Split 'RR@10, AP nDCG(gains={0:0,1:1})@10' on commas/whitespace outside brackets."""
    parts, depth, current = [], 0, []
    for char in text:
        depth += char in "([{"
        depth -= char in ")]}"
        if depth <= 0 and (char == "," or char.isspace()):
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in parts if p]


def parse_measure(text, rel_level: int = 1):
    """One ir-measures measure from its string (or a measure object), with the relevance level applied."""
    import ir_measures
    from ir_measures.measures.base import Measure

    measure = text
    if not isinstance(text, Measure):
        try:
            measure = ir_measures.parse_measure(str(text).strip())
        except NameError:
            name = str(text).strip().split("@")[0].split("(")[0]
            raise UnknownNameError("measure", name, sorted(ir_measures.measures.registry)) from None
        except (ValueError, SyntaxError) as error:
            raise EvalError(f"cannot parse measure {text!r} ({error}); expected {EXPECTED_FORM}") from None
    supported = type(measure).SUPPORTED_PARAMS
    for name, value in measure.params.items():
        if name not in supported:
            raise EvalError(f"measure {text!r}: {type(measure).__name__} takes no parameter {name!r} "
                            f"(it takes: {', '.join(supported) or 'none'}); expected {EXPECTED_FORM}")
        if not supported[name].validate(value):
            raise EvalError(f"measure {text!r}: invalid {name}={value!r}; expected {EXPECTED_FORM}")
    if rel_level != 1 and "rel" in supported and "rel" not in measure.params:
        measure = measure(rel=rel_level)
    if not ir_measures.DefaultPipeline.supports(measure):
        raise EvalError(f"measure {measure}: no installed ir-measures provider computes it")
    return measure


def parse_measures(measures: str | Iterable, rel_level: int = 1) -> list:
    """Measures from strings ('RR@10 AP', 'RR@10,AP'), measure objects or a mix; duplicates dropped, order kept."""
    _check_rel_level(rel_level)
    items = [measures] if isinstance(measures, str) else list(measures)
    parsed = []
    for item in items:
        for text in _split_measures(item) if isinstance(item, str) else [item]:
            measure = parse_measure(text, rel_level)
            if measure not in parsed:
                parsed.append(measure)
    if not parsed:
        raise EvalError(f"no measure given; expected {EXPECTED_FORM}")
    return parsed


def _check_rel_level(rel_level: int) -> None:
    if isinstance(rel_level, bool) or not isinstance(rel_level, int) or rel_level < 1:
        raise EvalError(f"relevance level must be an integer >= 1 (2 for TREC DL graded qrels), got {rel_level!r}")


# ----------------------------------------------------------------------------------------------- inputs


def _as_run(run: RunLike) -> dict[str, dict[str, float]]:
    """qid -> docid -> score, a fresh dict with ties broken as trec_eval does."""
    if isinstance(run, (str, Path)):
        run = read_run(run)
    if isinstance(run, Run):
        run = run.to_dict()
    else:
        run = {str(qid): {str(d): float(s) for d, s in docs.items()} for qid, docs in run.items()}
    return _break_ties(run)


def _break_ties(run: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Give each ranking with tied scores strictly decreasing scores in trec_eval's order (score desc, docid desc)."""
    for qid, docs in run.items():
        if len(set(docs.values())) < len(docs):
            order = sorted(docs.items(), key=itemgetter(1, 0), reverse=True)  # (score, docid) descending
            run[qid] = {doc: float(len(order) - i) for i, (doc, _) in enumerate(order)}
    return run


def _as_qrels(qrels: QrelsLike) -> Qrels:
    if isinstance(qrels, (str, Path)):
        return read_qrels(qrels)
    return {str(qid): {str(d): int(r) for d, r in judged.items()} for qid, judged in qrels.items()}


def evaluated_queries(run: RunLike, qrels: QrelsLike, queries: str = "qrels") -> list[str]:
    """The query ids a run is evaluated over under the `queries` convention (see the module docstring)."""
    if isinstance(run, (str, Path)):
        run = read_run(run)
    ranking = run.ranking if isinstance(run, Run) else run
    return _query_ids({str(qid): hits for qid, hits in ranking.items()}, _as_qrels(qrels), queries)


def _query_ids(run: dict, qrels: Qrels, queries: str) -> list[str]:
    if queries not in QUERY_SETS:
        raise UnknownNameError("query set", str(queries), list(QUERY_SETS))
    answered = [qid for qid in qrels if run.get(qid)]
    if not answered:
        run_ids, qrels_ids = sorted(run)[:3], sorted(qrels)[:3]
        raise EvalError(f"the run shares no query id with the qrels (run: {', '.join(run_ids) or 'empty'}...; "
                        f"qrels: {', '.join(qrels_ids) or 'empty'}...): wrong qrels file?")
    return list(qrels) if queries == "qrels" else answered


def _prepare(run: RunLike, qrels: QrelsLike, queries: str) -> tuple[dict, Qrels, list[str]]:
    run, qrels = _as_run(run), _as_qrels(qrels)
    qids = _query_ids(run, qrels, queries)
    if queries == "run":
        qrels = {qid: qrels[qid] for qid in qids}
    return run, qrels, qids


# ------------------------------------------------------------------------------------------- evaluation


def evaluate(run: RunLike, qrels: QrelsLike, measures, rel_level: int = 1, queries: str = "qrels") -> dict[str, float]:
    """Aggregate score per measure (ir_measures.calc_aggregate), keyed by `str(measure)`."""
    import ir_measures

    measures = parse_measures(measures, rel_level)
    run, qrels, _ = _prepare(run, qrels, queries)
    scores = ir_measures.calc_aggregate(measures, qrels, run)
    return {str(m): float(scores[m]) for m in measures}


def per_query(run: RunLike, qrels: QrelsLike, measures, rel_level: int = 1,
              queries: str = "qrels") -> dict[str, dict[str, float]]:
    """measure -> qid -> score (ir_measures.iter_calc), over the evaluated queries."""
    import ir_measures

    measures = parse_measures(measures, rel_level)
    run, qrels, _ = _prepare(run, qrels, queries)
    table: dict[str, dict[str, float]] = {str(m): {} for m in measures}
    for metric in ir_measures.iter_calc(measures, qrels, run):
        table[str(metric.measure)][metric.query_id] = float(metric.value)
    return table


def paired_ttest(values: Mapping[str, float], baseline: Mapping[str, float]) -> float:
    """Two-sided paired t-test p-value (scipy.stats.ttest_rel) over the queries both have; NaN if undefined."""
    from scipy import stats

    common = [qid for qid in baseline if qid in values]
    if len(common) < 2:
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # identical lists: zero variance -> NaN
        return float(stats.ttest_rel([values[q] for q in common], [baseline[q] for q in common]).pvalue)


def adjust_pvalues(pvalues: Mapping[str, float], method: str | None) -> dict[str, float]:
    """Family-wise correction over the compared runs of one measure; NaN p-values stay NaN and are not counted.

    bonferroni: min(1, m p).  holm: sort p ascending, p'_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)).
    """
    if method is None:
        return dict(pvalues)
    if method not in CORRECTIONS:
        raise UnknownNameError("correction", str(method), list(CORRECTIONS))
    ordered = sorted((p, name) for name, p in pvalues.items() if not math.isnan(p))
    m = len(ordered)
    adjusted = {name: math.nan for name in pvalues}
    running = 0.0
    for i, (p, name) in enumerate(ordered):  # i = j - 1
        if method == "bonferroni":
            adjusted[name] = min(1.0, m * p)
        else:
            running = max(running, min(1.0, (m - i) * p))
            adjusted[name] = running
    return adjusted


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

    def rows(self, per_query: bool = False) -> list[dict]:
        """One dict per run (and per query first, with qid 'all' on the aggregate row, when `per_query`)."""
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
        if self.baseline is not None:
            compared = len(self.runs) - 1
            text += f" p-values: two-sided paired t-test vs {self.baseline}"
            if self.correction:
                text += f", {self.correction.capitalize()}-corrected over {compared} run{'s' * (compared != 1)}"
            text += "."
        return text

    def to_json_lines(self, per_query: bool = False) -> str:
        """One JSON object per run: {"run", "measures", "queries"} (+ "baseline", "p_values", "per_query")."""
        lines = []
        for run in self.runs:
            obj = {"run": run, "measures": _clean(self.scores[run]), "queries": self.queries[run]}
            if self.baseline is not None:
                obj["baseline"] = self.baseline
                obj["correction"] = self.correction
                obj["p_values"] = _clean(self.pvalues[run]) if run in self.pvalues else None
            if per_query:
                obj["per_query"] = {m: _clean(v) for m, v in self.per_query[run].items()}
            lines.append(json.dumps(obj, allow_nan=False))
        return "\n".join(lines) + "\n"

    def to_csv(self, per_query: bool = False) -> str:
        import csv
        import io

        rows = self.rows(per_query)
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None or (isinstance(v, float) and math.isnan(v)) else v
                             for k, v in row.items()})
        return buffer.getvalue()

    def _cells(self, per_query: bool) -> tuple[list[str], list[list[str]]]:
        rows = self.rows(per_query)
        header = list(rows[0])
        return header, [[_cell(key, row[key]) for key in header] for row in rows]

    def to_markdown(self, per_query: bool = False) -> str:
        header, body = self._cells(per_query)
        align = ["---" if h in ("run", "qid") else "---:" for h in header]
        lines = ["| " + " | ".join(cells) + " |" for cells in [header, align, *body]]
        return "\n".join(lines) + f"\n\n{self.note()}\n"

    def to_table(self, per_query: bool = False) -> str:
        header, body = self._cells(per_query)
        widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
        lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
                 for cells in [header, *body]]
        return "\n".join(lines) + f"\n{self.note()}\n"

    def format(self, fmt: str = "table", per_query: bool = False) -> str:
        if fmt not in FORMATS:
            raise UnknownNameError("output format", fmt, list(FORMATS))
        render = {"table": self.to_table, "json": self.to_json_lines, "csv": self.to_csv, "markdown": self.to_markdown}
        return render[fmt](per_query)

    def __str__(self) -> str:
        return self.to_table()


def _clean(values: Mapping[str, float]) -> dict[str, float | None]:
    return {k: None if v is None or math.isnan(v) else v for k, v in values.items()}


def _cell(key: str, value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float) and key.endswith("p-value"):
        return f"{value:.4f}" if value >= 1e-4 else f"{value:.1e}"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def compare(runs: Mapping[str, RunLike], qrels: QrelsLike, measures, baseline: str | None = None,
            correction: str | None = None, rel_level: int = 1, queries: str = "qrels") -> Comparison:
    """Evaluate several runs on the same qrels; with a baseline, paired t-tests on per-query scores.

    `baseline` names one of `runs` (it becomes the first row). `correction` ('holm' or 'bonferroni') adjusts,
    per measure, the p-values of the runs compared with the baseline.
    """
    import ir_measures

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
    qrels = _as_qrels(qrels)
    order = ([baseline] if baseline is not None else []) + [name for name in runs if name != baseline]
    shared = ir_measures.evaluator(measures, qrels) if queries == "qrels" else None
    result = Comparison(names, {}, {}, {}, baseline, correction, {}, queries)
    for name in log.progress(order, desc="evaluating", unit="run") if len(order) > 1 else order:
        run, run_qrels, qids = _prepare(runs[name], qrels, queries)
        missing = len(qrels) - sum(1 for qid in qrels if run.get(qid))
        if missing and queries == "qrels":
            log.logger.warning("%s has no hits for %d of %d judged queries; they score 0 "
                               "(--queries run / queries='run' evaluates only the queries a run answers)",
                               name, missing, len(qrels))
        evaluator = shared or ir_measures.evaluator(measures, run_qrels)
        aggregate, metrics = evaluator.calc(run)
        table: dict[str, dict[str, float]] = {m: {} for m in names}
        for metric in metrics:
            table[str(metric.measure)][metric.query_id] = float(metric.value)
        result.scores[name] = {str(m): float(aggregate[m]) for m in measures}
        result.per_query[name] = table
        result.queries[name] = len(qids)
    if baseline is not None:
        base = result.per_query[baseline]
        raw = {name: {m: paired_ttest(result.per_query[name][m], base[m]) for m in names} for name in order[1:]}
        for m in names:
            adjusted = adjust_pvalues({name: raw[name][m] for name in raw}, correction)
            for name in raw:
                result.pvalues.setdefault(name, {})[m] = adjusted[name]
    return result


# ------------------------------------------------------------------------------------------------- plot


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


# -------------------------------------------------------------------------------------------------- CLI


def define_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run files (TREC or MS MARCO format)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--qrels", metavar="FILE", help="TREC qrels file (qid iter docid relevance)")
    source.add_argument("--dataset", metavar="NAME", help="registered dataset whose qrels to use")
    parser.add_argument("-m", "--measures", nargs="+", action="extend", metavar="MEASURE",
                        help=f"ir-measures measures, after the runs (default: {' '.join(DEFAULT_MEASURES)})")
    parser.add_argument("--baseline", metavar="RUN", help="run to test the others against (paired t-test)")
    parser.add_argument("--correction", choices=CORRECTIONS, help="multiple-comparison correction per measure")
    parser.add_argument("--rel-level", type=int, metavar="N",
                        help="minimum relevance for binary measures (default: the dataset's, else 1; 2 for TREC DL)")
    parser.add_argument("--queries", choices=list(QUERY_SETS), default="qrels",
                        help="'qrels': every judged query, missing ones score 0 (trec_eval -c, default); "
                             "'run': only judged queries the run answers (trec_eval without -c)")
    parser.add_argument("--per-query", action="store_true", help="also print each query's scores")
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    parser.add_argument("--plot", metavar="FILE.png", help="with --baseline: per-query difference bars")
    parser.add_argument("--plot-measure", metavar="MEASURE", help="measure to plot (default: the first)")


def _load_qrels(args) -> tuple[Qrels, int]:
    """Qrels and the default relevance level, from --qrels or --dataset."""
    if args.qrels:
        return read_qrels(args.qrels), 1
    from pipeline.data.registry import get_dataset  # lazy: the registry pulls in the dataset layer

    dataset = get_dataset(args.dataset)
    qrels = dataset.qrels()
    if isinstance(qrels, (str, Path)):
        qrels = read_qrels(qrels)
    return qrels, getattr(dataset, "rel_level", 1)


def main(args: argparse.Namespace) -> int:
    if args.correction and not args.baseline:
        raise EvalError("--correction needs --baseline")
    if args.plot and not args.baseline:
        raise EvalError("--plot draws differences against a baseline: add --baseline RUN")
    if args.plot_measure and not args.plot:
        raise EvalError("--plot-measure needs --plot FILE.png")
    if args.plot:
        plot_format(args.plot)  # fail before the work, not after it
    if len(set(args.runs)) != len(args.runs):
        raise EvalError("a run file is given twice")
    stray = [m for m in args.measures or [] if Path(m).is_file()]
    if stray:
        raise EvalError(f"{stray[0]} is a file, not a measure: give the run files before -m MEASURE ...")
    qrels, dataset_level = _load_qrels(args)
    rel_level = args.rel_level if args.rel_level is not None else dataset_level
    measures = parse_measures(args.measures or DEFAULT_MEASURES, rel_level)
    plot_measure = None
    if args.plot_measure:
        plot_measure = str(parse_measure(args.plot_measure, rel_level))
        if plot_measure not in [str(m) for m in measures]:
            raise EvalError(f"--plot-measure {plot_measure} is not among the measures: add it to -m")
    paths = list(args.runs)
    baseline = args.baseline
    if baseline is not None:
        same = [p for p in paths if p == baseline or _same_file(p, baseline)]
        if same:
            baseline = same[0]
        else:
            paths.insert(0, baseline)
    bar = log.progress(paths, desc="reading runs", unit="run") if len(paths) > 1 else paths
    runs = {path: read_run(path) for path in bar}
    result = compare(runs, qrels, measures, baseline=baseline, correction=args.correction,
                     rel_level=rel_level, queries=args.queries)
    sys.stdout.write(result.format(args.format, per_query=args.per_query))
    if args.plot:
        written = plot_differences(result, args.plot, plot_measure)
        log.logger.info("wrote %s", written)
    return 0


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).samefile(b)
    except OSError:
        return False

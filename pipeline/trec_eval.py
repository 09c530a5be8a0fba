"""trec_eval's measures, flags and output, computed with irpipe's measures (`irpipe trec_eval [flags] QRELS RUN`:
pipeline/commands/trec_eval.py), and the block of MS MARCO's official script (`msmarco_block`).

`trec_eval_report(run, qrels, ["map", "ndcg_cut.10", "P.5,10"], complete=True)` is the text `trec_eval -c -m map
-m ndcg_cut.10 -m P.5,10 QRELS RUN` prints: `%-22s\\t%s\\t%6.4f` lines (counts as integers, `runid` as the run's
tag), measures in trec_eval's own order whatever the order of -m, cutoffs ascending, per-query lines (-q) query by
query in qid order before the summary (`all`). Each value is an ir-measures measure of irpipe's evaluation
(pipeline/evaluation.py: `P_5` is `parse_measure("P_5")`, P@5), averaged the trec_eval way: summed in qid order and
divided by the number of queries; gm_map and gm_bpref are the geometric means of AP and Bpref (each at least
0.00001); num_ret, num_rel and num_rel_ret are summed.

Flags: -c (every query of the qrels, a missing one scoring 0; without it, the queries both files have), -l N
(relevance level), -M N (each ranking's first N documents), -J (judged documents only), -q (per query), -n (no
summary); `-m` takes trec_eval's names, `name.p1,p2` parameters and the nicknames `official` (the default),
`all_trec` and `set`. A measure irpipe does not compute (`utility`, `relative_P`, `11pt_avg`, ...) is refused
when named, and left out of a nickname with a warning (`UNCOMPUTED`).

Which trec_eval, where 9.0.8 and 10.0 differ:
  - `#` lines in runs and qrels are comments: 10.0 (the readers, pipeline/data/runs.py and qrels.py).
  - scores are C doubles: 10.0 (9.0.8 reads floats, and so ties 16.000001 with 16.000002; evaluation.py).
  - -c -q prints a query the run lacks (its scores 0, num_rel its count): 10.0 (9.0.8 prints only the summary).
  - iprec_at_recall's cutoff, X of num_rel relevant documents: 9.0.8 (`(long)(X * num_rel + 0.9)`, which
    pytrec_eval, ir-measures' IPrec and every trec_eval before 10.0 use; 10.0 rounds, and CACM's BM25 run scores
    iprec_at_recall_0.10 0.6555 there, 0.5852 here and in 9.0.8).
  - a run lacking a query of the qrels, without -c: 9.0.8, which evaluates the queries both files have (10.0
    exits 4 with "result qid '<qid>' not found in qrels").
And as both do: under -c the summary num_rel counts the judgements labelled above 0 in the whole qrels, whatever
-l (trec_eval's te_calc_avg_num_rel), while each query's num_rel counts those at -l or above.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from pipeline.data.qrels import Qrels
from pipeline.data.runs import FORMAT_COLUMNS, Run, read_run
from pipeline.data.files import numbered_lines
from pipeline.data.ids import split_fields
from pipeline.errors import UnknownNameError
from pipeline.evaluation import QrelsLike, RunLike, EvalError, as_qrels, evaluation_inputs, evaluator, parse_measure
from pipeline.log import logger

CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
MIN_GEO_MEAN = 0.00001  # trec_eval.h: a query's AP (or bpref) below it counts as it in gm_map (gm_bpref)
_INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class TrecMeasure:
    """One of trec_eval's measures as irpipe computes it: its parameters' kind and defaults, and how the queries'
    values make the summary ("mean", "sum", "geometric" of `source`'s values, the run's tag, the query count)."""

    params: str = ""  # "" none, "cutoffs" (positive integers), "levels" (recall levels 0..1), "beta" (set_F)
    defaults: tuple = ()
    summary: str = "mean"
    source: str = ""  # geometric: the measure whose per-query values are averaged


MEASURES = {
    "runid": TrecMeasure(summary="runid"), "num_q": TrecMeasure(summary="num_q"),
    "num_ret": TrecMeasure(summary="sum"), "num_rel": TrecMeasure(summary="sum"),
    "num_rel_ret": TrecMeasure(summary="sum"), "map": TrecMeasure(),
    "gm_map": TrecMeasure(summary="geometric", source="map"), "Rprec": TrecMeasure(), "bpref": TrecMeasure(),
    "recip_rank": TrecMeasure(), "iprec_at_recall": TrecMeasure("levels", tuple(i / 10 for i in range(11))),
    "P": TrecMeasure("cutoffs", CUTOFFS), "recall": TrecMeasure("cutoffs", CUTOFFS), "infAP": TrecMeasure(),
    "gm_bpref": TrecMeasure(summary="geometric", source="bpref"), "ndcg": TrecMeasure(),
    "ndcg_cut": TrecMeasure("cutoffs", CUTOFFS), "map_cut": TrecMeasure("cutoffs", CUTOFFS),
    "success": TrecMeasure("cutoffs", (1, 5, 10)), "set_P": TrecMeasure(), "set_relative_P": TrecMeasure(),
    "set_recall": TrecMeasure(), "set_map": TrecMeasure(), "set_F": TrecMeasure("beta"),
}
# every measure of trec_eval 10.0, in the order it prints them (measures.c, te_trec_measures)
ORDER = ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
         "iprec_at_recall", "P", "relstring", "recall", "infAP", "gm_bpref", "Rprec_mult", "utility", "11pt_avg",
         "binG", "G", "dcg", "ideal_dcg", "ndcg", "ndcg_rel", "Rndcg", "ndcg_cut", "map_cut", "relative_P", "success",
         "set_P", "set_relative_P", "set_recall", "set_map", "set_F", "num_nonrel_judged_ret", "prefs_num_prefs_poss",
         "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret", "prefs_simp", "prefs_pair", "prefs_avgjg",
         "prefs_avgjg_Rnonrel", "prefs_simp_ret", "prefs_pair_ret", "prefs_avgjg_ret", "prefs_avgjg_Rnonrel_ret",
         "prefs_simp_imp", "prefs_pair_imp", "prefs_avgjg_imp", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg", "yaap",
         "rbp", "rbp_resid", "unj")
UNCOMPUTED = tuple(name for name in ORDER if name not in MEASURES)  # no ir-measures provider computes them
_OFFICIAL = ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
             "iprec_at_recall", "P")
NICKNAMES = {  # measures.c (10.0; its all_trec adds unj, rbp, rbp_resid to 9.0.8's)
    "official": _OFFICIAL,
    "all_trec": _OFFICIAL + ("relstring", "recall", "unj", "rbp", "rbp_resid", "infAP", "gm_bpref", "utility",
                             "11pt_avg", "ndcg", "relative_P", "Rprec_mult", "success", "map_cut", "ndcg_cut",
                             "ndcg_rel", "Rndcg", "binG", "G", "set_P", "set_recall", "set_relative_P", "set_map",
                             "set_F", "num_nonrel_judged_ret"),
    "set": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P", "set_recall",
            "set_relative_P", "set_map", "set_F"),
}
PREFERENCE_NICKNAMES = ("all_prefs", "prefs", "qrels_jg")  # measures of other qrels formats (-R prefs, qrels_jg)


# ------------------------------------------------------------------------------------------------ -m


def requested(arguments) -> list[tuple[str, tuple]]:
    """trec_eval's -m arguments ('map', 'P.5,10', 'all_trec'; none: 'official') as [(measure, its parameters)], in
    trec_eval's print order. As in trec_eval, the first parameters given for a measure are its parameters, a
    nickname's measures take their defaults, and a measure named twice is computed once."""
    marked, params = set(), {}
    for argument in arguments or ["official"]:
        name, dot, text = str(argument).partition(".")
        if name in NICKNAMES:
            if dot:
                raise EvalError(f"-m {argument}: the nickname {name} takes no parameters")
            marked.update(NICKNAMES[name])
            continue
        if name not in MEASURES:
            _unknown(name)
        if dot:
            if name in params:
                logger.warning("-m %s: %s already has parameters (%s); trec_eval keeps the first", argument, name,
                               ",".join(map(str, params[name][0])))
            else:
                params[name] = (_parameters(name, text, argument), text)
        marked.add(name)
    left_out = [name for name in ORDER if name in marked and name not in MEASURES]
    if left_out:
        logger.warning("trec_eval's %s left out: irpipe does not compute them (no ir-measures provider does)",
                       ", ".join(left_out))
    return [(name, params.get(name, (MEASURES[name].defaults, ""))) for name in ORDER
            if name in marked and name in MEASURES]


def _unknown(name: str) -> None:
    if name in UNCOMPUTED:
        raise EvalError(f"trec_eval's measure {name!r} is not computed by irpipe (no ir-measures provider computes "
                        f"it); the trec_eval measures irpipe computes: {', '.join(MEASURES)}")
    if name in PREFERENCE_NICKNAMES:
        raise EvalError(f"trec_eval's {name} are measures of preference or judgement-group qrels (-R prefs, "
                        "qrels_jg), which irpipe does not read")
    raise UnknownNameError("trec_eval measure", name, [*MEASURES, *NICKNAMES])


def _parameters(name: str, text: str, argument: str) -> tuple:
    """The parameters of `-m name.text`, checked: cutoffs positive integers, recall levels from 0 to 1 (each sorted,
    none twice, as trec_eval sorts them and refuses a repeated one), set_F's one beta."""
    kind = MEASURES[name].params
    if not kind:
        raise EvalError(f"-m {argument}: {name} takes no parameters here")
    parts = text.split(",")
    try:
        values = [int(p) if kind == "cutoffs" else float(p) for p in parts]
    except ValueError:
        values = None
    if values is None or (kind == "cutoffs" and not all(p.isascii() and p.isdigit() for p in parts)):
        form = {"cutoffs": "positive integers", "levels": "recall levels from 0 to 1", "beta": "a number"}[kind]
        raise EvalError(f"-m {argument}: {name}'s parameters are {form} separated by commas (as in P.5,10)")
    if kind == "beta":
        if len(values) != 1 or not math.isfinite(values[0]) or values[0] <= 0:
            raise EvalError(f"-m {argument}: set_F takes one beta, a positive number (set_F.0.5)")
        return tuple(values)
    low, high = (1, _INT_MAX) if kind == "cutoffs" else (0.0, 1.0)
    if not all(low <= v <= high for v in values):
        raise EvalError(f"-m {argument}: {name}'s parameters must be from {low} to {high}")
    if len(set(values)) < len(values):
        raise EvalError(f"-m {argument}: a parameter is given twice (trec_eval: duplicate cutoffs detected)")
    return tuple(sorted(values))


def printed_names(name: str, params: tuple, text: str = "") -> list[str]:
    """The names trec_eval prints for a measure and its parameters: P_5, iprec_at_recall_0.10, set_F_0.5."""
    kind = MEASURES[name].params
    if kind == "cutoffs":
        return [f"{name}_{value}" for value in params]
    if kind == "levels":
        return [f"{name}_{value:3.2f}" for value in params]
    return [f"{name}_{text}" if text else name]


# ------------------------------------------------------------------------------------------- the report


def trec_eval_report(run: RunLike, qrels: QrelsLike, measures=None, *, complete: bool = False, rel_level: int = 1,
                     depth: int | None = None, judged_only: bool = False, per_query: bool = False,
                     summary: bool = True) -> str:
    """What `trec_eval [-q] [-n] [-c] [-l rel_level] [-M depth] [-J] -m MEASURE ... QRELS RUN` prints (the
    module's docstring); `measures` are -m's arguments (default: official)."""
    if isinstance(rel_level, bool) or not isinstance(rel_level, int) or not 1 <= rel_level <= _INT_MAX:
        raise EvalError(f"relevance level (trec_eval -l) must be an integer from 1 to {_INT_MAX}, got {rel_level!r}")
    wanted = requested([measures] if isinstance(measures, str) else measures)
    if isinstance(run, (str, Path)):
        run = read_run(run)
    tag = run.tag if isinstance(run, Run) else "irpipe"
    qrels = as_qrels(qrels)
    scores, evaluated_qrels, qids, _ = evaluation_inputs(run, qrels, "qrels" if complete else "run", depth, judged_only)
    qids = sorted(qids)  # trec_eval's order: strcmp of the qids (code points: UTF-8's byte order)
    rows = []  # (printed name, TrecMeasure, ir-measures measure or None)
    for name, (params, text) in wanted:
        spec = MEASURES[name]
        source = spec.source or name
        for printed in printed_names(name, params, text):
            measure = None if spec.summary in ("runid", "num_q") else parse_measure(
                source if spec.source else printed, rel_level)
            rows.append((printed, spec, measure))
    measures_used = list(dict.fromkeys(m for _, _, m in rows if m is not None))
    values = {}
    if measures_used:
        for metric in evaluator(measures_used, evaluated_qrels).calc(scores)[1]:
            values[metric.measure, metric.query_id] = float(metric.value)
    lines, totals = [], {printed: 0.0 for printed, _, _ in rows}
    for qid in qids:
        answered = bool(scores.get(qid))
        for printed, spec, measure in rows:
            if measure is None:
                continue
            value = values.get((measure, qid), 0.0) if answered else 0.0
            if printed == "num_rel" and not answered:  # counted from the qrels, whatever the run holds
                value = float(sum(1 for level in qrels[qid].values() if level >= rel_level))
            if spec.summary == "geometric":
                value = math.log(max(value, MIN_GEO_MEAN))
            totals[printed] += value
            if per_query and spec.summary != "geometric":
                lines.append(_line(printed, qid, value, spec.summary == "sum"))
    if summary:
        for printed, spec, _ in rows:
            lines.append(_summary_line(printed, spec, totals[printed], qids, tag, qrels, complete))
    return "".join(line + "\n" for line in lines)


def _summary_line(printed: str, spec: TrecMeasure, total: float, qids: list[str], tag: str, qrels: Qrels,
                  complete: bool) -> str:
    if spec.summary == "runid":
        return f"{'runid':<22}\tall\t{tag}"
    if spec.summary == "num_q":
        return _line(printed, "all", len(qids), True)
    if printed == "num_rel" and complete:  # trec_eval's te_calc_avg_num_rel: rel > 0 over the qrels, not -l
        total = sum(1 for judged in qrels.values() for level in judged.values() if level > 0)
    if spec.summary == "sum":
        return _line(printed, "all", total, True)
    mean = total / len(qids)
    return _line(printed, "all", math.exp(mean) if spec.summary == "geometric" else mean, False)


def _line(name: str, qid: str, value: float, count: bool) -> str:
    return f"{name:<22}\t{qid}\t{int(value)}" if count else f"{name:<22}\t{qid}\t{value:6.4f}"


# ------------------------------------------------------------------------------------------- MS MARCO


def is_msmarco_run(path: str | Path) -> bool:
    """Whether a run file is in MS MARCO's format (its first line that is not a comment has 3 columns)."""
    for _, line in numbered_lines(path):
        if line.strip() and not line.lstrip().startswith("#"):
            return len(split_fields(line)[0]) == FORMAT_COLUMNS["msmarco"][0]
    return False


def msmarco_block(run: RunLike, qrels: QrelsLike) -> str:
    """What MS MARCO's official `msmarco_passage_eval.py QRELS RUN` prints: MRR @10 (the first relevant passage's
    reciprocal rank in each ranking's top 10, summed over the run's queries that the qrels have, divided by the
    number of queries in the qrels) and QueriesRanked (the run's queries, judged or not), between lines of #. As
    the script reads qrels, every judged passage is relevant, whatever its label (MS MARCO's qrels list label 1
    only); a ranking is the run's order (an MS MARCO run's ranks; a TREC run's trec_eval order)."""
    if isinstance(run, (str, Path)):
        run = read_run(run)
    scores, _, _, _ = evaluation_inputs(run, qrels, "qrels")
    qrels = as_qrels(qrels)
    unlabelled = sum(1 for judged in qrels.values() for level in judged.values() if level <= 0)
    if unlabelled:
        logger.warning("msmarco_passage_eval.py counts every qrels line as a relevant passage, and %d of these are "
                       "labelled 0 or below: its MRR @10 is not RR@10", unlabelled)
    total = 0.0
    for qid, docs in scores.items():
        if qid in qrels:
            top = sorted(docs, key=docs.get, reverse=True)[:10]
            rank = next((i for i, doc in enumerate(top) if doc in qrels[qid]), None)
            if rank is not None:
                total += 1 / (rank + 1)
    return (f"#####################\nMRR @10: {total / len(qrels)}\nQueriesRanked: {len(scores)}\n"
            "#####################\n")

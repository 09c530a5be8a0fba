"""Evaluation with ir-measures: measures, aggregate scores and per-query scores (comparisons of runs with
significance tests and plots: pipeline/compare.py; the command `irpipe eval`: pipeline/commands/eval.py).

Measures are ir-measures objects written the ir-measures way (`RR@10 AP P@10 nDCG@10 R@1000 AP(rel=2)`); no
metric is computed here, and every measure prints as `str(measure)`. trec_eval's names are read too, through
ir-measures' own translation (`ir_measures.parse_trec_measure`): `map` is AP, `ndcg_cut_10` and `ndcg_cut.10`
nDCG@10, `P_10` and `P.10` P@10, `recip_rank` RR, `recall_100` R@100, `Rprec` Rprec, `P.5,10` P@5 and P@10, and
the nicknames `official` / `all_trec` their measures (less those no ir-measures provider computes). A name both
spell is ir-measures' measure where a provider computes it (`Rprec`), else trec_eval's (`P` alone: P at trec_eval's
nine cutoffs, P@5 ... P@1000, as `trec_eval -m P` prints them).

Relevance level: `rel_level=2` (the TREC DL convention for graded 0-3 qrels) gives every measure that takes a
`rel` threshold (AP, RR, P, R, Success, Rprec, Bpref, ...) `rel=2`, unless the measure names its own `rel`
(`AP(rel=1)`); nDCG has no threshold and keeps the graded gains. Such a measure prints with it: `AP` becomes
`AP(rel=2)`. The count measures keep trec_eval's meaning under `-l N`: num_ret (`NumRet`) counts every retrieved
document at any level, num_rel (`NumRel`) and num_rel_ret (`NumRelRet`, `NumRet(rel=1)`) the documents judged
>= N (`NumRel(rel=N)`, `NumRet(rel=N)`): a trec_eval name or an alias never names its own `rel`. No ir-measures
provider counts NumRel(rel=N>1); it is NumRel over the qrels judged >= N (`evaluator`).

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
Scores tie as trec_eval 10.0 reads them, as C doubles (Python's floats); pytrec_eval keeps them as C floats, as
trec_eval 9 did, and so ties two scores that only a double tells apart (16.000001 and 16.000002): such a ranking is
made tie-free in the doubles' order too, and every measure ranks as trec_eval 10.0 does.

trec_eval's -M N and -J (`depth=N`, `judged_only=True`): each ranking, in that order, is cut to its first N
documents, then loses the documents its query's qrels do not judge (no label, or a negative one), as trec_eval
applies the two (`trec_cut`). A query left with no document is still evaluated, its scores 0.
"""
from __future__ import annotations

import subprocess
from operator import itemgetter
from pathlib import Path
from typing import Iterable, Mapping

from pipeline.data.frames import is_frame, qrels_from_frame
from pipeline.data.ids import check_query_docs
from pipeline.data.qrels import Qrels, check_labels, read_qrels
from pipeline.data.runs import Run, read_run
from pipeline.errors import IrpipeError, UnknownNameError
from pipeline.log import logger

QUERY_SETS = {
    "qrels": "every judged query in the qrels; a query missing from a run scores 0 (trec_eval -c)",
    "run": "only the judged queries a run has hits for (trec_eval without -c)",
}
DEFAULT_MEASURES = ("RR@10", "AP", "P@10", "nDCG@10", "R@1000")
EXPECTED_FORM = ("an ir-measures measure such as RR@10, AP, P@10, nDCG@10, R@1000, AP(rel=2), Success@5, or trec_eval's "
                 "name (map, ndcg_cut_10, P.10, recip_rank)")

RunLike = Run | Mapping[str, Mapping[str, float]] | str | Path  # or a result frame (qid, docno, score)
QrelsLike = Mapping[str, Mapping[str, int]] | str | Path  # or a qrels frame (qid, docno, label)


class EvalError(IrpipeError):
    """A measure, option or input that evaluation cannot work with."""


# ---------------------------------------------------------------------------------------------- measures


def split_measures(text: str) -> list[str]:
    """Split 'RR@10, AP nDCG(gains={0:0,1:1})@10' on commas/whitespace outside brackets; a comma before a digit
    goes on a trec_eval list of cutoffs ('P.5,10')."""
    parts, depth, current = [], 0, []
    for position, char in enumerate(text):
        depth += char in "([{"
        depth -= char in ")]}"
        continues = char == "," and text[position + 1: position + 2].isdigit()
        if depth <= 0 and ((char == "," and not continues) or char.isspace()):
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in parts if p]


def _trec_measures(text: str) -> list:
    """The measures trec_eval's name `text` stands for (see the module docstring); [] when it is none of them."""
    import ir_measures
    import pytrec_eval

    nickname = text in pytrec_eval.supported_nicknames
    names = sorted(pytrec_eval.supported_nicknames[text]) if nickname else [text]
    found, skipped = [], []
    for name in names:
        try:
            measures = ir_measures.parse_trec_measure(name)
        except ValueError:  # not a trec_eval name, or one ir-measures does not compute
            measures = []
        computed = [m for m in measures if not nickname or _computed(m)]
        found += computed
        if not computed:
            skipped.append(name)
    if nickname and found and set(skipped) - {"runid"}:
        logger.warning("trec_eval's %s: %s left out (no ir-measures provider computes them)", text,
                       ", ".join(sorted(set(skipped) - {"runid"})))
    return found


def _computed(measure) -> bool:
    """Whether an installed ir-measures provider computes the measure (ir-measures asserts on some it cannot, such
    as P without a cutoff); NumRel(rel=N) is computed as NumRel (see `evaluator`)."""
    import ir_measures

    if _num_rel_level(measure) > 1:
        measure = measure(rel=1)
    try:
        return ir_measures.DefaultPipeline.supports(measure)
    except AssertionError:
        return False


def _measures_of(text: str) -> list:
    """The measures a string names: one ir-measures measure, else trec_eval's name for one or several."""
    import ir_measures
    import pytrec_eval

    text = str(text).strip()
    try:
        measure = ir_measures.parse_measure(text)
        return [measure] if _computed(measure) else _trec_measures(text) or [measure]
    except (NameError, ValueError, SyntaxError) as error:
        found = _trec_measures(text)
        if found:
            return found
        if isinstance(error, NameError):
            name = text.split("@")[0].split("(")[0]
            known = sorted({*ir_measures.measures.registry, *pytrec_eval.supported_measures} - {"runid"})
            raise UnknownNameError("measure", name, known) from None
        raise EvalError(f"cannot parse measure {text!r} ({error}); expected {EXPECTED_FORM}") from None


def _num_rel_level(measure) -> int:
    """N of NumRel(rel=N) (1 for NumRel); 0 for any other measure."""
    return int(measure.params.get("rel", 1)) if measure.NAME == "NumRel" else 0


def parse_measure(text, rel_level: int = 1):
    """One ir-measures measure from its string (ir-measures' or trec_eval's name) or a measure object, with the
    relevance level applied."""
    from ir_measures.measures.base import Measure

    if isinstance(text, Measure):
        return _checked(text, text, rel_level)
    found = _measures_of(text)
    if len(found) > 1:
        shown = ", ".join(map(str, found[:4])) + (", ..." if len(found) > 4 else "")
        raise EvalError(f"measure {text!r} names {len(found)} measures ({shown}); give one here, e.g. {found[0]}")
    return _checked(found[0], text, rel_level)


# checked before evaluation: trec_eval's C code aborts on a cutoff of 0 (P@0, nDCG@0), pytrec_eval fails on rel=0 and
# on a level past a C int, ir-measures on P@2**63
_INT_MAX = 2**31 - 1
_POSITIVE = {"cutoff": ("cutoff", "the number of top documents it looks at"),
             "rel": ("relevance level", "the lowest label that counts as relevant")}


def _checked(measure, text, rel_level: int):
    """The measure with its parameters checked and the relevance level applied; one a provider computes. The level
    goes to a measure that does not name its own `rel` in `text` (a trec_eval name or an alias like NumRelRet, whose
    translation carries rel=1, names none), except NumRet without `rel`: trec_eval's num_ret, every retrieved
    document at any level (NumRet(rel=N) is num_rel_ret)."""
    supported = type(measure).SUPPORTED_PARAMS
    for name, value in measure.params.items():
        if name not in supported:
            raise EvalError(f"measure {text!r}: {type(measure).__name__} takes no parameter {name!r} "
                            f"(it takes: {', '.join(supported) or 'none'}); expected {EXPECTED_FORM}")
        if not supported[name].validate(value):
            raise EvalError(f"measure {text!r}: invalid {name}={value!r}; expected {EXPECTED_FORM}")
        if name in _POSITIVE and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _INT_MAX):
            what, why = _POSITIVE[name]
            raise EvalError(f"measure {text!r}: {what} {value!r}; expected an integer from 1 to {_INT_MAX} ({why})")
    named = "rel=" in text.replace(" ", "") if isinstance(text, str) else "rel" in measure.params
    num_ret = measure.NAME == "NumRet" and "rel" not in measure.params
    if rel_level != 1 and "rel" in supported and not named and not num_ret:
        measure = measure(rel=rel_level)
    if not _computed(measure):
        raise EvalError(f"measure {measure}: no installed ir-measures provider computes it")
    return measure


def parse_measures(measures: str | Iterable, rel_level: int = 1) -> list:
    """Measures from strings ('RR@10 AP', 'RR@10,AP', 'map ndcg_cut.10 P.5,10'), measure objects or a mix;
    duplicates dropped, order kept."""
    _check_rel_level(rel_level)
    items = [measures] if isinstance(measures, str) else list(measures)
    parsed = []
    for item in items:
        for text in split_measures(item) if isinstance(item, str) else [item]:
            named = _measures_of(text) if isinstance(text, str) else [text]
            for measure in (_checked(one, text, rel_level) for one in named):
                if measure not in parsed:
                    parsed.append(measure)
    if not parsed:
        raise EvalError(f"no measure given; expected {EXPECTED_FORM}")
    return parsed


def _check_rel_level(rel_level: int) -> None:
    if isinstance(rel_level, bool) or not isinstance(rel_level, int) or not 1 <= rel_level <= _INT_MAX:
        raise EvalError(f"relevance level must be an integer >= 1 (2 for TREC DL graded qrels; at most {_INT_MAX}), "
                        f"got {rel_level!r}")


# ----------------------------------------------------------------------------------------------- inputs


def _as_run(run: RunLike) -> dict[str, dict[str, float]]:
    """qid -> docid -> score, a fresh dict with ties broken as trec_eval does."""
    run = as_run(run)
    if isinstance(run, Run):
        run = run.to_dict()
    else:
        run = {str(qid): {str(d): float(s) for d, s in docs.items()} for qid, docs in run.items()}
        check_query_docs(run, "run")  # the id rule, as a run file has it
    return _break_ties(run)


class TieFree(dict):
    """qid -> docid -> score without tied scores; `tied`: the queries whose ranking had ties before."""

    tied: tuple[str, ...] = ()


def _break_ties(run: dict[str, dict[str, float]]) -> TieFree:
    """Give each ranking with tied scores strictly decreasing scores in trec_eval's order (score desc, docid desc);
    scores one C float cannot tell apart count as tied (the module's docstring)."""
    run, tied = TieFree(run), []
    for qid, docs in run.items():
        if len(set(docs.values())) < len(docs) or _float_ties(docs.values()):
            order = sorted(docs.items(), key=itemgetter(1, 0), reverse=True)  # (score, docid) descending
            run[qid] = {doc: float(len(order) - i) for i, (doc, _) in enumerate(order)}
            tied.append(qid)
    run.tied = tuple(tied)
    return run


def _float_ties(scores) -> bool:
    """Whether two of the scores are one number as C floats (pytrec_eval's), distinct or not as doubles."""
    import numpy

    values = numpy.fromiter(scores, dtype=numpy.float64)
    return numpy.unique(values.astype(numpy.float32)).size < values.size


def trec_cut(run: dict[str, dict[str, float]], qrels: Qrels, depth: int | None = None,
             judged_only: bool = False) -> dict[str, dict[str, float]]:
    """trec_eval's -M `depth` and -J on a tie-free run: each ranking cut to its first `depth` documents (score
    descending), then, with `judged_only`, less those its query's qrels do not judge (no label or a negative one)."""
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= _INT_MAX):
        raise EvalError(f"depth (trec_eval -M) must be an integer from 1 to {_INT_MAX}, got {depth!r}")
    if depth is None and not judged_only:
        return run
    cut = {}
    for qid, docs in run.items():
        ranked = sorted(docs.items(), key=itemgetter(1), reverse=True)[:depth]
        judged = qrels.get(qid, {})
        cut[qid] = {doc: score for doc, score in ranked if not judged_only or judged.get(doc, -1) >= 0}
    return cut


def as_run(run: RunLike) -> Run | Mapping:
    """A run file or a result frame (PyTerrier's qid, docno, score, or ir_measures' query_id, doc_id, score) as a
    `Run`; a Run or a mapping as it is."""
    if isinstance(run, (str, Path)):
        return read_run(run)
    return Run.from_frame(run) if is_frame(run) else run


def as_qrels(qrels: QrelsLike) -> Qrels:
    """Qrels from a file path, a frame (PyTerrier's qid, docno, label, or ir_measures' query_id, doc_id, relevance)
    or a mapping, with string ids and integer labels."""
    if isinstance(qrels, (str, Path)):
        return read_qrels(qrels)
    if is_frame(qrels):
        return qrels_from_frame(qrels)
    qrels = {str(qid): {str(d): int(r) for d, r in judged.items()} for qid, judged in qrels.items()}
    check_query_docs(qrels, "qrels")  # the id rule, as a qrels file has it
    check_labels(qrels)  # and its label range
    return qrels


def evaluated_queries(run: RunLike, qrels: QrelsLike, queries: str = "qrels") -> list[str]:
    """The query ids a run is evaluated over under the `queries` convention (see the module docstring)."""
    run = as_run(run)
    ranking = run.ranking if isinstance(run, Run) else run
    return _query_ids({str(qid): hits for qid, hits in ranking.items()}, as_qrels(qrels), queries)


def _query_ids(run: dict, qrels: Qrels, queries: str) -> list[str]:
    if queries not in QUERY_SETS:
        raise UnknownNameError("query set", str(queries), list(QUERY_SETS))
    answered = [qid for qid in qrels if run.get(qid)]
    if not answered:
        run_ids, qrels_ids = sorted(run)[:3], sorted(qrels)[:3]
        raise EvalError(f"the run shares no query id with the qrels (run: {', '.join(run_ids) or 'empty'}...; "
                        f"qrels: {', '.join(qrels_ids) or 'empty'}...): wrong qrels file?")
    return list(qrels) if queries == "qrels" else answered


def evaluation_inputs(run: RunLike, qrels: QrelsLike, queries: str, depth: int | None = None,
                      judged_only: bool = False) -> tuple[dict, Qrels, list[str], tuple[str, ...]]:
    """(run as qid -> docid -> score with ties broken and trec_eval's -M / -J applied (`trec_cut`), the qrels to
    evaluate on, the evaluated query ids: those of the run as read, before -J empties a ranking, the queries whose
    ranking had tied scores)."""
    run, qrels = _as_run(run), as_qrels(qrels)
    qids = _query_ids(run, qrels, queries)
    if queries == "run":
        qrels = {qid: qrels[qid] for qid in qids}
    return trec_cut(run, qrels, depth, judged_only), qrels, qids, run.tied


# ------------------------------------------------------------------------------------------- evaluation


class Evaluator:
    """`ir_measures.evaluator(measures, qrels)`, and NumRel(rel=N>1) -- trec_eval's num_rel at -l N, which no
    ir-measures provider counts -- as NumRel over the qrels with each label made 1 where it is >= N, else 0."""

    def __init__(self, measures, qrels: Qrels):
        import ir_measures

        plain = [m for m in measures if _num_rel_level(m) <= 1]
        gdeval = [m for m in plain if m.NAME == "ERR"]  # ERR's one provider, gdeval, a perl script: numeric qids only
        other = next((qid for qid in qrels if not (qid.isascii() and qid.isdigit())), None) if gdeval else None
        if other is not None:
            raise EvalError(f"measure {gdeval[0]}: its one ir-measures provider (gdeval.pl) reads numeric query ids "
                            f"only, and the qrels have {other!r}")
        self.parts = [(ir_measures.evaluator(plain, qrels), {})] if plain else []
        for measure in (m for m in measures if _num_rel_level(m) > 1):
            level = _num_rel_level(measure)
            binary = {qid: {d: int(r >= level) for d, r in judged.items()} for qid, judged in qrels.items()}
            self.parts.append((ir_measures.evaluator([ir_measures.NumRel], binary), {ir_measures.NumRel: measure}))

    def calc(self, run) -> tuple[dict, list]:
        """(measure -> aggregate, the per-query metrics), as ir-measures' evaluator.calc gives them."""
        aggregate, metrics = {}, []
        for evaluator, renamed in self.parts:
            try:
                scores, found = evaluator.calc(run)
            except (subprocess.CalledProcessError, FileNotFoundError) as error:  # a provider's own program
                raise EvalError(f"an ir-measures provider's program failed ({error})") from None
            aggregate.update({renamed.get(m, m): value for m, value in scores.items()})
            metrics += [metric._replace(measure=renamed.get(metric.measure, metric.measure)) for metric in found]
        return aggregate, metrics


def evaluator(measures, qrels: Qrels) -> Evaluator:
    """The evaluator of parsed `measures` on `qrels` (compare.py scores every run with one)."""
    return Evaluator(measures, qrels)


def evaluate(run: RunLike, qrels: QrelsLike, measures, rel_level: int = 1, queries: str = "qrels",
             depth: int | None = None, judged_only: bool = False) -> dict[str, float]:
    """Aggregate score per measure (as ir_measures.calc_aggregate), keyed by `str(measure)`; `depth` and
    `judged_only` are trec_eval's -M and -J."""
    measures = parse_measures(measures, rel_level)
    run, qrels, _, _ = evaluation_inputs(run, qrels, queries, depth, judged_only)
    scores, _ = evaluator(measures, qrels).calc(run)
    return {str(m): float(scores[m]) for m in measures}


def per_query(run: RunLike, qrels: QrelsLike, measures, rel_level: int = 1, queries: str = "qrels",
              depth: int | None = None, judged_only: bool = False) -> dict[str, dict[str, float]]:
    """measure -> qid -> score (as ir_measures.iter_calc), over the evaluated queries."""
    measures = parse_measures(measures, rel_level)
    run, qrels, _, _ = evaluation_inputs(run, qrels, queries, depth, judged_only)
    table: dict[str, dict[str, float]] = {str(m): {} for m in measures}
    for metric in evaluator(measures, qrels).calc(run)[1]:
        table[str(metric.measure)][metric.query_id] = float(metric.value)
    return table

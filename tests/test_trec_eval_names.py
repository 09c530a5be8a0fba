"""trec_eval's measure names (`map`, `ndcg_cut_10`, `ndcg_cut.10`, `P_10`, `P.10`, `recip_rank`, `recall_100`,
`Rprec`, `P.5,10`) wherever a measure is named -- `irpipe eval -m`, `--eval`, experiment measures -- read through
ir-measures' own translation, scored as the ir-measures measure and printed by its ir-measures name."""
from __future__ import annotations

import re

import pytest

from pipeline import cli
from pipeline.errors import UnknownNameError
from pipeline.evaluation import EvalError, evaluate, parse_measure, parse_measures
from support import write_collection

QRELS = "q1 0 d1 1\nq1 0 d3 2\nq1 0 d5 0\nq2 0 d2 1\n"
RUN = "q1 Q0 d1 1 3 x\nq1 Q0 d2 2 2 x\nq1 Q0 d3 3 1 x\nq2 Q0 d7 1 2 x\nq2 Q0 d2 2 1 x\n"


@pytest.mark.parametrize("trec, canonical", [
    ("map", "AP"), ("ndcg_cut_10", "nDCG@10"), ("ndcg_cut.10", "nDCG@10"), ("P_10", "P@10"), ("P.10", "P@10"),
    ("recip_rank", "RR"), ("recall_100", "R@100"), ("recall.1000", "R@1000"), ("Rprec", "Rprec"),
    ("bpref", "Bpref"), ("ndcg", "nDCG"), ("map_cut_100", "AP@100"), ("success_1", "Success@1"),
])
def test_a_trec_eval_name_is_its_ir_measures_measure(trec, canonical):
    assert str(parse_measure(trec)) == canonical


def test_a_name_both_spell_is_the_one_a_provider_computes():
    assert [str(m) for m in parse_measures("Rprec")] == ["Rprec"]
    # ir-measures' P needs a cutoff: `P` alone is trec_eval's, its nine cutoffs
    assert [str(m) for m in parse_measures("P")] == [f"P@{k}" for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000)]
    with pytest.raises(EvalError, match="no installed ir-measures provider computes it"):
        parse_measures("R")  # no trec_eval name either: an error, not an assertion from ir-measures


def test_lists_levels_and_scores():
    assert [str(m) for m in parse_measures("P.5,10 ndcg_cut.5,10,map")] == ["P@5", "P@10", "nDCG@5", "nDCG@10", "AP"]
    assert [str(m) for m in parse_measures(["recip_rank", "map"], rel_level=2)] == ["RR(rel=2)", "AP(rel=2)"]
    qrels = {"q1": {"d1": 1, "d3": 2, "d5": 0}, "q2": {"d2": 1}}
    run = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d7": 2.0, "d2": 1.0}}
    ours = evaluate(run, qrels, "AP RR nDCG@10 P@10 R@100 Rprec")
    theirs = evaluate(run, qrels, "map recip_rank ndcg_cut_10 P.10 recall_100 Rprec")
    assert theirs == ours and ours["RR"] == (1 / 1 + 1 / 2) / 2
    assert "P@5" in [str(m) for m in parse_measures("official")]  # trec_eval's -m official


@pytest.mark.parametrize("text, error, fragment", [
    ("recip_rnak", UnknownNameError, "Did you mean: recip_rank"),
    ("P.5,10", EvalError, "names 2 measures (P@5, P@10); give one here"),
    ("ndcg_cut.x", EvalError, "or trec_eval's name (map, ndcg_cut_10, P.10, recip_rank)"),
])
def test_bad_trec_eval_names(text, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)):
        parse_measure(text)


def test_irpipe_eval_takes_trec_eval_names_and_prints_ir_measures_names(tmp_path, capsys):
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.trec").write_text(RUN)
    argv = ["eval", str(tmp_path / "run.trec"), "--qrels", str(tmp_path / "qrels.txt"), "-m"]
    assert cli.main([*argv, "map", "ndcg_cut_10", "P.5,10", "recip_rank", "recall_100", "Rprec"]) == 0
    trec = capsys.readouterr().out.splitlines()
    assert trec[0].split() == ["run", "queries", "AP", "nDCG@10", "P@5", "P@10", "RR", "R@100", "Rprec"]
    assert cli.main([*argv, "AP", "nDCG@10", "P@5", "P@10", "RR", "R@100", "Rprec"]) == 0
    assert capsys.readouterr().out.splitlines() == trec
    assert cli.main([*argv, "recip_rnak"]) == 2
    assert "Did you mean: recip_rank" in capsys.readouterr().err


@pytest.mark.slow
def test_run_eval_and_experiment_measures_take_trec_eval_names(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    data = write_collection(tmp_path / "data")
    assert cli.main(["-q", "run", "bm25() % 10", "--dataset", str(data), "--output", str(tmp_path / "a.trec"),
                     "--eval", "map,ndcg_cut.5,10,recip_rank", "--results-dir", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[-4:] == ["AP", "nDCG@5", "nDCG@10", "RR"]  # irpipe eval's table header
    (tmp_path / "x.yaml").write_text(f"name: x\ndataset: {data}\npipeline: bm25() % 10\nmeasures: [map, P_10]\n"
                                     "expected: {map: 0.5}\ntolerance: 1\n")
    assert cli.main(["-q", "run", str(tmp_path / "x.yaml"), "--output", str(tmp_path / "x.trec"),
                     "--results-dir", str(tmp_path / "results")]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[-2:] == ["AP", "P@10"]

"""`irpipe tune`: the grid expands as written, bad grids are refused, and the best row is the measured maximum."""
from __future__ import annotations

import json

import pytest

from pipeline.cli import main
from pipeline.errors import ConfigError
from pipeline.tune import expand, parse_grid
from support import needs_shared_data


def test_grid_expands_every_combination_in_order():
    grid = parse_grid(["k1=0.6, 0.9", "b=0.4,0.75"])
    assert grid == {"k1": ["0.6", "0.9"], "b": ["0.4", "0.75"]}
    specs = [spec for _, spec in expand("bm25(k1={k1}, b={b}) % 10", grid)]
    assert specs == ["bm25(k1=0.6, b=0.4) % 10", "bm25(k1=0.6, b=0.75) % 10",
                     "bm25(k1=0.9, b=0.4) % 10", "bm25(k1=0.9, b=0.75) % 10"]


@pytest.mark.parametrize("spec, grid, message", [
    ("bm25(k1={k1})", ["k1"], "NAME=V1,V2"),
    ("bm25(k1={k1})", ["k1="], "NAME=V1,V2"),
    ("bm25(k1={k1})", ["k1=1", "k1=2"], "given twice"),
    ("bm25(k1={k1}, b={b})", ["k1=1"], "no --grid for placeholder"),
    ("bm25(k1=0.9)", ["k1=1"], "not used by the spec"),
])
def test_bad_grid(spec, grid, message):
    with pytest.raises(ConfigError, match=message):
        expand(spec, parse_grid(grid))


def test_fusion_weight_of_runs_made_elsewhere():
    """tune_fusion_weight: the weight of the last run in the weighted fusion (z-scored per query), the first of the
    best in grid order, each weight's row as grid_search writes them; a harmful run gets no weight."""
    from pipeline.data.runs import Run
    from pipeline.rerank.fusion import fuse
    from pipeline.tune import best, format_rows, tune_fusion_weight

    # BM25 puts the relevant d1 second for q1 and first for q2; the model has q1 right and q2 wrong, by less
    bm25 = Run.from_scores({"q1": {"d0": 3.0, "d1": 2.0, "d2": 1.0}, "q2": {"e0": 3.0, "e1": 2.0, "e2": 1.0}})
    model = Run.from_scores({"q1": {"d0": 0.0, "d1": 1.0, "d2": 0.5}, "q2": {"e0": 0.4, "e1": 0.5, "e2": 0.0}})
    qrels = {"q1": {"d1": 1}, "q2": {"e0": 1}}
    weight, rows = tune_fusion_weight([bm25, model], qrels, [0, 0.25, 1, 2, 4], "Success@1", ["RR"])
    assert {row["values"]["w"]: row["measures"]["Success@1"] for row in rows} == \
        {"0": 0.5, "0.25": 0.5, "1": 1.0, "2": 1.0, "4": 0.5}   # q2 lost from w 2.65 on
    assert weight == 1 and best(rows) is rows[2] and set(rows[2]["measures"]) == {"Success@1", "RR"}
    assert rows[2]["spec"] == "fusion(run1, run2, method=weighted, weights=[1.0, 1], norm=zscore)"
    assert format_rows(rows).splitlines()[-1] == f"best Success@1 1.0000: {rows[2]['spec']}"
    assert fuse([bm25, model], "weighted", weights=[1, 0], norm="zscore").ranking["q1"][0][0] == "d0"  # BM25's order
    negated = Run.from_scores({q: {d: -s for d, s in hits} for q, hits in model.ranking.items()})
    assert tune_fusion_weight([bm25, negated], qrels, [0, 1], "Success@1")[0] == 0


@pytest.mark.slow
@needs_shared_data
def test_tune_bm25_on_cacm(tmp_path, capsys):
    output = tmp_path / "tune.json"
    assert main(["-q", "tune", "bm25(k1={k1}, b=0.4)", "--dataset", "cacm", "--grid", "k1=0.3,0.9",
                 "--measure", "AP", "--eval", "RR@10", "--output", str(output)]) == 0
    result = json.loads(output.read_text())
    rows = {row["values"]["k1"]: row["measures"] for row in result["rows"]}
    assert rows["0.9"]["AP"] == pytest.approx(0.3114, abs=1e-4)  # eval/cacm-bm25.yaml, same as Pyserini's CLI
    assert set(rows["0.3"]) == {"AP", "RR@10"}
    winner = max(rows, key=lambda k1: rows[k1]["AP"])
    assert result["best"]["values"]["k1"] == winner
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith(f"best AP {rows[winner]['AP']:.4f}: bm25(k1={winner}")


@needs_shared_data
def test_tuning_on_a_topics_subset_scores_only_those_queries(tmp_path, caplog):
    """`--dataset cacm --topics SUBSET`: the judged queries outside the subset are not scored (they would count 0
    in the mean: the AP of 10 queries would read as a quarter of itself)."""
    from pipeline.data.registry import get_dataset
    from pipeline.evaluation import evaluate
    from pipeline.experiment import run_pipeline

    cacm = get_dataset("cacm")
    judged = sorted(cacm.qrels())[:10]
    subset = tmp_path / "subset.tsv"
    subset.write_text("".join(f"{qid}\t{cacm.topics()[qid]}\n" for qid in judged))
    output = tmp_path / "tune.json"
    assert main(["tune", "bm25(k1={k1}, b=0.4)", "--dataset", "cacm", "--topics", str(subset), "--grid", "k1=0.9",
                 "--measure", "AP", "--output", str(output)]) == 0
    tuned = json.loads(output.read_text())["rows"][0]["measures"]["AP"]
    run, _, _ = run_pipeline("bm25(k1=0.9, b=0.4)", "cacm")
    alone = evaluate(run, {qid: cacm.qrels()[qid] for qid in judged}, ["AP"])["AP"]  # the qrels' queries only
    assert tuned == pytest.approx(alone, abs=1e-9)
    assert "10 of its 52 judged queries are evaluated" in caplog.text

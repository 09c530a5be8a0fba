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

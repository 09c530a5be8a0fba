"""The dev-small projection (bench/dev_small_projection.py): its arithmetic, and that the committed
record is what the committed measurements give."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import dev_small_projection as projection

RECORDS = Path(__file__).resolve().parent.parent / "eval" / "benchmarks"


def test_hours_are_search_time_plus_pairs_over_the_rerank_rate():
    rows = projection.project({1: 34.9, 2: 69.8}, {"mrnn": {1: 500.0, 2: 1000.0}, "hcan": {1: 400.0}})
    by_key = {(row["model"], row["cores"]): row for row in rows}
    assert set(by_key) == {("mrnn", 1), ("mrnn", 2), ("hcan", 1)}  # no 2-core hcan rate: no row
    mrnn = by_key[("mrnn", 1)]
    assert mrnn["bm25_hours"] == round(6980 / 34.9 / 3600, 3)
    assert mrnn["top100_hours"] == round((6980 / 34.9 + 698_000 / 500) / 3600, 1)
    assert mrnn["top1000_hours"] == round((6980 / 34.9 + 6_980_000 / 500) / 3600, 1)
    assert by_key[("mrnn", 2)]["top1000_hours"] < mrnn["top1000_hours"]


def test_the_committed_projection_is_made_from_the_committed_measurements():
    recorded = RECORDS / "dev-small-projection.json"
    if not recorded.is_file():
        pytest.skip("eval/benchmarks/dev-small-projection.json not recorded")
    made = json.loads(recorded.read_text())
    search = json.loads((RECORDS / f"{made['search']['name']}.json").read_text())
    rerank = json.loads((RECORDS / f"{made['rerank']['name']}.json").read_text())
    assert made["rows"] == projection.project(projection.search_rates(search), projection.rerank_rates(rerank))
    assert {row["model"] for row in made["rows"]} == {"addax", "biencoder", "hcan", "kwbert", "monobert", "mrnn"}


def test_a_missing_record_is_exit_2_naming_it():
    done = subprocess.run([sys.executable, "-m", "bench.dev_small_projection", "--rerank", "absent"],
                          capture_output=True, text=True, cwd=RECORDS.parent.parent)
    assert done.returncode == 2
    assert "eval/benchmarks/absent.json" in done.stderr and "Traceback" not in done.stderr

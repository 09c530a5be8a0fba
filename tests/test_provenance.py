"""Seeded results from before 2026-12-02, whose p-values were the first seed's run against the baseline: the seed
mean's p-value made again from the recorded per-query differences, the rest marked pending (pipeline/provenance.py,
bench/studies/seed_mean_pvalues.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from scipy import stats

from pipeline.significance import PAIRED_SEED_MEANS
from pipeline.provenance import PENDING, RECOMPUTE, seed_mean_pvalue, seed_mean_pvalues, stated_seed_means
from support import REPO

DIFFERENCES = [0.5, 0.25, 0.0, 0.0, -0.125]  # seed means minus the baseline, one a query, sorted
OLD = {"name": "x", "seeds": {"0": {"AP": 0.6}, "1": {"AP": 0.7}}, "measures": {"AP": 0.65, "RR": 0.7},
       "baseline": {"measures": {"AP": 0.525, "RR": 0.7}, "pvalues": {"AP": 0.9, "RR": 0.04}, "table": "seed rows"},
       "win_loss": {"measure": "AP", "queries": 5, "wins": 2, "losses": 1, "ties": 2, "differences": DIFFERENCES}}


def test_the_seed_mean_pvalue_is_the_paired_test_of_the_recorded_differences():
    # pairing each difference with 0 is the paired test of the seed means with the baseline: a one-sample t-test
    assert seed_mean_pvalue(OLD["win_loss"]) == pytest.approx(stats.ttest_1samp(DIFFERENCES, 0).pvalue, rel=1e-12)
    quantiles = {**OLD["win_loss"], "queries": 6247}  # 400 quantiles of 6,247 queries: not the queries' values
    assert seed_mean_pvalue(quantiles) is None and seed_mean_pvalue(None) is None
    assert seed_mean_pvalue({**OLD["win_loss"], "differences": [0.0] * 5}) is None  # no variance: undefined


def test_a_seeded_result_gets_the_seed_means_pvalue_and_seed_0s_others_pending():
    baseline = seed_mean_pvalues(OLD)
    assert baseline["pvalues"] == {"AP": pytest.approx(stats.ttest_1samp(DIFFERENCES, 0).pvalue), "RR": None}
    assert baseline["pending"] == {"RR": 0.04} and baseline["test"] == PAIRED_SEED_MEANS
    assert baseline["recomputed"].startswith("AP from win_loss") and RECOMPUTE in baseline["recomputed"]
    assert baseline["measures"] == OLD["baseline"]["measures"] and OLD["baseline"]["pvalues"]["AP"] == 0.9  # a copy
    assert seed_mean_pvalues({**OLD, "baseline": baseline}) == baseline  # made again: the same
    unrecorded = seed_mean_pvalues({**OLD, "win_loss": None})
    assert unrecorded["pvalues"] == {"AP": None, "RR": None} and unrecorded["pending"] == {"AP": 0.9, "RR": 0.04}
    assert "recomputed" not in unrecorded
    one_run = {key: value for key, value in OLD.items() if key != "seeds"}
    assert seed_mean_pvalues(one_run) == OLD["baseline"]  # one run's p-value is its own


STATES = ("Seed-mean paired t-tests (`irpipe eval --dataset d --seed-mean runs/x.seed{0,1}.trec --baseline B -m AP RR`):"
          " against BM25 (0.5 / 0.6) p = 0.12 / 3.5e-15, level at AP")


def test_a_description_states_the_seed_mean_pvalues_its_seed_mean_command_measured():
    assert stated_seed_means(STATES) == {"AP": 0.12, "RR": 3.5e-15}
    assert stated_seed_means("... --seed-mean R -m R@1 R@5`: p = 3.7e-06 / 9.5e-09).") == {"R@1": 3.7e-06, "R@5": 9.5e-09}
    assert stated_seed_means(STATES.replace(" / 3.5e-15", "")) == {}  # not one value a measure: none taken
    assert stated_seed_means("p = 0.01 by seed, no --seed-mean command") == {} and stated_seed_means("") == {}


def test_a_pending_measure_takes_the_seed_mean_pvalue_its_description_states():
    described = {**OLD, "description": STATES.replace("-m AP RR", "-m RR").replace(" / 3.5e-15", "")}
    baseline = seed_mean_pvalues(described)
    assert baseline["pvalues"]["RR"] == 0.12 and "pending" not in baseline  # AP from win_loss, RR from the command
    assert baseline["stated"] == ["RR"]
    assert seed_mean_pvalues({**described, "baseline": baseline}) == baseline  # made again: the same
    recorded = seed_mean_pvalues({**OLD, "win_loss": None, "description": STATES})
    assert recorded["pvalues"] == {"AP": 0.12, "RR": 3.5e-15} and "pending" not in recorded


def test_no_committed_seeded_result_shows_seed_0s_pvalue_as_the_seed_means():
    seeded = [json.loads(path.read_text()) for path in sorted((REPO / "eval" / "results").glob("*.json"))]
    seeded = [result for result in seeded if result.get("seeds") and "baseline" in result]
    assert seeded
    for result in seeded:
        baseline = result["baseline"]
        assert baseline.get("test") == PAIRED_SEED_MEANS, f"{result['name']}: run {RECOMPUTE}"
        for measure, p in baseline["pvalues"].items():
            assert (p is None) == (measure in baseline.get("pending", {})), (result["name"], measure, PENDING)
        if "recomputed" in baseline:
            measure = result["win_loss"]["measure"]
            assert baseline["pvalues"][measure] == seed_mean_pvalue(result["win_loss"])


def _script(results_dir):
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(REPO / "bench" / "studies" / "seed_mean_pvalues.py"), "--results-dir",
                           str(results_dir)], capture_output=True, text=True, env=environment, timeout=120)


def test_the_command_rewrites_old_results_once_and_names_a_broken_file(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps(OLD, indent=2) + "\n")
    unseeded = {key: value for key, value in OLD.items() if key != "seeds"}
    (tmp_path / "y.json").write_text(json.dumps(unseeded, indent=2) + "\n")
    done = _script(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"x AP: seed 0 0.9 -> seed mean {seed_mean_pvalue(OLD['win_loss']):.3g}\n" \
                          "x RR: seed 0 0.04 -> pending re-run\n"
    assert json.loads((tmp_path / "x.json").read_text())["baseline"] == seed_mean_pvalues(OLD)
    assert json.loads((tmp_path / "y.json").read_text()) == unseeded  # one run: its own p-values
    again = _script(tmp_path)
    assert (again.returncode, again.stdout) == (0, "")  # made again: nothing to change
    (tmp_path / "z.json").write_text('{"name": "z",\n "baseline": }\n')
    broken = _script(tmp_path)
    assert broken.returncode == 2 and "Traceback" not in broken.stderr
    assert broken.stderr.startswith("seed_mean_pvalues: error: ") and "z.json:2: not valid JSON" in broken.stderr


def test_the_commit_recorded_is_irpipes_own_not_that_of_a_git_tree_around_an_installed_package(tmp_path, monkeypatch):
    """A package installed into a venv inside another project's git checkout sits in that tree: its commit is not
    irpipe's and is not recorded (before: it was)."""
    import subprocess

    from pipeline import environment

    outer = tmp_path / "project"
    (outer / ".venv" / "site-packages").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    subprocess.run(["git", "-C", str(outer), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)
    monkeypatch.setattr(environment, "REPO", (outer / ".venv" / "site-packages").resolve())
    assert environment._git() == {"commit": None, "dirty": None}
    monkeypatch.setattr(environment, "REPO", outer.resolve())
    assert environment._git()["commit"] and environment._git()["dirty"] is False


def test_the_seed_mean_table_sets_each_seeded_pins_seed_0_p_value_beside_its_seed_means():
    """bench/studies/seed_mean_table.py: the p-values the results held before they were the seed mean's (from git),
    beside the ones they hold now (q23's AP: 0.082 for seed 0 alone)."""
    from bench.studies import seed_mean_table

    shown = subprocess.run(["git", "rev-parse", "--verify", "--quiet", seed_mean_table.BEFORE + "^{commit}"],
                           cwd=REPO, capture_output=True)
    if shown.returncode != 0:
        pytest.skip(f"this clone lacks commit {seed_mean_table.BEFORE} (shallow?): the table reads it from git")
    rows = {(row[0], row[1]): row for row in seed_mean_table.rows(REPO / "eval", seed_mean_table.BEFORE)}
    q23 = rows[("trecqa-mrnn-contextual-distance-q23", "AP")]
    assert q23[2] == "0.082" and float(q23[3]) > 0 and q23[5] == ("**crosses 0.05**" if float(q23[3]) < 0.05 else "")
    assert all(row[4] in ("per-query differences kept", "pending re-run", "re-run, every seed", "first run since",
                          seed_mean_table.STATED)
               or row[4].startswith("re-run against another baseline") for row in rows.values())

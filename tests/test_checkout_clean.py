"""A check leaves the checkout as it was: `irpipe run FILE --check` and `irpipe reproduce NAME` write their results
under runs/ (untracked), never over the recorded eval/results/ that the leaderboard, the page and the README's tables
are made from -- unless asked with --record (tests/test_experiment.py, tests/test_reproduce.py)."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from support import REPO, irpipe, needs_shared_data

needs_git_checkout = pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(),
                                        reason="needs git and a git checkout of irpipe (git status of eval/)")


def _tracked_eval_status() -> str:
    """`git status --porcelain` of eval/: the tracked experiment files and recorded results, changed or added."""
    return subprocess.run(["git", "status", "--porcelain", "--", "eval"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout


@needs_git_checkout
@needs_shared_data
@pytest.mark.parametrize("command", [["run", "eval/cacm-bm25.yaml", "--check"],
                                     ["reproduce", "cacm-bm25", "--warm"]], ids=["run-check", "reproduce"])
def test_a_check_of_a_pin_leaves_the_tracked_results_as_they_were(command, monkeypatch, capsys):
    monkeypatch.chdir(REPO)  # as a user runs it: from the repository root, with the default folders
    before = _tracked_eval_status()
    recorded = (REPO / "eval" / "results" / "cacm-bm25.json").read_text()
    code, out, err = irpipe(capsys, *command)
    assert code == 0, out + err
    assert _tracked_eval_status() == before
    assert (REPO / "eval" / "results" / "cacm-bm25.json").read_text() == recorded
    written = json.loads((REPO / "runs" / "results" / "cacm-bm25.json").read_text())
    assert {check["status"] for check in written["checks"].values()} == {"OK"}

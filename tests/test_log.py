"""The peak memory a run reports (pipeline.log.peak_rss_mib) is its own process's, whoever started it; the log goes
to sys.stderr as it is when a line is written."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from pipeline.log import configure, logger, peak_rss_mib

REPO = Path(__file__).resolve().parent.parent


def test_a_process_started_by_a_larger_one_reports_its_own_peak():
    held = bytearray(400 * 2**20)
    held[::4096] = b"x" * len(held[::4096])  # touched: resident in this process
    child = subprocess.run([sys.executable, "-c", "from pipeline.log import peak_rss_mib; print(peak_rss_mib())"],
                           cwd=REPO, capture_output=True, text=True, check=True)
    assert peak_rss_mib() >= 400
    assert int(child.stdout) < 200  # a Python with tqdm; getrusage's ru_maxrss would say this process's 400+


def test_the_log_follows_sys_stderr_when_it_is_swapped_after_the_handler_was_made(monkeypatch):
    import io

    configure()
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    logger.info("one")
    monkeypatch.setattr(sys, "stderr", second)
    logger.info("two")
    assert first.getvalue().endswith("INFO one\n") and "two" not in first.getvalue()
    assert second.getvalue().endswith("INFO two\n")


STAGE_SCRIPT = """
import pipeline as ir
from pipeline.data.runs import Run
from pipeline.data.topics import Topics

ir.cutoff(1)(Topics({"1": "a query", "2": "another"}), Run({"1": [("d1", 2.0), ("d2", 1.0)], "2": [("d3", 1.0)]}))
"""


def _python(script: str) -> subprocess.CompletedProcess:
    """`script` in a fresh Python whose stderr is a pipe, not a terminal (a script run by a scheduler, a notebook)."""
    return subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True)


def test_a_python_program_sees_each_stages_start_and_end_with_counts_and_rate():
    """Before, a Python program saw nothing (the `irpipe` logger had no handler: Python's last resort prints
    warnings only)."""
    err = _python(STAGE_SCRIPT).stderr
    assert "INFO cutoff(k=1): start: 2 queries, 3 input hits\n" in err
    assert re.search(r"INFO cutoff\(k=1\): 2 queries, 2 hits, computed in \d+\.\d\ds \(\d+\.\d queries/s\)\n", err)


def test_a_program_that_configures_logging_gets_each_line_once_through_its_own_handler():
    err = _python("import logging; logging.basicConfig(format='mine %(message)s')\n" + STAGE_SCRIPT).stderr
    assert err.count("cutoff(k=1): start:") == 1 and "mine cutoff(k=1): start:" in err


def test_a_progress_bar_shows_in_a_python_program_and_not_on_the_command_lines_piped_stderr():
    """tqdm's auto mode either way (a notebook's widget there); before, the bar was hidden wherever stderr was not a
    terminal, a notebook's included."""
    bar = "from pipeline import log\n{}\nfor _ in log.progress(range(3), desc='counting', unit='n'): pass\n"
    assert "counting:   0%|" in _python(bar.format("")).stderr  # drawn at its start (leave=False clears it after)
    assert "counting" not in _python(bar.format("log.configure()")).stderr  # the command line's rule
    assert "counting" not in _python(bar.format("log.quiet()")).stderr

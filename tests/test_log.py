"""The peak memory a run reports (pipeline.log.peak_rss_mib) is its own process's, whoever started it; the log goes
to sys.stderr as it is when a line is written."""
from __future__ import annotations

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

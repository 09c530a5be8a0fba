"""Shared fixtures: the dataset mirror (../shared/data), skipped with a reason where it is absent."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

# test_pyterrier.py imports PyTerrier at collection, so irpipe starts this process's JVM through pt.java.init()
# (pipeline/java.py), which would fetch Terrier's jars from Maven where there is a network. The suite does not
# download: a Terrier version that exists nowhere makes PyTerrier decline, and irpipe starts Java alone, as here.
os.environ.setdefault("TERRIER_VERSION", "0.0-absent")
os.environ.setdefault("TERRIER_HELPER_VERSION", "0.0-absent")

from support import REPO, SHARED_DATA, needs_shared_data  # noqa: F401  (re-exported for fixtures below)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"dataset mirror not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def cacm_index(shared_data, tmp_path_factory) -> Path:
    """CACM indexed from the mirror's JSONL through `irpipe index` (positions, docvectors, raw), once per session."""
    from pipeline.cli import main

    index = tmp_path_factory.mktemp("indexes") / "cacm"
    corpus = shared_data / "cacm" / "CACM" / "corpus" / "jsonl"
    assert main(["-q", "index", "--input", str(corpus), "--output", str(index), "--threads", "2"]) == 0
    return index


@pytest.fixture(scope="session")
def cacm_topics_file(shared_data) -> Path:
    return shared_data / "cacm" / "CACM" / "topics.cacm.txt"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A fresh IRPIPE_CACHE for one test."""
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def irpipe_eval(monkeypatch, capsys):
    """`irpipe eval ...` in-process through the real dispatcher (only the eval command registered) -> (code, out,
    err); tests/test_evaluate.py and tests/test_eval_edge_cases.py."""
    from pipeline import cli

    monkeypatch.setattr(cli, "COMMANDS", {"eval": cli.COMMANDS["eval"]})

    def run(*argv):
        code = cli.main(["-q", *map(str, argv)])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture(autouse=True)
def _cpu_amp_auto_is_fp32(monkeypatch):
    """amp="auto" runs bf16 on a CPU with native bf16 (pipeline/rerank/scoring.py); the suite's scores expect fp32
    on every CPU (tests/rerank/test_quantize.py tests the bf16 choice itself)."""
    monkeypatch.setattr("pipeline.rerank.scoring.native_bf16", lambda: False)

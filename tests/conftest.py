"""Shared fixtures: the dataset mirror (../shared/data), skipped with a reason where it is absent."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("IRPIPE_MIRROR") or REPO.parent / "shared" / "data")

if SHARED_DATA.is_dir():
    os.environ.setdefault("IRPIPE_MIRROR", str(SHARED_DATA))

needs_shared_data = pytest.mark.skipif(
    not SHARED_DATA.is_dir(),
    reason=f"dataset mirror not found at {SHARED_DATA} (set IRPIPE_MIRROR to a folder laid out like ../shared/data)",
)


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
    assert main(["-q", "index", "--input", str(corpus), "--index", str(index), "--threads", "2"]) == 0
    return index


@pytest.fixture(scope="session")
def cacm_topics_file(shared_data) -> Path:
    return shared_data / "cacm" / "CACM" / "topics.cacm.txt"

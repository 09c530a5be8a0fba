"""Constants and markers shared by test modules (import them from here, not from conftest: there are several)."""
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


def make_pairs(queries: list[str], docs: list[str]) -> list:
    """Pairs of parallel query and document texts (ids q0.., d0..), as a reranker stage hands them to a model."""
    from pipeline.rerank.pairs import Pair

    return [Pair(f"q{i}", f"d{i}", query, doc) for i, (query, doc) in enumerate(zip(queries, docs))]

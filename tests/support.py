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

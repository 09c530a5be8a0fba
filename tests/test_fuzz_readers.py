"""Property-based fuzzing of every reader, CI-sized (bench/fuzz_readers.py; the long run and its
record: `python -m bench.fuzz_readers --cases 100000 --record`, eval/benchmarks/fuzz-readers.json).

Per reader, a few dozen derandomized hypothesis cases (the same ones every run): valid inputs built from known data
and the same inputs mutated with control characters, separators, comment marks and odd numbers. Each must end in
one of the package's own errors with a printable message, or in a result whose ids follow the id rule; a valid one
must read as the data it was built from, and a run or qrels file irpipe accepts as ir-measures' reader reads it.
A finding fails the test with the case hypothesis shrank it to.
"""
from __future__ import annotations

import pytest

pytest.importorskip("hypothesis", reason="hypothesis is in the test extra: pip install -e .[test]")

from bench.fuzz_readers import fuzz, readers  # noqa: E402

CASES = 40  # per reader: the suite's share, a few seconds each


@pytest.mark.parametrize("name", list(readers()))
def test_a_reader_survives_fuzzing(name):
    result = fuzz(readers()[name], CASES, derandomize=True, stop=True)
    assert result["cases"] >= CASES // 2 and result["findings"] == []

"""The spec grammar builds the same Stage objects as Python, with Python's precedence, and points at errors."""
from __future__ import annotations

import pytest

from pipeline.stages.rerank import Overlap
from pipeline.stages.bm25 import BM25
from pipeline.spec import SpecError, parse
from pipeline.stage import Cutoff, Fusion


@pytest.mark.parametrize("spec, built", [
    ("bm25()", BM25()),
    ("bm25(k1=0.82, b=0.68, hits=100)", BM25(k1=0.82, b=0.68, hits=100)),
    ("bm25(index=/data/idx-1,k1=1.2)", BM25(index="/data/idx-1", k1=1.2)),
    ("bm25 % 10", BM25() % 10),
    ("bm25() % 100 >> overlap(idf=false)", BM25() % 100 >> Overlap(idf=False)),
    # % binds tighter than +, which binds tighter than >> (as in Python)
    ("bm25(k1=0.9) + bm25(k1=1.2) % 5 >> overlap()", (BM25(k1=0.9) + BM25(k1=1.2) % 5) >> Overlap()),
    ("(bm25() >> overlap()) % 3", (BM25() >> Overlap()) % 3),
    ("fusion(bm25(), bm25(b=0.7), method=weighted, weights=[0.3, 0.7])",
     Fusion(BM25(), BM25(b=0.7), method="weighted", weights=(0.3, 0.7))),
    ("bm25(index='a path/with space')", BM25(index="a path/with space")),
])
def test_spec_builds_python_objects(spec, built):
    assert parse(spec) == built


@pytest.mark.parametrize("stage", [
    BM25(k1=0.82, b=0.68) % 100 >> Overlap(idf=False),
    BM25() + BM25(k1=1.2),
    Fusion(BM25(), BM25(b=0.7), method="weighted", weights=(0.3, 0.7)),
    (BM25() >> Overlap()) % 3,
])
def test_repr_round_trips(stage):
    assert parse(repr(stage)) == stage


@pytest.mark.parametrize("spec, position, message", [
    ("bm25(k1=0.9,, b=0.4)", 12, "expected a value, found ','"),
    ("bm25() >> hcann()", 10, "unknown stage 'hcann'"),
    ("bm25(k2=1)", 0, "unexpected keyword argument 'k2'"),
    ("bm25() % x", 9, "positive integer"),
    ("bm25() % 0", 9, "positive integer"),
    ("bm25() bm25()", 7, "unexpected 'bm25'"),
    ("bm25(k1=0.9", 11, "expected ',' or ')' at the end"),
    ("", 0, "empty pipeline"),
    ("bm25(hits=-5)", 0, "bm25: hits=-5; expected an integer >= 1"),
    ("bm25(k1=1, k1=2)", 11, "given twice"),
    ("bm25() ; rm -rf /", 7, "unexpected character"),
])
def test_errors_point_at_the_token(spec, position, message):
    with pytest.raises(SpecError) as error:
        parse(spec)
    assert error.value.position == position
    assert message in str(error.value)
    assert str(error.value).splitlines()[-1] == " " * (position + 2) + "^"


def test_cutoff_is_a_stage_in_the_pipeline():
    assert parse("bm25() % 7")[1] == Cutoff(7)


def test_rrf_by_name_and_plus_as_a_score_sum(caplog):
    assert parse("rrf(bm25(), bm25(k1=1.2))") == Fusion(BM25(), BM25(k1=1.2))
    assert parse("rrf(bm25(), bm25(k1=1.2), k=10)") == Fusion(BM25(), BM25(k1=1.2), k=10)
    assert parse("bm25() + bm25(k1=1.2)") == Fusion(BM25(), BM25(k1=1.2), method="weighted", depth=None)
    assert parse("bm25() + bm25(k1=1.2)") == parse("fusion(bm25(), bm25(k1=1.2), method=weighted, depth=none)")


def test_a_spec_using_plus_says_once_that_it_changed_meaning(caplog):
    import pipeline.spec

    pipeline.spec._note_plus_changed.cache_clear()
    parse("bm25() + bm25(k1=1.2)")
    parse("bm25() + bm25(k1=1.5)")
    assert caplog.text.count("before 2026-11-27 it was reciprocal rank fusion, which is now written rrf(a, b)") == 1


@pytest.mark.parametrize("spec, message", [
    ("overlap(idf=no)", "idf='no': expected true or false"),
    ("overlap(idf=1)", "idf=1: expected true or false"),
    ("bm25(hits=1.5)", "hits=1.5: expected an integer"),
    ("bm25(k1=abc)", "k1='abc': expected a number"),
    ("bm25(hits=true)", "hits=True: expected an integer"),
])
def test_option_values_are_checked_by_kind(spec, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(spec)
    assert repr(parse("overlap(idf=false)")) == "overlap(idf=False)"


@pytest.mark.parametrize("text", ["null", "none", "NULL", "None"])
def test_null_and_none_are_none_in_a_spec_and_in_a_set_flag(text):
    """One meaning for a bare null / none: None, in the spec grammar and in `--set KEY=VALUE` alike."""
    from pipeline.commands.train import key_values

    assert parse(f"bm25(index={text})") == BM25(index=None)
    assert key_values([f"bert={text}"], "--set") == {"bert": None}


def test_a_quoted_null_in_a_spec_stays_text():
    assert parse("bm25(index='null')") == BM25(index="null")

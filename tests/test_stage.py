"""The stage algebra: composition flattens, cutoffs and fusion compute what they say, identity follows config."""
from __future__ import annotations

import pytest

from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.errors import ConfigError
from pipeline.stages.rerank import Reranker
from pipeline.rerank.fusion import fuse
from pipeline.stage import Compose, Cutoff, Fusion, Stage, StageError, rrf
from pipeline.spec import parse

TOPICS = Topics({"q1": "alpha beta", "q2": "gamma"})


class Fixed(Stage):
    """A retriever that returns a fixed run (a stand-in first stage, not the code under test)."""

    name = "fixed"

    def __init__(self, scores):
        self.scores = scores

    def transform(self, topics, run):
        return Run.from_scores({q: self.scores[q] for q in topics})

    def config(self):
        return {"scores": self.scores}


class Negate(Stage):
    name = "negate"
    needs_run = True

    def transform(self, topics, run):
        return Run.from_scores({q: {d: -s for d, s in hits} for q, hits in run.ranking.items()})


A = Fixed({"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"x": 1.0, "y": 0.5}})
B = Fixed({"q1": {"c": 5.0, "a": 4.0}, "q2": {"y": 2.0}})


def test_compose_flattens_and_indexes():
    pipeline = A >> Negate() >> Negate()
    assert isinstance(pipeline, Compose) and len(pipeline) == 3
    assert (A >> (Negate() >> Negate())) == pipeline
    assert pipeline[0] == A


def test_cutoff_keeps_top_k():
    run = (A % 2)(TOPICS)
    assert [d for d, _ in run["q1"]] == ["a", "b"]
    assert (A % 2)[1] == Cutoff(2)


def test_composition_order():
    run = (A % 2 >> Negate())(TOPICS)
    assert [d for d, _ in run["q1"]] == ["b", "a"]


def test_plus_sums_scores_as_pyterrier_does():
    """`a + b` is PyTerrier's `+`: every hit of each run, a score absent from one run counting 0."""
    run = (A + B)(TOPICS)
    assert dict(run["q1"]) == pytest.approx({"a": 3.0 + 4.0, "b": 2.0, "c": 1.0 + 5.0})
    assert [d for d, _ in run["q1"]] == ["a", "c", "b"]
    assert (A + B + A) == Fusion(A, B, A, method="weighted", depth=None)  # one flat sum
    assert repr(A + B) == f"{A!r} + {B!r}" and (A + B).depth is None


def test_rrf_fusion_arithmetic():
    run = rrf(A, B)(TOPICS)
    scores = dict(run["q1"])
    assert scores["a"] == pytest.approx(1 / (60 + 1) + 1 / (60 + 2))
    assert scores["c"] == pytest.approx(1 / (60 + 3) + 1 / (60 + 1))
    assert scores["b"] == pytest.approx(1 / (60 + 2))
    assert [d for d, _ in run["q1"]] == ["a", "c", "b"]


def test_weighted_fusion_arithmetic():
    run = Fusion(A, B, method="weighted", weights=(0.5, 2.0))(TOPICS)
    assert dict(run["q1"])["a"] == pytest.approx(0.5 * 3.0 + 2.0 * 4.0)


def test_repr_eq_hash_follow_config():
    assert repr(A % 10 >> Negate()).endswith("% 10 >> negate()")
    assert Cutoff(5) == Cutoff(5) and Cutoff(5) != Cutoff(6)
    assert len({Cutoff(5), Cutoff(5), Cutoff(6)}) == 2


def test_reranker_without_input_run_is_refused():
    with pytest.raises(StageError, match="compose it after a retriever"):
        Negate()(TOPICS)


def test_contract_checked_at_class_creation():
    with pytest.raises(TypeError, match="must define transform"):
        class Broken(Stage):
            pass


@pytest.mark.parametrize("k", [0, -3, 2.5, True])
def test_bad_cutoff(k):
    with pytest.raises(ConfigError, match="cutoff: k="):
        Cutoff(k)


def test_operator_with_non_stage():
    with pytest.raises(TypeError, match="must be Stages"):
        A >> 3


class Fielded(Fixed):
    """A first stage whose candidates carry a field (as a dataset's shipped candidates do)."""

    def transform(self, topics, run):
        fixed = super().transform(topics, run)
        return Run(fixed.ranking, doc_fields={d: {"url": f"{d}.org"} for hits in fixed.ranking.values() for d, _ in hits})


class ByUrlLength(Reranker):
    """A reranker scoring each pair by the length of its candidate's URL (what reaches `score` is under test)."""

    name = "by_url_length"

    def score(self, pairs):
        return [len(p.doc_fields["url"]) for p in pairs]

    def config(self):
        return {}


def test_doc_fields_reach_a_reranker_and_survive_fusion():
    first = Fielded({"q1": {"a": 3.0, "bbb": 2.0}, "q2": {"cc": 1.0}})
    run = first(TOPICS)
    reranked = ByUrlLength()(TOPICS, Run(run.ranking, {"a": "A", "bbb": "B", "cc": "C"}, doc_fields=run.doc_fields))
    assert reranked.ranking == {"q1": [("bbb", 7.0), ("a", 5.0)], "q2": [("cc", 6.0)]}
    assert reranked.doc_fields == run.doc_fields
    assert Fusion(first, A)(TOPICS).doc_fields == run.doc_fields


def test_weighted_fusion_normalises_per_query():
    minmax = Fusion(A, B, method="weighted", weights=(1.0, 1.0), norm="minmax")(TOPICS)
    # q1: A minmax a=1, b=0.5, c=0; B minmax c=1, a=0 -> a 1.0, c 1.0, b 0.5; q2: B has one hit -> 0
    assert dict(minmax["q1"]) == pytest.approx({"a": 1.0, "c": 1.0, "b": 0.5})
    assert dict(minmax["q2"]) == pytest.approx({"x": 1.0, "y": 0.0})
    zscore = Fusion(A, B, method="weighted", weights=(0.5, 2.0), norm="zscore")(TOPICS)
    std = (2 / 3) ** 0.5  # A's q1 scores 3, 2, 1
    assert dict(zscore["q1"]) == pytest.approx({"a": 0.5 * 1 / std - 2.0, "b": 0.0, "c": 0.5 * -1 / std + 2.0})
    assert "norm=zscore" in repr(Fusion(A, B, method="weighted", norm="zscore"))


def test_a_specs_norm_none_is_the_norm_called_none():
    """A spec reads a bare `none` as None; `fusion(..., norm=none)` was refused ("norm=None; choose one of none, ...")."""
    stage = parse("fusion(bm25(), bm25(k1=1.2), method=weighted, norm=none)")
    assert stage.norm == "none" and repr(stage) == repr(parse("fusion(bm25(), bm25(k1=1.2), method=weighted)"))


@pytest.mark.parametrize("options", [{"norm": "max"}, {"method": "rrf", "norm": "minmax"}])
def test_bad_fusion_norm(options):
    with pytest.raises(ConfigError, match="fusion: norm="):
        Fusion(A, B, **options)


def test_fuse_is_the_fusion_of_runs_made_elsewhere():
    """`fuse` (what a benchmark fuses its own scores with) is the stage's arithmetic, options and checks."""
    for options in ({}, {"method": "weighted", "weights": (1.0, 2.0), "norm": "zscore"}, {"k": 10, "depth": 1}):
        assert fuse([A(TOPICS), B(TOPICS)], **options).ranking == Fusion(A, B, **options)(TOPICS).ranking
    with pytest.raises(ConfigError, match="fusion: norm="):
        fuse([A(TOPICS), B(TOPICS)], norm="minmax")
    with pytest.raises(ConfigError, match="3 weights for 2"):
        fuse([A(TOPICS), B(TOPICS)], method="weighted", weights=(1, 1, 1))


@pytest.mark.parametrize("damage", [lambda b: b[: len(b) // 2], lambda b: b"not gzip", lambda b: b""],
                         ids=["truncated", "garbage", "empty"])
def test_a_damaged_cache_entry_is_recomputed_with_a_warning(tmp_path, caplog, damage):
    import gzip
    import json
    import logging

    from pipeline.cache import StageCache

    cache = StageCache(tmp_path)
    run = Run({"q": [("d1", 2.0), ("d2", 1.0)]}, {"d1": "text"}, doc_fields={"d2": {"url": "x.org"}})
    cache.put("ab" * 20, Cutoff(5), run)
    path = next(tmp_path.rglob("*.json.gz"))
    assert json.loads(gzip.decompress(path.read_bytes()))["ranking"]["q"][0] == ["d1", 2.0]
    assert cache.get("ab" * 20) == run  # ranking, texts, tag and the candidates' fields
    path.write_bytes(damage(path.read_bytes()))
    with caplog.at_level(logging.WARNING, logger="irpipe"):
        assert cache.get("ab" * 20) is None
    assert "damaged entry" in caplog.text and not path.exists() and cache.misses == 1

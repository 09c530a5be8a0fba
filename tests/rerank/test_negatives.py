"""Sampled negatives (pipeline/training/negatives.py) on hand-built Chinese questions: BM25 as its formula says,
keyword-BERT's α/β rule (too close by BM25 or sharing its keywords: not a negative), keyword replacement within a
domain, random negatives that are never the query or a positive, and the options that select them."""
from __future__ import annotations

import math
from collections import Counter

import pytest

from pipeline.errors import ConfigError
from pipeline.retrieve.keyword_dictionary import Keyword, KeywordDictionary
from pipeline.training.examples import Examples
from pipeline.training.negatives import NegativeSampling, PoolBM25, non_overlap, sample_negatives
from pipeline.training.options import check_options

QUERY = "信用卡怎么还款"
POOL = {"near": "信用卡怎么还款呢",                # BM25 ratio 0.94 >= α: too close
        "short": "信用卡还款",                     # ratio 0.82 >= α
        "same-keywords": "信用卡还款一般需要多久才能到账呢",  # ratio < α but the same keywords: non-overlap 0 <= β
        "other-use": "信用卡怎么办理",             # ratio 0.55, keywords {信用卡} vs {信用卡, 还款}: 0.5 > β
        "other-loan": "贷款利率怎么算",            # ratio 0.21, no shared keyword: 1.0
        "sports": "今天足球比赛怎么样"}            # no shared word with the query: not retrieved


@pytest.fixture(scope="module")
def dictionary(tmp_path_factory) -> str:
    entries = [Keyword(word, domain, score, 3, 10, 0, 10) for word, domain, score in
               [("信用卡", "bank", 3.0), ("贷款", "bank", 2.5), ("还款", "bank", 2.0), ("足球", "sports", 3.0)]]
    return str(KeywordDictionary(entries, "zh").save(tmp_path_factory.mktemp("kw") / "d.tsv"))


def _examples() -> Examples:
    texts = {"pos": "信用卡如何还款", "labelled-neg": "我想去打篮球"} | POOL
    labels = {"q1": {"pos": 1, "labelled-neg": 0}, "q2": {docid: 0 for docid in POOL}}
    return Examples({"q1": QUERY, "q2": "随便问问"}, texts, labels)


def test_pool_bm25_is_the_formula():
    index = PoolBM25([["a", "b"], ["b", "c", "c"], ["d"]], k1=0.9, b=0.4)
    idf_b = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    idf_c = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    norm = 0.9 * (1 - 0.4 + 0.4 * 3 / 2)  # length 3, average 2
    expected = idf_b * 1 * 1.9 / (1 + norm) + 2 * idf_c * 2 * 1.9 / (2 + norm)  # query weights b: 1, c: 2
    assert index.score(Counter({"b": 1, "c": 2}), index.tf[1], 3) == pytest.approx(expected)
    assert [i for i, _ in index.search(Counter({"b": 1, "c": 2}), 5)] == [1, 0]


def test_non_overlap_ratio():
    assert non_overlap({"a", "b"}, {"a", "b"}) == 0.0
    assert non_overlap({"a", "b"}, {"a"}) == pytest.approx(0.5)
    assert non_overlap({"a"}, {"c"}) == 1.0 and non_overlap(set(), set()) == 1.0


@pytest.mark.slow
def test_keyword_negatives_follow_the_alpha_beta_rule(dictionary):
    sampling = NegativeSampling("keyword", per_positive=2, dictionary=dictionary)
    sampled = sample_negatives(_examples(), sampling)
    negatives = [d for d, label in sampled.labels["q1"].items() if label == 0]
    assert negatives == ["other-use", "other-loan"]  # best BM25 first among those that pass both rules
    assert sampled.labels["q1"]["pos"] == 1 and "labelled-neg" not in sampled.labels["q1"]
    one = sample_negatives(_examples(), NegativeSampling("keyword", per_positive=1, dictionary=dictionary))
    assert [d for d, label in one.labels["q1"].items() if label == 0] == ["other-use"]
    strict = sample_negatives(_examples(), NegativeSampling("keyword", per_positive=2, dictionary=dictionary, alpha=0.5))
    assert [d for d, label in strict.labels["q1"].items() if label == 0] == ["other-loan"]
    loose = sample_negatives(_examples(), NegativeSampling("keyword", per_positive=9, dictionary=dictionary, beta=-1))
    assert set(d for d, label in loose.labels["q1"].items() if label == 0) == {"same-keywords", "other-use", "other-loan"}
    assert "q2" not in sampled.labels  # no positive: no negatives drawn, the query left out


def test_keyword_replacement_swaps_within_the_domain(dictionary):
    sampling = NegativeSampling("keyword", per_positive=1, dictionary=dictionary, replace_ratio=1.0)
    sampled = sample_negatives(_examples(), sampling)
    replaced = sampled.texts["q1:replaced"]
    assert sampled.labels["q1"]["q1:replaced"] == 0
    # one of 信用卡 / 还款 replaced by another bank word (贷款, or the other one when absent), never a sports word
    assert replaced in {"贷款怎么还款", "还款怎么还款", "信用卡怎么贷款"} and replaced != QUERY


def test_random_negatives_are_neither_the_query_nor_a_positive():
    first = sample_negatives(_examples(), NegativeSampling("random", per_positive=3, seed=5))
    again = sample_negatives(_examples(), NegativeSampling("random", per_positive=3, seed=5))
    negatives = [d for d, label in first.labels["q1"].items() if label == 0]
    assert len(negatives) == 3 and negatives == [d for d, label in again.labels["q1"].items() if label == 0]
    assert all(first.texts[d] not in (QUERY, "信用卡如何还款") for d in negatives)


def test_options_select_the_sampling(dictionary):
    assert NegativeSampling.of(check_options({"negatives": "labelled"})) is None
    options = check_options({"negatives": "keyword", "negatives_dict": dictionary, "negatives_per_positive": 2,
                             "replace_ratio": 0.25, "seed": 7})
    assert NegativeSampling.of(options) == NegativeSampling("keyword", 2, dictionary, 0.6, 0.2, 0.25, 100, 7)
    with pytest.raises(ConfigError, match="negatives_dict"):
        NegativeSampling.of(check_options({"negatives": "keyword"}))
    with pytest.raises(ConfigError, match="beta"):
        check_options({"negatives": "random", "beta": -0.5})

"""The keyword-BERT benchmark's LCQMC/BQ ranking (bench/keyword_bert.py).

Its ranking column once came from the pair classifier trained on LCQMC's labelled dev pairs, which ranked BM25's
top 20 worse than a random order (Success@1 0.03 against 0.05; BM25 0.74): LCQMC dev's labels follow the length of
the pair, the small BERTs learn that length, and among BM25's hits the paired question is the short one
(eval/KEYWORD_BERT.md section 4). The ranker is now trained for ranking, and the length/overlap shortcuts are
recorded beside its numbers.
"""
from __future__ import annotations

import argparse
import json
import statistics

import pytest

from bench.keyword_bert import Ranking, ranking_result, recipe_of
from pipeline.rerank.model import Pair
from support import needs_shared_data


def _args(**changes) -> argparse.Namespace:
    args = dict(dataset="lcqmc", bert="models/zh-bert-2l-128", dict="thucnews", epochs=2, lr=1e-4, batch_size=32,
                max_length=64, negatives_per_positive=1, replace_ratio=0.1, set=[], threads=1,
                ranking_train="questions", train_depth=10, device="cpu", balance="none")
    return argparse.Namespace(**(args | changes))


def test_the_ranker_is_trained_on_the_ranking_task():
    """The recipe of eval/lcqmc-questions-test-{kwbert,monobert}.yaml: questions-dev, BM25's top 10 as negatives."""
    for name in ("monobert", "kwbert"):
        ranker = recipe_of(name, _args(), seed=1, ranking=True)
        assert ranker.train == "lcqmc/questions-dev"
        assert ranker.options["negatives"] == "bm25" and ranker.options["depth"] == 10 and ranker.options["seed"] == 1
        classifier = recipe_of(name, _args(), seed=1)
        assert classifier.train == "lcqmc/dev" and "negatives" not in classifier.options
        assert ranker.overrides == classifier.overrides  # the same model: only the training data differs
    assert recipe_of("kwbert", _args(ranking_train="pairs"), 0, ranking=True).train == "lcqmc/dev"
    sampled = recipe_of("kwbert-random", _args(dataset="bq"), 0, ranking=True)
    assert sampled.train == "bq/questions-dev" and sampled.options["negatives"] == "random"


def _ranking() -> Ranking:
    """Two queries of three candidates; the paired question (d1, e2) is the shortest and the most overlapping."""
    texts = {"q1": ("abc", {"d1": "abd", "d2": "axxxxxx", "d3": "zzzzzzzzzz"}),
             "q2": ("uvw", {"e1": "uvxxxxx", "e2": "uvw", "e3": "yyyyyyyy"})}
    pairs = [Pair(qid, docid, query, text) for qid, (query, docs) in texts.items() for docid, text in docs.items()]
    return Ranking(pairs, [3.0, 2.0, 1.0, 3.0, 2.0, 1.0], {"q1": {"d1": 1}, "q2": {"e2": 1}})


def test_a_length_ranker_is_seen_for_what_it_is():
    ranking = _ranking()
    by_length = [float(len(p.text)) for p in ranking.pairs]
    assert ranking.shortcuts(by_length) == {"length": 1.0, "overlap": -1.0}
    table = ranking.per_query(by_length)
    assert table["Success@1"] == {"q1": 0.0, "q2": 0.0}                 # below a random order ...
    assert ranking.random_order() == {"Success@1": pytest.approx(1 / 3, abs=1e-4), "Success@10": 1.0}
    assert ranking.per_query(ranking.bm25)["Success@1"] == {"q1": 1.0, "q2": 0.0}


def test_fusion_weight_is_tuned_and_zero_keeps_the_bm25_order():
    """--fusion: BM25's and the ranker's runs fused by the toolkit (pipeline.rerank.fusion.fuse, z-scored), the weight tuned
    on the tuning ranking (pipeline.tune.tune_fusion_weight) and applied to the test ranking."""
    from pipeline.rerank.fusion import fuse

    ranking = _ranking()
    overlap = [len(set(p.query) & set(p.text)) / len(set(p.query) | set(p.text)) for p in ranking.pairs]
    assert fuse(ranking.runs(overlap), "weighted", weights=[1, 0], norm="zscore").ranking == \
        fuse(ranking.runs([0.0] * 6), "weighted", weights=[1, 5], norm="zscore").ranking     # BM25's alone
    fusion = ranking_result(overlap, ranking, ranking, overlap, [2, 1, 0.5, 0])["fusion"]
    assert fusion["dev Success@1 by weight"] == {"0": 0.5, "0.5": 0.5, "1": 1.0, "2": 1.0}
    assert fusion["weight"] == 1 and fusion["Success@1"] == 1.0          # the smaller of the best, in any grid order
    assert fusion["per_query"]["Success@1"] == {"q1": 1.0, "q2": 1.0}
    harmful = [-x for x in overlap]
    assert ranking_result(harmful, ranking, ranking, harmful, [0, 1])["fusion"]["weight"] == 0   # no weight


@needs_shared_data
def test_lcqmc_dev_labels_follow_length_and_test_labels_do_not(shared_data):
    """Why the pair classifier must not rank: on LCQMC's dev pairs (its training data) the label follows the pair's
    length, on the test pairs hardly; on both it follows the character overlap (the signal a ranker needs)."""
    from scipy.stats import spearmanr

    from pipeline.data.registry import get_dataset

    def correlations(name: str) -> tuple[float, float]:
        pairs = list(get_dataset(name).pairs())
        labels = [p.label for p in pairs]
        length = [len(p.text_a) + len(p.text_b) for p in pairs]
        overlap = [len(set(p.text_a) & set(p.text_b)) / len(set(p.text_a) | set(p.text_b)) for p in pairs]
        return spearmanr(labels, length)[0], spearmanr(labels, overlap)[0]

    dev_length, dev_overlap = correlations("lcqmc/dev")
    test_length, test_overlap = correlations("lcqmc/test")
    assert dev_length > 0.25 and test_length < 0.1
    assert dev_overlap > 0.3 and test_overlap > 0.4
    positives = [p for p in get_dataset("lcqmc/dev").pairs() if p.label == 1]
    assert statistics.fmean(len(p.text_a) + len(p.text_b) for p in positives) > 26


def test_accuracy_alone_without_a_ranking():
    """--ranking-queries 0 (no Lucene: what a GPU machine without Java runs): the summary holds accuracy and its
    paired comparison, and nothing of a ranking."""
    from bench.keyword_bert import summarise

    def run(correct: list[float]) -> dict:
        return {"accuracy": statistics.fmean(correct), "correct": {f"q{i}/d": c for i, c in enumerate(correct)}}

    results = {"monobert": [run([1, 0, 0, 1]), run([1, 0, 1, 1])], "kwbert": [run([1, 1, 0, 1]), run([1, 1, 1, 1])]}
    summary = summarise(results, {})
    assert summary["systems"]["kwbert"] == {"accuracy": {"mean": 0.875, "sd": pytest.approx(0.1768, abs=1e-4),
                                                         "seeds": [0.75, 1.0]}}
    assert list(summary["paired_t_test_p"]) == ["kwbert vs monobert"]
    assert list(summary["paired_differences"]["kwbert - monobert"]) == ["accuracy"]
    assert summary["paired_differences"]["kwbert - monobert"]["accuracy"]["difference"] == pytest.approx(0.25)


def test_scores_from_elsewhere_must_list_the_same_pairs(tmp_path):
    """--rankings-from: the scores written by --score-rankings are taken only for the very pairs exported."""
    from bench._question_ranking import check_exported, exported_scores, load_ranking, scores_path
    from pipeline.errors import ConfigError

    ranking = _ranking()
    (tmp_path / "test.json").write_text(json.dumps({"pairs": [[p.qid, p.docid, p.query, p.text] for p in ranking.pairs],
                                                    "bm25": ranking.bm25, "qrels": ranking.qrels}))
    assert [(p.qid, p.docid, p.text) for p in load_ranking(tmp_path / "test.json").pairs] == \
        [(p.qid, p.docid, p.text) for p in ranking.pairs]
    with pytest.raises(ConfigError, match="--score-rankings"):
        exported_scores(tmp_path, "kwbert", 0, {"test": ranking})
    scores_path(tmp_path, "kwbert", 0).parent.mkdir()
    scores_path(tmp_path, "kwbert", 0).write_text(json.dumps({"test": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}))
    assert exported_scores(tmp_path, "kwbert", 0, {"test": ranking}) == {"test": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}
    check_exported(tmp_path, {"test": ranking})
    reordered = Ranking(ranking.pairs[::-1], ranking.bm25[::-1], ranking.qrels)
    with pytest.raises(ConfigError, match="do not list this run's pairs"):
        check_exported(tmp_path, {"test": reordered})
    fewer = Ranking(ranking.pairs[:5], ranking.bm25[:5], ranking.qrels)
    with pytest.raises(ConfigError, match="does not score the 5 pairs"):
        exported_scores(tmp_path, "kwbert", 0, {"test": fewer})


@pytest.mark.slow
@needs_shared_data
def test_the_exported_training_data_is_the_rankers_own(tmp_path, shared_data):
    """--export-rankings writes a folder on which the ranker's recipe (`negatives=bm25`, depth 10) trains on the very
    queries, candidates, labels and texts it trains on from lcqmc/questions-dev, without an index."""
    from bench.keyword_bert import main
    from pipeline.data.registry import get_dataset
    from pipeline.training.examples import examples_from

    assert main(["--dataset", "lcqmc", "--ranking-queries", "5", "--export-rankings", str(tmp_path / "R")]) == 0
    exported = get_dataset(str(tmp_path / "R" / "train"))
    assert exported.run().texts  # `run_texts: corpus`
    own, there = examples_from(get_dataset("lcqmc/questions-dev"), "bm25", 10), examples_from(exported, "bm25", 10)
    assert (own.queries, own.labels, own.texts) == (there.queries, there.labels, there.texts)
    assert len({p[0] for p in json.loads((tmp_path / "R" / "test.json").read_text())["pairs"]}) == 5

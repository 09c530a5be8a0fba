"""Python functions as stages (pipeline/stages/functions.py), `w * stage`, the feature union `a ** b`
(pipeline/stages/features.py) and learning to rank over it (pipeline/stages/ltr.py): on the tests' tiny collection
(a real Lucene index) and, for `ltr`, on TrecQA's shipped candidates with the overlap features (no model, no JVM)."""
from __future__ import annotations

import math

import pytest

from support import needs_shared_data, write_collection

import pipeline as ir
from pipeline.data.runs import Run
from pipeline.errors import ConfigError
from pipeline.spec import parse
from pipeline.stage import StageError


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return ir.dataset(str(write_collection(tmp_path_factory.mktemp("functions") / "tiny")))


def scores(run: Run) -> dict[str, dict[str, float]]:
    return run.to_dict()


def test_a_weighted_sum_is_the_weights_times_each_runs_scores(tiny, cache):
    bm25, rm3 = ir.bm25(), ir.bm25(rm3=True, fb_docs=1, fb_terms=2)
    weighted = (0.7 * bm25 + rm3 * 0.3).run(tiny)
    one, other = scores(bm25.run(tiny)), scores(rm3.run(tiny))
    for qid, hits in scores(weighted).items():
        for docid, score in hits.items():
            assert math.isclose(score, 0.7 * one[qid].get(docid, 0) + 0.3 * other[qid].get(docid, 0), rel_tol=1e-12)
    assert ir.parse(repr(0.7 * bm25 + 0.3 * rm3)) == 0.7 * bm25 + 0.3 * rm3  # it prints as a spec that parses back
    assert repr(bm25 + rm3) == "bm25(k1=0.9, b=0.4, hits=1000) + bm25(k1=0.9, b=0.4, hits=1000, rm3=True, " \
                               "fb_terms=2, fb_docs=1, original_query_weight=0.5)"  # `+` as before
    with pytest.raises(TypeError):
        "0.7" * bm25


def test_a_query_rewrite_is_what_the_next_stage_searches_for(tiny, cache):
    run = (ir.apply_query(lambda query: "coal") >> ir.bm25()).run(tiny)
    assert {qid: {d for d, _ in hits} for qid, hits in run.ranking.items()} == {q: {"d3", "d5"} for q in "123"}


def test_a_document_score_function_reranks_the_candidates(tiny, cache):
    run = (ir.bm25() >> ir.apply_doc_score(lambda query, text: -len(text))).run(tiny)
    for hits in run.ranking.values():
        assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)
    assert run["3"][0] == ("d5", -len("a coal mine in wales"))  # shorter than d3's text: first


def test_a_plain_function_after_shift_is_a_frame_stage(tiny, cache):
    run = (ir.bm25() >> (lambda frame: frame[frame["rank"] < 1])).run(tiny)
    assert {qid: len(hits) for qid, hits in run.ranking.items()} == {"1": 1, "2": 1, "3": 1}
    with pytest.raises(StageError, match="returned list, not a pandas DataFrame"):
        (ir.bm25() >> (lambda frame: [])).run(tiny)
    with pytest.raises(TypeError, match="both sides must be Stages"):
        ir.bm25() + (lambda frame: frame)


def test_a_function_stage_is_never_cached(tiny, cache):
    calls = []

    def count(query, text):
        calls.append(query)
        return 1.0

    pipeline = ir.bm25() >> ir.apply_doc_score(count)
    pipeline.run(tiny)
    pipeline.run(tiny)
    assert len(calls) == 2 * ir.bm25().run(tiny).num_hits()  # the second run called it again
    assert ir.apply_doc_score(count) == ir.apply_doc_score(count)
    assert ir.apply_doc_score(count) != ir.apply_doc_score(lambda query, text: 1.0)


def test_a_function_in_a_spec_is_an_error_that_says_so():
    with pytest.raises(ConfigError, match="is not a Python function; a function stage is made in Python"):
        ir.parse("bm25() >> apply_doc_score(fn=len)")


def test_a_feature_union_carries_each_stages_score_and_zero_where_it_has_none(tiny, cache):
    bm25, rm3 = ir.bm25(hits=1), ir.bm25(rm3=True, fb_docs=1, fb_terms=2)
    union = (ir.bm25() >> (bm25 ** rm3)).run(tiny)
    one, other = scores(bm25.run(tiny)), scores(rm3.run(tiny))
    assert union.ranking.keys() == union.features.keys()
    for qid, vectors in union.features.items():
        assert [d for d, _ in union[qid]] == sorted(vectors, key=lambda d: (-vectors[d][0], d))  # by the first
        for docid, vector in vectors.items():
            assert vector == (one[qid].get(docid, 0.0), other[qid].get(docid, 0.0))
    assert any(0.0 in vector for vectors in union.features.values() for vector in vectors.values())  # hits=1 left out
    assert repr(bm25 ** rm3 ** ir.bm25()) == f"features({bm25!r}, {rm3!r}, {ir.bm25()!r})"  # one flat union


FEATURES = ir.overlap(idf=True) ** ir.overlap(idf=False)


@needs_shared_data
def test_ltr_is_deterministic_and_keyed_by_its_training_data(cache):
    test = ir.dataset("trecqa/raw-test")
    first, second = (ir.ltr(FEATURES, train="trecqa/train").run(test, cache=False) for _ in range(2))
    assert first.ranking == second.ranking
    scored = {score for hits in first.ranking.values() for _, score in hits}
    assert len(scored) > 20 and all(0 <= s <= 1 for s in scored)  # probabilities, not the input's scores
    bound = [ir.ltr(FEATURES, train=train).bind(test) for train in ("trecqa/train", "trecqa/clean-test")]
    assert bound[0].fingerprint() != bound[1].fingerprint()
    assert ir.ltr(FEATURES, train="trecqa/train", seed=1) != ir.ltr(FEATURES, train="trecqa/train")


@needs_shared_data
def test_ltr_over_both_overlaps_beats_word_overlap(cache):
    test = ir.dataset("trecqa/raw-test")
    word = ir.evaluate(ir.overlap(idf=False).run(test), test, ["AP"])["AP"]
    learned = ir.evaluate(ir.ltr(FEATURES, train="trecqa/train", learner="logistic").run(test), test, ["AP"])["AP"]
    assert learned > word + 0.02


@needs_shared_data
@pytest.mark.parametrize("learner", ["pairwise", "lambdamart"])
def test_a_pairwise_and_a_listwise_learner_beat_word_overlap_deterministically(learner, cache):
    if learner == "lambdamart":
        pytest.importorskip("lightgbm", reason='learner=lambdamart is the ltr extra: pip install -e ".[ltr]"')
    test = ir.dataset("trecqa/raw-test")
    word = ir.evaluate(ir.overlap(idf=False).run(test), test, ["AP"])["AP"]
    first, second = (ir.ltr(FEATURES, train="trecqa/train", learner=learner).run(test, cache=False) for _ in range(2))
    assert first.ranking == second.ranking
    assert ir.evaluate(first, test, ["AP"])["AP"] > word + 0.02


@needs_shared_data
def test_ltr_pools_several_training_sets_and_one_name_keeps_its_key(cache):
    test = ir.dataset("trecqa/raw-test")
    alone, listed = (ir.ltr(FEATURES, train=train).bind(test) for train in ("trecqa/train", ["trecqa/train"]))
    assert repr(alone) == repr(listed) and alone.fingerprint() == listed.fingerprint()
    assert parse("ltr(features(overlap()), train=trecqa/train, norm=none)").norm == "none"
    pooled = ir.ltr(FEATURES, train=["trecqa/train", "trecqa/raw-dev"], learner="logistic")
    assert repr(pooled).endswith("train=[trecqa/train, trecqa/raw-dev], learner=logistic, norm=zscore, seed=0)")
    assert pooled.bind(test).fingerprint() != ir.ltr(FEATURES, train="trecqa/train", learner="logistic").bind(
        test).fingerprint()
    run = pooled.run(test, cache=False)
    assert ir.evaluate(run, test, ["AP"])["AP"] > ir.evaluate(ir.overlap(idf=False).run(test), test, ["AP"])["AP"]


@pytest.mark.parametrize("arguments, message", [
    ({"train": "trecqa/train", "learner": "svm"}, "ltr: learner='svm'"),
    ({"train": "trecqa/train", "trees": 0}, "ltr: trees=0; expected an integer >= 1"),
    ({"train": ""}, "ltr: train='': the name of a dataset with candidates and qrels"),
    ({"train": ["trecqa/train", 3]}, "ltr: train=['trecqa/train', 3]: the name of a dataset with candidates"),
])
def test_bad_ltr_options_are_config_errors(arguments, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        ir.ltr(FEATURES, **arguments)


@needs_shared_data
def test_ltr_on_a_dataset_without_candidates_names_the_field():
    with pytest.raises(ConfigError, match="train=cacm: cacm has no run; ltr is fitted on a dataset's candidates"):
        ir.ltr(FEATURES, train="cacm").bind(ir.dataset("trecqa/raw-test"))


def test_hold_out_folds_partition_the_judged_queries_and_bad_folds_are_refused():
    from pipeline.training.options import kept_queries

    qids = [f"q{i}" for i in range(11)]
    held = [sorted(set(qids) - set(kept_queries(qids, f"{fold}/3"))) for fold in range(3)]
    assert sorted(sum(held, [])) == sorted(qids) and held[1] == ["q1", "q10", "q4", "q7"]
    assert kept_queries(qids, "") == qids
    for bad in ("3/3", "0/1", "one/3"):
        with pytest.raises(ConfigError, match=f"hcan: training: hold_out='{bad}': give i/K, the i-th of K folds"):
            parse(f"hcan(train=trecqa/train, hold_out={bad})")
    with pytest.raises(ConfigError, match="ltr: cross_fit=1; expected an integer >= 2"):
        ir.ltr(FEATURES, train="trecqa/train", cross_fit=1)


@needs_shared_data
def test_cross_fit_without_a_feature_trained_on_the_set_says_so():
    with pytest.raises(ConfigError, match="cross_fit=2: no feature is trained on trecqa/train"):
        ir.ltr(FEATURES, train="trecqa/train", cross_fit=2).bind(ir.dataset("trecqa/raw-test"))


TINY_HCAN = ("hcan(train=trecqa/train, epochs=1, embeddings=random, embedding_dim=8, filters=8, max_query_length=12, "
             "max_doc_length=16, threads=1)")


@needs_shared_data
@pytest.mark.slow
def test_cross_fit_fits_on_out_of_fold_scores_of_models_trained_without_each_fold(cache):
    test, train = ir.dataset("trecqa/raw-test"), ir.dataset("trecqa/train")
    learned = parse(f"ltr(features(overlap(idf=true), {TINY_HCAN}), train=trecqa/train, learner=logistic, "
                    "cross_fit=2)")
    assert repr(learned).endswith("cross_fit=2)") and parse(repr(learned)) == learned
    bound = learned.bind(test)
    folds = bound._training[0].folds
    judged = [qid for qid in train.topics() if qid in train.qrels()]
    assert [list(fold.topics) for fold in folds] == [judged[0::2], judged[1::2]]
    models = [fold.features.stages[1] for fold in folds] + [bound._features.stages[1]]
    assert [model.train_options.get("hold_out") for model in models] == ["0/2", "1/2", None]
    assert len({model.model_digest() for model in models}) == 3  # three recipes, each trained once
    plain = parse(f"ltr(features(overlap(idf=true), {TINY_HCAN}), train=trecqa/train, learner=logistic)").bind(test)
    assert plain.fingerprint() != bound.fingerprint()
    run = bound.run(test, cache=False)
    assert len(run.ranking) == len(test.run().ranking)
    pooled = parse(f"ltr(features(overlap(idf=true), {TINY_HCAN}), train=[trecqa/train, trecqa/raw-dev], "
                   "learner=logistic, cross_fit=2)").bind(test)
    assert [len(part.folds) for part in pooled._training] == [2, 1]  # raw-dev: no feature trained on it, whole


def test_the_ltr_study_fits_a_trained_feature_on_train_only_cross_fitted():
    from bench.ltr_study import ltr_spec, rows

    studied = rows({"trained-1": "hcan()"}, ["logistic"], ["none"], "trecqa/raw-test", cross_fit=5)
    assert [row for row in studied if row[0] == "cheap+trained"] == [
        ("cheap+trained", "raw-dev", "logistic", "none", 0), ("cheap+trained", "train", "logistic", "none", 5),
        ("cheap+trained", "train+raw-dev", "logistic", "none", 5)]
    assert all(row[1] != "train" for row in rows({"trained-1": "hcan()"}, ["logistic"], ["none"], "trecqa/raw-test")
               if row[0] == "cheap+trained")
    assert ltr_spec({"a": "bm25()"}, ["trecqa/train"], "logistic", "none", 5).endswith("norm=none, cross_fit=5)")

"""Question retrieval views of LCQMC/BQ: one query per positive pair, the query's own question excluded."""
from __future__ import annotations

import pytest

from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.stages.exclude import Exclude
from pipeline.stages.bm25 import BM25
from pipeline.spec import parse
from support import needs_shared_data


def test_exclude_drops_the_listed_documents_only():
    topics = Topics({"a": "x", "b": "y"}, {"a": {"exclude": ["d1"]}})
    run = Run({"a": [("d1", 3.0), ("d2", 2.0)], "b": [("d1", 1.0)]}, {"d1": "t1", "d2": "t2"})
    out = Exclude()(topics, run)
    assert out.ranking == {"a": [("d2", 2.0)], "b": [("d1", 1.0)]} and out.texts == run.texts
    assert parse("bm25() >> exclude()")[1] == Exclude()


@needs_shared_data
def test_lcqmc_questions_pair_structure(shared_data):
    from pipeline.data.registry import get_dataset

    dataset = get_dataset("lcqmc/questions")
    docs = {doc["contents"]: doc["id"] for doc in dataset.docs()}
    topics, qrels = dataset.topics(), dataset.qrels()
    pairs = [p for split in ("dev", "test") for p in get_dataset(f"lcqmc/{split}").pairs()]
    assert len(docs) == len({t for p in pairs for t in (p.text_a, p.text_b)})  # every question once
    positives = [p for p in pairs if p.label == 1]
    assert len(topics) == len(positives) - sum(p.text_a == p.text_b for p in positives) == 10649
    for qid in ("dev-0", "test-12499"):
        own, (answer,) = topics.extra[qid]["exclude"], qrels[qid]
        assert own == [docs[topics[qid]]] and answer != own[0]


@pytest.mark.slow
@needs_shared_data
def test_bm25_training_negatives_never_include_the_query_itself(shared_data):
    """A question-retrieval query's own question is in the index and is BM25's first hit: as a training negative it
    would teach that a question is no paraphrase of itself. examples_from drops it as exclude() does."""
    from pipeline.data.registry import get_dataset
    from pipeline.training.examples import examples_from

    dataset = get_dataset("lcqmc/questions-dev")
    topics, qrels = dataset.topics(), dataset.qrels()
    examples = examples_from(dataset, negatives="bm25", depth=10, max_queries=300)
    assert len(examples.labels) == 300
    for qid, labels in examples.labels.items():
        (own,) = topics.extra[qid]["exclude"]
        assert own not in labels and examples.queries[qid] == topics[qid]
        assert [d for d, label in labels.items() if label] == list(qrels[qid])
        assert 9 <= len(labels) - 1 <= 10  # ten hits after the exclusion, one of them perhaps the positive
    raw = BM25(hits=1).bind(dataset)(topics.subset(examples.labels))
    assert sum(raw[qid][0][0] == topics.extra[qid]["exclude"][0] for qid in raw) > 250  # BM25 would rank it first

"""The unit every reranker scores and every model trains on: a (query, candidate) `Pair` that knows its ids and the
extra fields of its topic and candidate. No torch here: non-neural rerankers use it too."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

_NOTHING: Mapping = MappingProxyType({})


@dataclass(frozen=True)
class Pair:
    """One (query, candidate) pair as a model sees it: ids, texts, the topic's extra fields (e.g. "keywords" from
    a `keywords()` stage) and the candidate's (e.g. a tweet's "url"), and, in training, its label."""

    qid: str
    docid: str
    query: str
    text: str
    query_fields: Mapping = field(default_factory=dict, compare=False)
    doc_fields: Mapping = field(default_factory=dict, compare=False)
    label: float = 0.0


def pairs_of(topics, run, texts: Mapping[str, str]) -> list[Pair]:
    """The pairs of a run in its order: each candidate with its query, text, the topic's extra fields and the
    candidate's own (`run.doc_fields`)."""
    return [Pair(qid, docid, topics[qid], texts[docid], topics.extra.get(qid, _NOTHING),
                 run.doc_fields.get(docid, _NOTHING)) for qid, hits in run.ranking.items() for docid, _ in hits]


def scores_by_query(pairs: list[Pair], scores, queries=()) -> dict[str, dict[str, float]]:
    """qid -> docid -> score of scored `pairs` (what Run.from_scores takes); each of `queries` is there even when
    it has no pair."""
    by_query: dict[str, dict[str, float]] = {qid: {} for qid in queries}
    for pair, score in zip(pairs, scores):
        by_query.setdefault(pair.qid, {})[pair.docid] = float(score)
    return by_query

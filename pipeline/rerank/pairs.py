"""The unit every reranker scores and every model trains on: a (query, candidate) `Pair` that knows its ids and the
extra fields of its topic and candidate, and where a candidate's text comes from (`CandidateTexts`: the run's own,
else an index; the one way for reranking and training alike). No torch here: non-neural rerankers use it too."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping

from pipeline.errors import ConfigError

if TYPE_CHECKING:
    from pipeline.data.runs import Run

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


def missing_texts(run: Run) -> list[str]:
    """The candidates of `run` that it carries no text for, in run order."""
    return list(dict.fromkeys(d for hits in run.ranking.values() for d, _ in hits if d not in run.texts))


class CandidateTexts:
    """docid -> text of a run's candidates: the run's own, the rest from an open index. A candidate that has
    neither is an error naming it (a stored candidate, `needless(docid)`, gets an empty text)."""

    def __init__(self, index, who: str):
        self.index, self.who = index, who  # index: a LuceneIndex (pipeline/retrieve/lucene.py) or None

    def of(self, run: Run, needless=lambda docid: False) -> dict[str, str]:
        lacking = missing_texts(run)
        missing = [d for d in lacking if not needless(d)]
        stored = {d: "" for d in lacking if needless(d)}
        if not missing:
            return {**run.texts, **stored} if stored else run.texts  # read only: no copy of a run's texts
        if self.index is None:
            raise ConfigError(f"{self.who}: the run carries no text for {len(missing)} candidates (e.g. "
                              f"{missing[0]!r}) and there is no index to read them from: pass index=DIR "
                              "(`--index DIR` on the command line), or run on a dataset with documents")
        return self.lookup(missing, {**run.texts, **stored})

    def lookup(self, docids, known: Mapping[str, str]) -> dict[str, str]:
        """`known` plus the texts of `docids` it lacks, read from the index; a document not there is an error."""
        texts = dict(known)
        for docid in docids:
            if docid not in texts:
                if self.index is None:
                    raise ConfigError(f"{self.who}: document {docid!r} has no text and there is no index")
                text = self.index.doc_text(docid)
                if text is None:
                    raise ConfigError(f"{self.who}: document {docid!r} is not in the index {self.index.path}")
                texts[docid] = text
        return texts

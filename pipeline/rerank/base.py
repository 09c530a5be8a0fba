"""What every reranker shares: the input run's candidates with their texts, as pairs; scoring; re-sorting.

A reranker scores pairs (pipeline/rerank/pairs.py `Pair`: qid, docid, query, candidate text, the topic's extra
fields and the candidate's, which the run carries in `doc_fields` when its dataset ships them, e.g. a tweet's URL). Texts come from the run itself (datasets that ship candidates: DL19/DL20 top-100, WikiQA, TrecQA) or,
for candidates the run carries no text for, from the Lucene index the run came from: `index=DIR`, or the
dataset's own index when the pipeline runs on a dataset (`bind`), built only when some candidate of the run
actually lacks a text. Subclasses implement `score(pairs) -> list[float]` and `config()`.

A stage's identity (`repr`, `config()`, cache key) is fixed when it is made: running it never changes it (the
index it resolves from a bound dataset is kept apart, in `_resolved_index`).
"""
from __future__ import annotations

import copy
from typing import Callable

from pipeline.data.runs import Run, Topics
from pipeline.errors import ConfigError
from pipeline.rerank.pairs import Pair, pairs_of, scores_by_query
from pipeline.stage import Stage


class Reranker(Stage):
    needs_run = True
    cacheable = True

    index: str | None = None  # given by the user: part of the config
    _dataset = None           # the bound dataset, whose index is built only if a candidate lacks a text
    _resolved_index: str | None = None

    def score(self, pairs: list[Pair]) -> list[float]:
        raise NotImplementedError

    def bind(self, dataset) -> "Reranker":
        """Remember the dataset (for its index, should a candidate of the run come without a text)."""
        if self.index is not None or "docs" not in getattr(dataset, "provides", ()):
            return self
        bound = copy.copy(self)
        bound._dataset = dataset
        return bound

    def _index_path(self) -> str | None:
        if self.index is not None:
            return self.index
        if self._resolved_index is None and self._dataset is not None:
            from pipeline.retrieve.index import dataset_index

            self._resolved_index = str(dataset_index(self._dataset))
        return self._resolved_index

    def candidate_texts(self, run: Run) -> dict[str, str]:
        """docid -> text for every candidate of `run`: the run's own texts, the rest from the index."""
        return run_texts(run, self._index_path, repr(self))

    def transform(self, topics: Topics, run: Run | None) -> Run:
        pairs = pairs_of(topics, run, self.candidate_texts(run))
        reranked = scores_by_query(pairs, self.score(pairs), run.ranking)
        return Run.from_scores(reranked, run.texts, tag=self.name, doc_fields=run.doc_fields)

    def fingerprint(self) -> str:
        """The bound dataset and the build record of the index given (a bound dataset's index is built from it)."""
        from pipeline.retrieve.lucene import read_index_metadata

        dataset = self._dataset.name if self._dataset is not None else ""
        return f"{dataset}\x1f{read_index_metadata(self.index) if self.index else ''}"


def run_texts(run: Run, index_path: Callable[[], str | None], who: str) -> dict[str, str]:
    """docid -> text for every candidate of `run`: the run's own texts, the rest from the Lucene index at
    `index_path()` (called only when some candidate lacks a text)."""
    missing = {d for hits in run.ranking.values() for d, _ in hits if d not in run.texts}
    if not missing:
        return run.texts
    path = index_path()
    if path is None:
        raise ConfigError(f"{who}: the run carries no text for {len(missing)} candidates (e.g. "
                          f"{sorted(missing)[0]!r}) and no index is given: pass index=DIR")
    from pipeline.retrieve.bm25 import open_index

    index = open_index(path)
    texts = dict(run.texts)
    for docid in sorted(missing):
        text = index.doc_text(docid)
        if text is None:
            raise ConfigError(f"{who}: document {docid!r} is not in the index {path}")
        texts[docid] = text
    return texts

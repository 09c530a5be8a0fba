"""What every reranker shares: reading the input run's candidates with their texts, scoring, re-sorting.

A reranker scores (query, candidate text) pairs. Texts come from the run itself (datasets that ship candidates:
DL19/DL20 top-100, WikiQA, TrecQA) or, for candidates the run carries no text for, from the Lucene index the
run came from: `index=DIR`, or the dataset's own index when the pipeline runs on a dataset (`bind`), built only
when some candidate of the run actually lacks a text.
Subclasses implement `score_pairs(queries, texts) -> list[float]` (one score per pair) and `config()`.
"""
from __future__ import annotations

import copy

from pipeline.data.runs import Run, Topics
from pipeline.errors import ConfigError
from pipeline.stage import Stage


class Reranker(Stage):
    needs_run = True
    cacheable = True

    index: str | None = None
    _dataset = None  # the bound dataset, whose index is built only if a candidate lacks a text

    def score_pairs(self, queries: list[str], texts: list[str]) -> list[float]:
        raise NotImplementedError

    def bind(self, dataset) -> "Reranker":
        """Remember the dataset (for its index, should a candidate of the run come without a text)."""
        if self.index is not None or "docs" not in getattr(dataset, "provides", ()):
            return self
        bound = copy.copy(self)
        bound._dataset = dataset
        return bound

    def candidate_texts(self, run: Run) -> dict[str, str]:
        """docid -> text for every candidate of `run`: the run's own texts, the rest from the index."""
        missing = {d for hits in run.ranking.values() for d, _ in hits if d not in run.texts}
        if not missing:
            return run.texts
        if self.index is None and self._dataset is not None:
            from pipeline.retrieve.index import dataset_index

            self.index = str(dataset_index(self._dataset))
        if self.index is None:
            raise ConfigError(f"{self!r}: the run carries no text for {len(missing)} candidates (e.g. "
                              f"{sorted(missing)[0]!r}) and no index is given: pass index=DIR")
        from pipeline.retrieve.bm25 import open_index

        index = open_index(self.index)
        texts = dict(run.texts)
        for docid in sorted(missing):
            text = index.doc_text(docid)
            if text is None:
                raise ConfigError(f"{self!r}: document {docid!r} is not in the index {self.index}")
            texts[docid] = text
        return texts

    def transform(self, topics: Topics, run: Run | None) -> Run:
        texts = self.candidate_texts(run)
        pairs = [(qid, docid) for qid, hits in run.ranking.items() for docid, _ in hits]
        scores = self.score_pairs([topics[qid] for qid, _ in pairs], [texts[docid] for _, docid in pairs])
        reranked: dict[str, dict[str, float]] = {qid: {} for qid in run.ranking}
        for (qid, docid), score in zip(pairs, scores):
            reranked[qid][docid] = float(score)
        return Run.from_scores(reranked, run.texts, tag=self.name)

    def fingerprint(self) -> str:
        """The bound dataset and the build record of the index texts come from."""
        from pipeline.retrieve.lucene import read_index_metadata

        dataset = self._dataset.name if self._dataset is not None else ""
        return f"{dataset}\x1f{read_index_metadata(self.index) if self.index else ''}"

"""What every reranker stage shares: the input run's candidates with their texts, as pairs; scoring; re-sorting.
And `overlap()`, the non-learned floor (pipeline/rerank/overlap.py).

A reranker scores pairs (pipeline/rerank/pairs.py `Pair`: qid, docid, query, candidate text, the topic's extra
fields and the candidate's, which the run carries in `doc_fields` when its dataset ships them, e.g. a tweet's
URL). Texts come from the run itself (datasets that ship candidates: DL19/DL20 top-100, WikiQA, TrecQA; a run
file over such a dataset gets them too, pipeline/data/sets/local.py `WithFiles`) or, for candidates the run
carries no text for, from a Lucene index: `index=DIR`, or the dataset's own. Bind opens that index, only when
some candidate may lack a text: always after a retriever, and for known candidates (a run file, a dataset's
candidates) only when one of them does. A candidate whose encoding a store holds needs no text.
Subclasses implement `score(pairs) -> list[float]` and `config()`.
"""
from __future__ import annotations

from pipeline.binding import Binding
from pipeline.data.digests import content_digest
from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.errors import ConfigError
from pipeline.rerank.overlap import WordStatistics, overlap_scores
from pipeline.rerank.pairs import CandidateTexts, Pair, missing_texts, pairs_of, scores_by_query
from pipeline.stage import Stage
from pipeline.stages import register


class Reranker(Stage):
    needs_run = True
    cacheable = True

    index: str | None = None  # given by the user: part of the config
    _texts: CandidateTexts | None = None  # resolved by bind
    _texts_index: str = ""  # the content digest of the index texts come from (the stage cache's fingerprint)

    def score(self, pairs: list[Pair]) -> list[float]:
        raise NotImplementedError

    def stored(self, docid: str) -> bool:
        """Whether the candidate's encoding is stored, so that it needs no text (late-interaction models)."""
        return False

    def resolve(self, binding: Binding) -> None:
        """Where the candidates' texts come from: the run's own, else `index=DIR` or the dataset's index."""
        candidates = binding.candidates
        lacking = candidates is None or any(not self.stored(d) for d in missing_texts(candidates))
        path = self.index or (binding.dataset_index() if lacking else None)
        if path is not None and lacking:
            from pipeline.retrieve.index import open_index

            self._texts = CandidateTexts(open_index(path), repr(self))
            self._texts_index = content_digest(path)
        else:
            self._texts = CandidateTexts(None, repr(self))
        if candidates is not None:  # a missing text fails here, before any model loads or scores
            self._texts.of(candidates, self.stored)

    def transform(self, topics: Topics, run: Run | None) -> Run:
        pairs = pairs_of(topics, run, self._texts.of(run, self.stored))
        reranked = scores_by_query(pairs, self.score(pairs), run.ranking)
        return Run.from_scores(reranked, run.texts, tag=self.name, doc_fields=run.doc_fields)

    def fingerprint(self) -> str:
        """The content digest of the index that candidate texts come from."""
        return self._texts_index


@register
class Overlap(Reranker):
    """Word overlap (`idf=false`) or IDF-weighted word overlap (`idf=true`) of query and candidate; the IDF is the
    collection's, fixed at bind (pipeline/rerank/overlap.py says which collection, when)."""

    name = "overlap"
    _statistics: WordStatistics | None = None  # resolved by bind (idf=true)

    def __init__(self, idf: bool = True, index: str | None = None):
        if not isinstance(idf, bool):
            raise ConfigError(f"overlap: idf={idf!r}; expected true or false", field="idf")
        self.idf, self.index = idf, index

    def config(self) -> dict:
        return {"idf": self.idf} | ({"index": self.index} if self.index else {})

    def resolve(self, binding: Binding) -> None:
        super().resolve(binding)
        self._statistics = self.statistics(binding) if self.idf else None

    def statistics(self, binding: Binding) -> WordStatistics:
        """The collection's N and df: `index=DIR`'s; else the table over a dataset's shipped candidate texts; else
        the dataset's index; else the table over the texts of the run known at bind."""
        if self.index:
            return _index_statistics(self.index)
        dataset = binding.dataset
        shipped = dataset.run() if dataset is not None and "run" in dataset.provides else None
        if shipped is not None and shipped.ranking and not missing_texts(shipped):
            return WordStatistics.of_texts(_candidate_texts(shipped, shipped.texts), dataset.name)
        index = binding.dataset_index()
        if index is not None:
            return _index_statistics(index)
        if binding.candidates is not None:
            texts = self._texts.of(binding.candidates)
            return WordStatistics.of_texts(_candidate_texts(binding.candidates, texts), "the run it was bound to")
        raise ConfigError("overlap(idf=true) takes its IDF from a collection, and has none: run it on a dataset, "
                          "give it an index (overlap(index=DIR)), or use overlap(idf=false)", field="idf")

    def fingerprint(self) -> str:
        """The index texts come from, and (idf=true) the collection the IDF is taken from."""
        source = f"\x1fidf: {self._statistics.source}" if self._statistics is not None else ""
        return super().fingerprint() + source

    def score(self, pairs: list[Pair]) -> list[float]:
        return overlap_scores([p.query for p in pairs], [p.text for p in pairs], self._statistics)


def _index_statistics(path: str) -> WordStatistics:
    from pipeline.retrieve.index import open_index

    return WordStatistics.of_index(open_index(path), content_digest(path))  # the index's content, as its cache key


def _candidate_texts(run: Run, texts: dict[str, str]) -> list[str]:
    """The texts of the candidates of `run` (each docid once)."""
    return [texts[docid] for docid in dict.fromkeys(d for hits in run.ranking.values() for d, _ in hits)]

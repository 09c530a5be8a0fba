"""BM25 (optionally + RM3) first-stage retrieval as a Stage (the command `irpipe search`: pipeline/commands/search.py).

Rankings and scores are identical to `python -m pyserini.search.lucene --bm25 --k1 K1 --b B --hits N` on the
same index and topics (see pipeline/retrieve/lucene.py for how, and tests/retrieve/test_bm25.py for the proof).
Bind resolves the index (`index=DIR`, else the dataset's own, built once) and opens it, or, on the ray engine,
hands the search to the cluster: each worker opens the index once and searches shards of the topics.
"""
from __future__ import annotations

import copy
from pathlib import Path

from pipeline.binding import Binding
from pipeline.data.digests import content_digest
from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.errors import ConfigError
from pipeline.log import progress
from pipeline.retrieve.index import CHINESE_TERMS, LANGUAGES, open_index
from pipeline.retrieve.lucene import LuceneIndex
from pipeline.stage import Stage
from pipeline.stages import register
from pipeline.validate import at_least, between, choice


@register
class BM25(Stage):
    """Lucene BM25 over an Anserini index. `index` may be left out when the pipeline runs on a dataset with a
    corpus: the dataset's index is then built (once, cached) and used."""

    name = "bm25"
    cacheable = True
    _index_path: str | None = None   # resolved by bind
    _lucene: LuceneIndex | None = None  # opened by bind (local engine)
    _cluster = None                  # the EngineOptions of a cluster to search on (ray engine)

    def __init__(self, index: str | Path | None = None, k1: float = 0.9, b: float = 0.4, hits: int = 1000,
                 threads: int = 1, rm3: bool = False, fb_terms: int = 10, fb_docs: int = 10,
                 original_query_weight: float = 0.5, language: str | None = None, segment: str | None = None):
        at_least(self.name, "k1", k1, 0)
        between(self.name, "b", b, 0, 1)
        for name, value in (("hits", hits), ("threads", threads), ("fb_terms", fb_terms), ("fb_docs", fb_docs)):
            at_least(self.name, name, value, 1, integer=True)
        between(self.name, "original_query_weight", original_query_weight, 0, 1)
        self.index = str(index) if index is not None else None
        self.k1, self.b, self.hits, self.threads = float(k1), float(b), int(hits), int(threads)
        self.rm3, self.fb_terms, self.fb_docs = bool(rm3), int(fb_terms), int(fb_docs)
        self.original_query_weight = float(original_query_weight)
        if language is not None:
            choice(self.name, "language", language, LANGUAGES)
        self.language = language
        if segment is not None:
            choice(self.name, "segment", segment, CHINESE_TERMS)
        self.segment = segment  # Chinese datasets: index jieba words or CJK bigrams (default: DEFAULT_CHINESE_TERMS)

    def config(self) -> dict:
        config = {"index": self.index, "k1": self.k1, "b": self.b, "hits": self.hits}
        if self.rm3:
            config.update(rm3=True, fb_terms=self.fb_terms, fb_docs=self.fb_docs,
                          original_query_weight=self.original_query_weight)
        if self.language:
            config["language"] = self.language
        if self.segment:
            config["segment"] = self.segment
        return {k: v for k, v in config.items() if v is not None}

    def fingerprint(self) -> str:
        """The searched index's content digest: a rebuilt or replaced index invalidates cached runs."""
        return content_digest(self._index_path) if self._index_path else ""

    @property
    def index_path(self) -> str | None:
        """The index searched: `index`, or the dataset's that bind resolved."""
        return self._index_path

    # -- bind ----------------------------------------------------------------------------------------------------
    def resolve(self, binding: Binding) -> None:
        """The index: `index=DIR`, else the dataset's own (built on first use); opened here, or on the cluster's
        workers under the ray engine."""
        self._index_path = self.index or binding.dataset_index(self.segment)
        if self._index_path is None:
            where = f"{binding.dataset.name} has no documents" if binding.dataset is not None else \
                "bound to no dataset: stage.bind(DATASET)(topics), stage.run(DATASET)"
            raise ConfigError(f"{self.name} needs an index: {self.name}(index=DIR), or a dataset with a corpus "
                              f"({where})", field="index")
        self._cluster = binding.on_cluster
        if self._cluster is None:
            self._lucene = open_index(self._index_path, self.language)

    def for_worker(self) -> "BM25":
        """This stage unbound but for its resolved index, for a cluster worker to bind (open) once."""
        worker = copy.copy(self)
        worker.index, worker.bound, worker._cluster, worker._lucene = self._index_path, False, None, None
        return worker

    # -- compute -------------------------------------------------------------------------------------------------
    def transform(self, topics: Topics, run: Run | None) -> Run:
        if self._cluster is not None:
            from pipeline.retrieve.on_cluster import search_on_cluster

            return search_on_cluster(self.for_worker(), topics, self._cluster)[0]
        return Run(self.rankings(self._lucene, topics), tag=self.run_tag())

    def run_tag(self) -> str:
        return "bm25+rm3" if self.rm3 else "bm25"

    def rankings(self, index: LuceneIndex, topics: Topics) -> dict[str, list[tuple[str, float]]]:
        with progress(desc=self.name, total=len(topics), unit="q") as bar:
            if self.rm3:
                return index.search_rm3(topics.queries, self.hits, self.k1, self.b, self.threads, self.fb_terms,
                                        self.fb_docs, self.original_query_weight, progress=bar)
            return index.search_many(topics.queries, self.hits, self.k1, self.b, self.threads, progress=bar)

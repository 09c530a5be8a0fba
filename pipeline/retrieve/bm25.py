"""BM25 (optionally + RM3) first-stage retrieval as a Stage (the command `irpipe search`: pipeline/commands/search.py).

Rankings and scores are identical to `python -m pyserini.search.lucene --bm25 --k1 K1 --b B --hits N` on the
same index and topics (see pipeline/retrieve/lucene.py for how, and tests/retrieve/test_bm25.py for the proof).
"""
from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

from pipeline.data.runs import Run, Topics
from pipeline.errors import ConfigError
from pipeline.log import progress
from pipeline.retrieve.index import LANGUAGES, dataset_index
from pipeline.retrieve.lucene import LuceneIndex, read_index_metadata
from pipeline.stage import Stage, check_range, register


# How a Chinese dataset's own index splits text into terms: jieba words (indexed pre-tokenized, queries cut the
# same way) or Lucene's CJK bigrams. jieba is the default: better on LCQMC question retrieval (eval/KEYWORDS.md).
CHINESE_TERMS = ("jieba", "bigram")
DEFAULT_CHINESE_TERMS = "jieba"


def dataset_index_for(dataset, segment: str | None = None) -> Path:
    """The dataset's own index (built on first use); for a Chinese dataset, of jieba words or CJK bigrams."""
    language = getattr(dataset, "language", "en")
    if segment is not None and language != "zh":
        raise ConfigError(f"segment={segment} is for Chinese datasets; {dataset.name} is {language}")
    segment = segment or (DEFAULT_CHINESE_TERMS if language == "zh" else None)
    return dataset_index(dataset, segmenter="jieba" if segment == "jieba" else None)


@functools.lru_cache(maxsize=8)
def open_index(index_dir: str, language: str | None = None) -> LuceneIndex:
    """Indexes stay open for the life of the process (one JVM, many stages)."""
    return LuceneIndex(index_dir, language)


@register
class BM25(Stage):
    """Lucene BM25 over an Anserini index. `index` may be left out when the pipeline runs on a dataset with a
    corpus: the dataset's index is then built (once, cached) and used."""

    name = "bm25"
    cacheable = True

    def __init__(self, index: str | Path | None = None, k1: float = 0.9, b: float = 0.4, hits: int = 1000,
                 threads: int = 1, rm3: bool = False, fb_terms: int = 10, fb_docs: int = 10,
                 original_query_weight: float = 0.5, language: str | None = None, segment: str | None = None):
        check_range("k1", k1, low=0)
        check_range("b", b, low=0, high=1)
        for name, value in (("hits", hits), ("threads", threads), ("fb_terms", fb_terms), ("fb_docs", fb_docs)):
            check_range(name, value, low=1, integer=True)
        check_range("original_query_weight", original_query_weight, low=0, high=1)
        self.index = str(index) if index is not None else None
        self.k1, self.b, self.hits, self.threads = float(k1), float(b), int(hits), int(threads)
        self.rm3, self.fb_terms, self.fb_docs = bool(rm3), int(fb_terms), int(fb_docs)
        self.original_query_weight = float(original_query_weight)
        if language is not None and language not in LANGUAGES:
            raise ConfigError(f"language must be one of {', '.join(LANGUAGES)}, got {language!r}", field="language")
        self.language = language
        if segment is not None and segment not in CHINESE_TERMS:
            raise ConfigError(f"segment must be one of {', '.join(CHINESE_TERMS)}, got {segment!r}")
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
        """The index's build record: a rebuilt index invalidates cached runs."""
        return json.dumps(read_index_metadata(self.index), sort_keys=True) if self.index else ""

    def bind(self, dataset) -> "BM25":
        """Without an explicit index, search the dataset's own (built on first use, cached)."""
        if self.index is not None:
            return self
        bound = copy.copy(self)
        bound.index = str(dataset_index_for(dataset, self.segment))
        return bound

    def transform(self, topics: Topics, run: Run | None) -> Run:
        if self.index is None:
            raise ConfigError("bm25 needs an index: bm25(index=DIR), or run the pipeline on a dataset with a corpus")
        from pipeline import engine

        if engine.current() is not None:  # the ray engine: shards of the topics on a cluster's workers
            from pipeline.engine.tasks import search_on_cluster

            return search_on_cluster(self, topics, engine.current())[0]
        index = open_index(self.index, self.language)
        if self.rm3:
            ranking = index.search_rm3(topics.queries, self.hits, self.k1, self.b, self.threads, self.fb_terms,
                                       self.fb_docs, self.original_query_weight)
        else:
            with progress(desc="bm25", total=len(topics), unit="q") as bar:
                ranking = index.search_many(topics.queries, self.hits, self.k1, self.b, self.threads, progress=bar)
        return Run(ranking, tag="bm25+rm3" if self.rm3 else "bm25")

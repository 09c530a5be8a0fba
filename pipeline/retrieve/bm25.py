"""BM25 (optionally + RM3) first-stage retrieval as a Stage, and `irpipe search`.

Rankings and scores are identical to `python -m pyserini.search.lucene --bm25 --k1 K1 --b B --hits N` on the
same index and topics (see pipeline/retrieve/lucene.py for how, and tests/retrieve/test_bm25.py for the proof).
"""
from __future__ import annotations

import argparse
import copy
import functools
import json
from pathlib import Path

from pipeline.data.runs import RUN_FORMATS, Run, Topics
from pipeline.errors import ConfigError
from pipeline.log import logger, progress
from pipeline.retrieve.lucene import LuceneIndex, read_index_metadata
from pipeline.stage import Stage, register


# How a Chinese dataset's own index splits text into terms: jieba words (indexed pre-tokenized, queries cut the
# same way) or Lucene's CJK bigrams. jieba is the default: better on LCQMC question retrieval (eval/KEYWORDS.md).
CHINESE_TERMS = ("jieba", "bigram")
DEFAULT_CHINESE_TERMS = "jieba"


def dataset_index_for(dataset, segment: str | None = None) -> Path:
    """The dataset's own index (built on first use); for a Chinese dataset, of jieba words or CJK bigrams."""
    from pipeline.retrieve.index import dataset_index

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
        if hits < 1:
            raise ValueError(f"hits must be >= 1, got {hits}")
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.index = str(index) if index is not None else None
        self.k1, self.b, self.hits, self.threads = float(k1), float(b), int(hits), int(threads)
        self.rm3, self.fb_terms, self.fb_docs = bool(rm3), int(fb_terms), int(fb_docs)
        self.original_query_weight = float(original_query_weight)
        self.language = language
        if segment is not None and segment not in CHINESE_TERMS:
            raise ValueError(f"segment must be one of {', '.join(CHINESE_TERMS)}, got {segment!r}")
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
        index = open_index(self.index, self.language)
        if self.rm3:
            ranking = index.search_rm3(topics.queries, self.hits, self.k1, self.b, self.threads, self.fb_terms,
                                       self.fb_docs, self.original_query_weight)
        else:
            with progress(desc="bm25", total=len(topics), unit="q") as bar:
                ranking = index.search_many(topics.queries, self.hits, self.k1, self.b, self.threads, progress=bar)
        return Run(ranking, tag="bm25+rm3" if self.rm3 else "bm25")


# -- irpipe search ------------------------------------------------------------------------------------------

def define_search_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--index", metavar="DIR", help="Lucene index (default: the dataset's own, built on first use)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--topics", metavar="FILE", help="topics file (TSV qid<TAB>query, TREC SGML, CACM, JSONL)")
    source.add_argument("--dataset", metavar="NAME", help="registered dataset whose topics to search")
    parser.add_argument("--output", required=True, metavar="RUN", help="run file to write (atomically)")
    parser.add_argument("--k1", type=float, default=0.9, help="BM25 k1 (default 0.9)")
    parser.add_argument("--b", type=float, default=0.4, help="BM25 b (default 0.4)")
    parser.add_argument("--hits", type=int, default=1000, metavar="N", help="hits per query (default 1000)")
    parser.add_argument("--threads", type=int, default=1, metavar="N", help="search threads (default 1)")
    parser.add_argument("--rm3", action="store_true", help="RM3 pseudo-relevance feedback")
    parser.add_argument("--fb-terms", type=int, default=10, metavar="N", help="RM3 expansion terms (default 10)")
    parser.add_argument("--fb-docs", type=int, default=10, metavar="N", help="RM3 feedback documents (default 10)")
    parser.add_argument("--original-query-weight", type=float, default=0.5, metavar="W",
                        help="RM3 weight of the original query (default 0.5)")
    parser.add_argument("--language", metavar="LANG", help="analyzer language (default: as the index was built)")
    parser.add_argument("--segment", choices=CHINESE_TERMS, help=f"Chinese --dataset: index jieba words or CJK bigrams "
                                                                 f"(default {DEFAULT_CHINESE_TERMS})")
    parser.add_argument("--output-format", choices=RUN_FORMATS, default="trec", help="trec (default) or msmarco")
    parser.add_argument("--run-tag", default="bm25", metavar="TAG", help="run tag in the TREC file (default bm25)")


define_args = define_search_args


def main(args: argparse.Namespace) -> int:
    from pipeline.data.topics import read_topics

    if args.topics:
        topics = read_topics(args.topics)
        index = args.index
    else:
        from pipeline.data.registry import get_dataset

        dataset = get_dataset(args.dataset)
        topics = dataset.topics()
        index = args.index or dataset_index_for(dataset, args.segment)
    if not index:
        raise ConfigError("--index DIR is required with --topics")
    stage = BM25(index, args.k1, args.b, args.hits, args.threads, args.rm3, args.fb_terms, args.fb_docs,
                 args.original_query_weight, args.language)
    run = stage(topics)
    run.write(args.output, format=args.output_format, tag=args.run_tag)
    logger.info("wrote %s (%d queries, %d hits)", args.output, len(run), run.num_hits())
    return 0

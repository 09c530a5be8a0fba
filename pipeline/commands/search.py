"""`irpipe search`: BM25 (optionally RM3) retrieval of a dataset's topics (or a topics file) into a run file.

Pyserini's command lines work with their flags' meaning (`python -m pyserini.search.lucene --bm25 --index DIR
--topics NAME|FILE --output RUN --hits N --threads N --batch-size N --output-format trec|msmarco`): `--bm25` is
accepted and changes nothing (BM25 is the default and only model), `--batch-size` is accepted and changes
nothing (every query goes to Lucene in one call over --threads threads). docs/interop.md ("Pyserini")
lists the differences.
"""
from __future__ import annotations

import argparse

from pipeline.commands.data_args import add_data_args, dataset_from_args
from pipeline.commands.engine_args import add_engine_args, engine_from_args
from pipeline.commands.flags import checked
from pipeline.data.outputs import check_writable
from pipeline.data.runs import RUN_FORMATS, check_run_tag
from pipeline.log import logger
from pipeline.validate import at_least
from pipeline.retrieve.index import CHINESE_TERMS, DEFAULT_CHINESE_TERMS
from pipeline.stages.bm25 import BM25


def define_args(parser: argparse.ArgumentParser) -> None:
    add_data_args(parser, parts=("topics", "corpus", "index"), what="topics and the index (default: the dataset's own, "
                                                             "built on first use)")
    parser.add_argument("--output", required=True, metavar="RUN", help="run file to write (atomically)")
    parser.add_argument("--bm25", action="store_true", help="BM25 (Pyserini's flag; BM25 is the default and only "
                                                            "model here, so it changes nothing)")
    parser.add_argument("--k1", type=float, default=0.9, help="BM25 k1 (default 0.9)")
    parser.add_argument("--b", type=float, default=0.4, help="BM25 b (default 0.4)")
    parser.add_argument("--hits", type=int, default=1000, metavar="N", help="hits per query (default 1000)")
    parser.add_argument("--threads", type=int, default=1, metavar="N", help="search threads (default 1)")
    parser.add_argument("--batch-size", type=int, default=1, metavar="N",
                        help="queries per batch in Pyserini; accepted, and it changes nothing here: all queries go to "
                             "Lucene in one call, searched on --threads threads (the run is the same either way)")
    parser.add_argument("--rm3", action="store_true", help="RM3 pseudo-relevance feedback")
    parser.add_argument("--fb-terms", type=int, default=10, metavar="N", help="RM3 expansion terms (default 10)")
    parser.add_argument("--fb-docs", type=int, default=10, metavar="N", help="RM3 feedback documents (default 10)")
    parser.add_argument("--original-query-weight", type=float, default=0.5, metavar="W",
                        help="RM3 weight of the original query (default 0.5)")
    parser.add_argument("--language", metavar="LANG", help="analyzer language (default: as the index was built)")
    parser.add_argument("--segment", choices=CHINESE_TERMS, help=f"Chinese --dataset: index jieba words or CJK bigrams "
                                                                 f"(default {DEFAULT_CHINESE_TERMS})")
    parser.add_argument("--output-format", choices=RUN_FORMATS, default="trec", help="trec (default) or msmarco")
    parser.add_argument("--run-tag", default="bm25", metavar="TAG", type=checked(check_run_tag, "search", "--run-tag"),
                        help="run tag in the TREC file, one word (default bm25)")
    add_engine_args(parser, shards=("queries",))


def main(args: argparse.Namespace) -> int:
    from pipeline.experiment import run_pipeline

    options = engine_from_args(args)  # checked before any work, with the output
    at_least("search", "--batch-size", args.batch_size, 1, integer=True)
    check_writable(args.output, "file")
    dataset = dataset_from_args(args)
    stage = BM25(args.index, args.k1, args.b, args.hits, args.threads, args.rm3, args.fb_terms, args.fb_docs,
                 args.original_query_weight, args.language, args.segment)
    run, _, _ = run_pipeline(stage, dataset, use_cache=False, engine=options)
    run.write(args.output, format=args.output_format, tag=args.run_tag)
    logger.info("wrote %s (%d queries, %d hits)", args.output, len(run), run.num_hits())
    return 0

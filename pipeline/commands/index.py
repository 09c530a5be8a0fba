"""`irpipe index`: a Lucene index from JSONL, TSV, TREC SGML files or a dataset's corpus."""
from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path
from typing import Callable, Iterator

from pipeline.data.outputs import check_writable
from pipeline.retrieve.index import DUPLICATES, LANGUAGES, build_index
from pipeline.retrieve.lucene import SEGMENTERS


def define_args(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", metavar="PATH", help="JSONL / TSV / TREC SGML file or folder (optionally .gz)")
    source.add_argument("--dataset", metavar="NAME|DIR", help="dataset (or dataset folder) whose corpus to index")
    parser.add_argument("--output", required=True, metavar="DIR", help="index folder to create")
    parser.add_argument("--format", choices=("jsonl", "tsv", "trec"), help="input format (default: detected)")
    parser.add_argument("--threads", type=int, default=2, metavar="N", help="indexing threads (default 2)")
    parser.add_argument("--language", default="en", choices=LANGUAGES, help="analyzer language (zh: CJK bigrams)")
    parser.add_argument("--pretokenized", action="store_true", help="text is already segmented: whitespace analyzer")
    parser.add_argument("--segment", choices=SEGMENTERS, metavar="SEGMENTER",
                        help="segment the text first and index it pre-tokenized (jieba: Chinese words)")
    parser.add_argument("--no-positions", dest="store_positions", action="store_false", help="do not store positions")
    parser.add_argument("--no-docvectors", dest="store_docvectors", action="store_false",
                        help="do not store document vectors (RM3 needs them)")
    parser.add_argument("--no-raw", dest="store_raw", action="store_false", help="do not store the raw documents")
    parser.add_argument("--memory-buffer", type=int, default=1024, metavar="MB",
                        help="Lucene RAM buffer; bounds the indexing JVM's heap (default 1024)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing index")
    parser.add_argument("--duplicates", choices=DUPLICATES, default="refuse",
                        help="a repeated document id: refuse (default: an error naming its line) or keep-first "
                             "(index the first occurrence only)")


def _docs_from_args(args) -> tuple[Iterator[dict], str, Callable | None]:
    """(documents, source, locate: position -> (file, line) for error messages, or None for a dataset)."""
    if args.dataset:
        from pipeline.data.registry import get_dataset

        return get_dataset(args.dataset).docs(), f"dataset:{args.dataset}", None
    from pipeline.data.corpus import doc_location, iter_docs

    return (iter_docs(args.input, args.format), str(Path(args.input).resolve()),
            functools.partial(doc_location, args.input, args.format))


def main(args: argparse.Namespace) -> int:
    check_writable(args.output, "folder")  # before any document is read
    docs, source, locate = _docs_from_args(args)
    metadata = build_index(docs, args.output, source, threads=args.threads, language=args.language,
                           pretokenized=args.pretokenized, store_positions=args.store_positions,
                           store_docvectors=args.store_docvectors, store_raw=args.store_raw, overwrite=args.overwrite,
                           memory_buffer=args.memory_buffer, segmenter=args.segment,
                           duplicates=args.duplicates, locate=locate)
    print(json.dumps(metadata, indent=2))
    return 0

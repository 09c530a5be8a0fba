"""`irpipe keywords build | extract | presets`: diff-idf domain keyword dictionaries."""
from __future__ import annotations

import argparse
import sys
from collections import Counter

from pipeline.data.outputs import check_writable, keep_or_raise
from pipeline.errors import ConfigError
from pipeline.log import logger, progress
from pipeline.retrieve.keyword_dictionary import LANGUAGES, PRESETS, build_dictionary, corpus_documents
from pipeline.retrieve.keywords import extractor_for


def define_args(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser("build", help="a diff-idf keyword dictionary from a domain-labelled corpus",
                               allow_abbrev=False)
    build.add_argument("--corpus", nargs="+", required=True, metavar="NAME|FILE",
                       help=f"a preset ({', '.join(PRESETS)}), registered datasets, or JSONL files")
    build.add_argument("--output", required=True, metavar="DICT.tsv", help="dictionary file to write (atomically)")
    build.add_argument("--domain-field", default=None, metavar="FIELD", help="the domain label (default: domain)")
    build.add_argument("--text-field", metavar="FIELD", help="the text (default: text for records/files, contents for docs)")
    build.add_argument("--language", choices=LANGUAGES, help="zh: jieba words; en: Lucene's English analyzer "
                                                             "(default: the corpus's)")
    build.add_argument("--threshold", type=float, default=1.0, metavar="X", help="keep diff-idf > X (default 1.0)")
    build.add_argument("--top-k-per-domain", type=int, metavar="N", help="keep at most N words per domain")
    build.add_argument("--min-df", type=int, default=2, metavar="N", help="in at least N documents of the domain (default 2)")
    build.add_argument("--min-length", type=int, default=2, metavar="N", help="words of at least N characters (default 2)")
    extract = actions.add_parser("extract", help="the keywords of texts (arguments, else lines of stdin)",
                                 allow_abbrev=False)
    extract.add_argument("--dict", required=True, metavar="NAME|FILE", help=f"a preset ({', '.join(PRESETS)}) or a file")
    extract.add_argument("--top", type=int, metavar="N", help="at most N keywords per text")
    extract.add_argument("texts", nargs="*", metavar="TEXT")
    actions.add_parser("presets", help="the shipped domain corpora")


def main(args: argparse.Namespace) -> int:
    if args.action == "presets":
        for name, preset in PRESETS.items():
            print(f"{name}\t{preset.language}\t{'+'.join(preset.datasets)}\t{preset.description}")
        return 0
    if args.action == "extract":
        extractor = extractor_for(args.dict, args.top)
        for text in args.texts or (line.rstrip("\n") for line in sys.stdin):
            found = extractor.keywords(text)
            print(text + "\t" + " ".join(f"{k.word}({k.domain}:{k.score:.2f})" for k in found))
        return 0
    if args.top_k_per_domain is not None and args.top_k_per_domain < 1:
        raise ConfigError("--top-k-per-domain must be >= 1")
    check_writable(args.output, "file")  # before the corpus is read
    preset = args.corpus[0] if len(args.corpus) == 1 and args.corpus[0] in PRESETS else None
    if preset and (args.domain_field or args.text_field):
        raise ConfigError(f"{preset} is a preset with its own fields; give dataset names to choose fields")
    documents, language = corpus_documents(args.corpus, args.domain_field or "domain", args.text_field)
    language = args.language or language
    if language is None:
        raise ConfigError("--language zh|en is needed for a corpus file")
    dictionary = build_dictionary(progress(documents, desc="keywords", unit="doc"), language, args.threshold,
                                  args.top_k_per_domain, args.min_df, args.min_length,
                                  settings={"corpus": "+".join(args.corpus)})
    keep_or_raise(args.output, dictionary.save, "dictionary")
    counts = Counter(entry.domain for entry in dictionary)
    logger.info("wrote %s: %d keywords over %d domains", args.output, len(dictionary), len(counts))
    for domain in dictionary.domains():
        best = [e.word for e in dictionary if e.domain == domain][:8]
        print(f"{domain}\t{counts[domain]}\t{' '.join(best)}")
    return 0

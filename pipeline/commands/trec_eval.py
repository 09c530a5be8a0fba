"""`irpipe trec_eval [-q] [-c] [-n] [-J] [-l N] [-M N] [-m MEASURE[.PARAMS]]... QRELS RUN`: trec_eval's command
line and output, computed with irpipe's measures (pipeline/trec_eval.py), and with --msmarco (or an MS MARCO run)
the block of MS MARCO's official msmarco_passage_eval.py after it."""
from __future__ import annotations

import argparse
import sys

from pipeline.data.qrels import read_qrels
from pipeline.data.runs import read_run
from pipeline.trec_eval import is_msmarco_run, msmarco_block, trec_eval_report


def define_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("qrels", metavar="QRELS", help="qrels file (trec_eval's rel_info_file)")
    parser.add_argument("run", metavar="RUN", help="run file, TREC or MS MARCO format (trec_eval's results_file)")
    parser.add_argument("-m", "--measure", action="append", dest="measures", metavar="MEASURE[.PARAMS]",
                        help="trec_eval's measure (map, P.5,10, ndcg_cut.10, recip_rank, ...) or nickname (official, "
                             "the default; all_trec; set); repeat -m for several")
    parser.add_argument("-q", "--query_eval_wanted", action="store_true", dest="per_query",
                        help="each query's values too, before the summary")
    parser.add_argument("-c", "--complete_rel_info_wanted", action="store_true", dest="complete",
                        help="average over every query of the qrels, a query the run lacks scoring 0 (default: "
                             "the queries both files have)")
    parser.add_argument("-l", "--level_for_rel", type=int, default=1, dest="rel_level", metavar="N",
                        help="the lowest label that counts as relevant (default 1; 2 for TREC DL)")
    parser.add_argument("-M", "--Max_retrieved_per_topic", type=int, dest="depth", metavar="N",
                        help="only each ranking's first N documents")
    parser.add_argument("-J", "--Judged_docs_only", action="store_true", dest="judged_only",
                        help="only the documents the qrels judge (the others removed before any measure)")
    parser.add_argument("-n", "--nosummary", action="store_false", dest="summary", help="no summary lines")
    parser.add_argument("--msmarco", action="store_true",
                        help="also MS MARCO's msmarco_passage_eval.py block (MRR @10, QueriesRanked); an MS MARCO "
                             "run prints it without the flag")


def main(args: argparse.Namespace) -> int:
    run, qrels = read_run(args.run), read_qrels(args.qrels)
    sys.stdout.write(trec_eval_report(run, qrels, args.measures, complete=args.complete, rel_level=args.rel_level,
                                      depth=args.depth, judged_only=args.judged_only, per_query=args.per_query,
                                      summary=args.summary))
    if args.msmarco or is_msmarco_run(args.run):
        sys.stdout.write(msmarco_block(run, qrels))
    return 0

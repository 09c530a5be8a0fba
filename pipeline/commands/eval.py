"""`irpipe eval`: run files scored with ir-measures -- tables, paired significance tests, per-query plots -- taking
trec_eval's -c, -l, -M, -J, -q and -n (`irpipe trec_eval` prints trec_eval's own output); an MS MARCO run (or
--msmarco) adds the block of MS MARCO's msmarco_passage_eval.py."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline import log
from pipeline.commands.data_args import add_data_args, dataset_from_args
from pipeline.compare import FORMATS, compare, plot_differences, plot_format
from pipeline.significance import CORRECTIONS
from pipeline.data.paths import names_file
from pipeline.data.outputs import check_writable
from pipeline.data.qrels import Qrels, read_qrels
from pipeline.data.runs import read_run
from pipeline.evaluation import DEFAULT_MEASURES, QUERY_SETS, EvalError, parse_measure, parse_measures
from pipeline.trec_eval import is_msmarco_run, msmarco_block



def define_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", metavar="RUN", help="run files (TREC or MS MARCO format)")
    add_data_args(parser, parts=("qrels",), what="the qrels")
    parser.add_argument("-m", "--measures", nargs="+", action="extend", metavar="MEASURE",
                        help=f"ir-measures measures, after the runs (default: {' '.join(DEFAULT_MEASURES)})")
    parser.add_argument("--baseline", metavar="RUN", help="run to test the others against (paired t-test)")
    parser.add_argument("--correction", choices=CORRECTIONS, help="multiple-comparison correction per measure")
    parser.add_argument("--seed-mean", action="store_true",
                        help="runs NAME.seedN.EXT of one system are one row, each query scored by its mean over "
                             "the seeds (the t-test pairs those means); --baseline: any one of its seeds' runs")
    parser.add_argument("-l", "--rel-level", type=int, metavar="N",
                        help="minimum relevance for binary measures (default: the dataset's, else 1; 2 for TREC DL)")
    parser.add_argument("--queries", choices=list(QUERY_SETS), default="qrels",
                        help="'qrels': every judged query, missing ones score 0 (trec_eval -c, default); "
                             "'run': only judged queries the run answers (trec_eval without -c)")
    parser.add_argument("-c", dest="queries", action="store_const", const="qrels",
                        help="trec_eval's -c: --queries qrels, the default, said outright")
    parser.add_argument("-M", "--depth", type=int, metavar="N",
                        help="only each ranking's first N documents (trec_eval -M N)")
    parser.add_argument("-J", "--judged-only", action="store_true",
                        help="only the documents the qrels judge (trec_eval -J)")
    parser.add_argument("-q", "--per-query", action="store_true", help="also print each query's scores (trec_eval -q)")
    parser.add_argument("-n", "--no-summary", dest="summary", action="store_false",
                        help="with -q: the per-query rows alone (trec_eval -n)")
    parser.add_argument("--msmarco", action="store_true",
                        help="also MS MARCO's msmarco_passage_eval.py block (MRR @10, QueriesRanked) of each run, after "
                             "the table; an MS MARCO run prints it without the flag")
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    parser.add_argument("--plot", metavar="FILE.png", help="with --baseline: per-query difference bars")
    parser.add_argument("--plot-measure", metavar="MEASURE", help="measure to plot (default: the first)")


def _load_qrels(args) -> tuple[Qrels, int]:
    """Qrels and the default relevance level, from --qrels or --dataset (a file of qrels alone: level 1)."""
    if args.qrels and not args.dataset:
        return read_qrels(args.qrels), 1
    dataset = dataset_from_args(args)
    return dataset.qrels(), dataset.rel_level


def main(args: argparse.Namespace) -> int:
    if args.correction and not args.baseline:
        raise EvalError("--correction needs --baseline")
    if args.plot and not args.baseline:
        raise EvalError("--plot draws differences against a baseline: add --baseline RUN")
    if args.plot_measure and not args.plot:
        raise EvalError("--plot-measure needs --plot FILE.png")
    if args.plot:  # fail before the work, not after it
        plot_format(args.plot)
        check_writable(args.plot, "file")
    if len(set(args.runs)) != len(args.runs):
        raise EvalError("a run file is given twice")
    stray = [m for m in args.measures or [] if names_file(m)]
    if stray:
        raise EvalError(f"{stray[0]} is a file, not a measure: give the run files before -m MEASURE ... (trec_eval's "
                        f"order, -m MEASURE QRELS RUN, is irpipe trec_eval's: irpipe trec_eval -m map QRELS RUN)")
    if not args.runs:
        raise EvalError("no run file given: irpipe eval RUN [RUN ...] --qrels QRELS (or --dataset NAME)")
    if args.msmarco and args.format != "table":
        raise EvalError("--msmarco prints MS MARCO's block after a table: leave out --format or --msmarco")
    qrels, dataset_level = _load_qrels(args)
    rel_level = args.rel_level if args.rel_level is not None else dataset_level
    measures = parse_measures(args.measures or DEFAULT_MEASURES, rel_level)
    plot_measure = None
    if args.plot_measure:
        plot_measure = str(parse_measure(args.plot_measure, rel_level))
        if plot_measure not in [str(m) for m in measures]:
            raise EvalError(f"--plot-measure {plot_measure} is not among the measures: add it to -m")
    paths = list(args.runs)
    baseline = args.baseline
    if baseline is not None:
        same = [p for p in paths if p == baseline or _same_file(p, baseline)]
        if same:
            baseline = same[0]
        else:
            paths.insert(0, baseline)
    bar = log.progress(paths, desc="reading runs", unit="run") if len(paths) > 1 else paths
    runs = {path: read_run(path) for path in bar}
    result = compare(runs, qrels, measures, baseline=baseline, correction=args.correction, rel_level=rel_level,
                     queries=args.queries, seed_mean=args.seed_mean, depth=args.depth, judged_only=args.judged_only)
    sys.stdout.write(result.format(args.format, per_query=args.per_query, summary=args.summary))
    blocks = [p for p in paths if args.msmarco or (args.format == "table" and is_msmarco_run(p))]
    for path in blocks:
        sys.stdout.write(("" if len(blocks) == 1 else f"{path}:\n") + msmarco_block(runs[path], qrels))
    if args.plot:
        written = plot_differences(result, args.plot, plot_measure)
        log.logger.info("wrote %s", written)
    return 0


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).samefile(b)
    except OSError:
        return False

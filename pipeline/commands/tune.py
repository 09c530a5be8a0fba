"""`irpipe tune`: grid search of a spec's {placeholders} on a tuning set (see pipeline/tune.py)."""
from __future__ import annotations

import argparse
import json

from pipeline.commands.data_args import add_data_args, dataset_from_args
from pipeline.data.files import atomic_write
from pipeline.data.outputs import check_writable, keep_or_raise
from pipeline.tune import best, format_rows, grid_search, parse_grid


def define_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC", help="a pipeline spec with {name} placeholders")
    add_data_args(parser, what="the tuning set (e.g. a dev split)")
    parser.add_argument("--grid", action="append", required=True, metavar="NAME=V1,V2,...",
                        help="values of one placeholder (repeat for several; all combinations are run)")
    parser.add_argument("--measure", default="AP", metavar="MEASURE", help="the measure to maximise (default AP)")
    parser.add_argument("--eval", metavar="MEASURES", help="further measures to report, comma-separated")
    parser.add_argument("--rel-level", type=int, metavar="N", help="binary relevance level (default: the dataset's)")
    parser.add_argument("--output", metavar="JSON", help="write every row (values, spec, scores) here")


def main(args: argparse.Namespace) -> int:
    grid = parse_grid(args.grid)
    if args.output:
        check_writable(args.output, "file")  # before the grid runs
    dataset = dataset_from_args(args)
    extra = [m.strip() for m in (args.eval or "").split(",") if m.strip()]
    rows = grid_search(args.spec, dataset, grid, args.measure, extra, args.rel_level)
    print(format_rows(rows))
    if args.output:
        def write(target):
            with atomic_write(target) as out:
                json.dump({"spec": args.spec, "dataset": dataset.name, "measure": args.measure, "rows": rows,
                           "best": best(rows)}, out, indent=2)
                out.write("\n")

        keep_or_raise(args.output, write, "grid's rows")
    return 0

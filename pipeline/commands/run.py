"""`irpipe run`: a pipeline spec or an experiment file, end to end (run file + scores); alone, the main job."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from pipeline.commands.data_args import add_data_args, dataset_from_args
from pipeline.commands.engine_args import add_engine_args, engine_from_args
from pipeline.data.paths import names_file
from pipeline.data.runs import RUN_FORMATS
from pipeline.errors import ConfigError, InputError
from pipeline.result_text import format_result
from pipeline.experiment import (DEFAULT_EXPERIMENT, LOCAL_RESULTS, RECORDED_RESULTS, Experiment,
                                 run_experiment)
from pipeline.log import logger


def define_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", metavar="SPEC|YAML",
                        help="a pipeline spec such as \"bm25(k1=0.9,b=0.4) %% 100\", or an experiment file (.yaml); "
                             f"none: the main job ({DEFAULT_EXPERIMENT.parent.name}/{DEFAULT_EXPERIMENT.name})")
    add_data_args(parser, what="the data to run a spec on (an experiment file names its own; these replace it)")
    parser.add_argument("--output", metavar="RUN", help="run file (default runs/<name>.trec)")
    parser.add_argument("--output-format", choices=RUN_FORMATS, help="trec (default) or msmarco")
    parser.add_argument("--eval", metavar="MEASURES", help="measures for a spec, comma-separated (RR@10,AP,nDCG@10)")
    parser.add_argument("--baseline", metavar="SPEC", help="a second pipeline to compare with (paired t-tests, "
                                                          "per-query win/loss plot beside the run)")
    parser.add_argument("--seeds", metavar="N,N,...", help="run once per seed, put in for {seed} in the spec, and "
                                                           "report mean ± sd (replaces an experiment file's seeds)")
    parser.add_argument("--rel-level", type=int, metavar="N", help="binary relevance level (default: the dataset's)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a score leaves its expected tolerance")
    parser.add_argument("--no-cache", action="store_true", help="recompute every stage")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--results-dir", metavar="DIR",
                       help=f"where an experiment file's result goes (default {LOCAL_RESULTS}: untracked, the "
                            "checkout stays as it was)")
    where.add_argument("--record", action="store_true",
                       help=f"write the result to {RECORDED_RESULTS}, the recorded results that the leaderboard, "
                            "the reproduction page and the prose tables are made from")
    add_engine_args(parser)


def main(args: argparse.Namespace) -> int:
    target = args.target
    if target is not None and not target.strip():
        raise ConfigError("empty pipeline spec: give a spec such as \"bm25() % 100\", an experiment .yaml file, "
                          "or nothing at all for the main job")
    dataset = dataset_from_args(args, required=False)
    seeds = _seeds(args.seeds) if args.seeds else None
    if target and (target.endswith((".yaml", ".yml")) or names_file(target)):  # a spec of any length: not a file
        experiment = Experiment.load(target)
    elif target:
        if dataset is None:
            raise ConfigError("a pipeline spec needs data: --dataset NAME|DIR, or --topics FILE with --qrels and "
                              "--corpus, --index or --run (or give an experiment .yaml file)")
        name = re.sub(r"[^A-Za-z0-9_-]+", "_", Path(args.output).stem.split(".")[0]) if args.output else ""
        experiment = Experiment.from_dict({"name": name.strip("_") or "run",
                                           "dataset": dataset.name, "pipeline": target,
                                           "measures": args.eval or "RR@10,AP,nDCG@10",
                                           "seeds": seeds})
    else:
        if not DEFAULT_EXPERIMENT.is_file():  # the library reads the checkout's files only where it is run from
            raise InputError(DEFAULT_EXPERIMENT, "no such experiment file here: `irpipe run` alone runs the main job "
                             "of the irpipe checkout it is run from; run it there, or give an experiment file or a "
                             "pipeline spec")
        experiment = Experiment.load(DEFAULT_EXPERIMENT)
    if args.baseline:
        experiment.baseline = args.baseline
    if seeds:
        experiment.seeds = seeds
    if args.rel_level is not None:
        experiment.rel_level = args.rel_level
    if args.output_format:
        experiment.output_format = args.output_format
    if args.engine:
        experiment.engine = args.engine
    results_dir = RECORDED_RESULTS if args.record else args.results_dir or LOCAL_RESULTS
    result = run_experiment(experiment, args.output, results_dir, use_cache=not args.no_cache, dataset=dataset,
                            engine_options=engine_from_args(args, experiment.engine))
    print(format_result(result))
    failed = [m for m, c in result["checks"].items() if c["status"] == "FAIL"]
    if failed:
        logger.warning("%s: %s outside tolerance %g", experiment.name, ", ".join(failed), experiment.tolerance)
    return 1 if args.check and failed else 0


def _seeds(text: str) -> list[int]:
    try:
        return [int(seed) for seed in text.split(",") if seed.strip()]
    except ValueError:
        raise ConfigError(f"--seeds takes integers separated by commas, e.g. 0,1,2; got {text!r}", "seeds") from None

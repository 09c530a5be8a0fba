"""`irpipe run`: a pipeline from a spec string or from an experiment file in eval/, end to end.

    irpipe run "bm25(k1=0.9,b=0.4) % 100 >> hcan(ckpt=DIR)" --dataset NAME --output runs/x.trec --eval RR@10,AP
    irpipe run eval/cacm-bm25.yaml [--check]
    irpipe run                                  # the default experiment (DEFAULT_EXPERIMENT)

An experiment file (the shape of Pyserini's 2cr regressions) names the dataset, the pipeline spec, the measures
and the expected scores with a tolerance (published numbers live in eval/references.yaml, for the leaderboard):

    dataset: cacm
    pipeline: bm25(k1=0.9, b=0.4, hits=1000)
    measures: [AP, nDCG@10, RR@10, P@10, R@100]
    expected: {AP: 0.3114, nDCG@10: 0.4519}
    tolerance: 0.0001
    ci: true            # false: too long for the test suite (training); reproduce it by hand

Running it writes runs/<name>.trec and eval/results/<name>.json; each expected score is OK (within tolerance),
OKISH (within 10x tolerance: a warning) or FAIL, and `--check` exits 1 on any FAIL.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from pipeline import __version__, cache
from pipeline.data.files import atomic_write
from pipeline.data.runs import RUN_FORMATS, Run
from pipeline.errors import ConfigError, InputError
from pipeline.log import logger

DEFAULT_EXPERIMENT = {"name": "default", "dataset": "cacm", "pipeline": "bm25(k1=0.9, b=0.4, hits=1000)",
                      "measures": ["AP", "nDCG@10", "RR@10", "P@10", "R@100"]}
OKISH_FACTOR = 10
_KEYS = {"name", "dataset", "pipeline", "measures", "expected", "tolerance", "rel_level", "queries",
         "output_format", "description", "ci"}


@dataclass
class Experiment:
    name: str
    dataset: str
    pipeline: str
    measures: list[str]
    expected: dict[str, float] = field(default_factory=dict)
    tolerance: float = 1e-4
    rel_level: int | None = None
    queries: str = "qrels"
    output_format: str = "trec"
    description: str = ""
    ci: bool = True  # re-run by the test suite; false for experiments that train for minutes (run them by hand)
    path: str | None = None

    @classmethod
    def from_dict(cls, data: dict, path: str | None = None) -> "Experiment":
        where = path or "experiment"
        if not isinstance(data, dict):
            raise InputError(where, "an experiment file is a YAML mapping")
        unknown = set(data) - _KEYS
        if unknown:
            raise InputError(where, f"unknown keys {sorted(unknown)}; allowed: {sorted(_KEYS)}", field=sorted(unknown)[0])
        for key in ("dataset", "pipeline", "measures"):
            if not data.get(key):
                raise InputError(where, f"missing required key {key!r}", field=key)
        measures = data["measures"]
        if isinstance(measures, str):
            measures = [m.strip() for m in measures.split(",") if m.strip()]
        expected = data.get("expected") or {}
        for measure, value in expected.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise InputError(where, f"expected score for {measure} is not a number: {value!r}", field=f"expected.{measure}")
        if data.get("output_format", "trec") not in RUN_FORMATS:
            raise InputError(where, f"output_format must be one of {RUN_FORMATS}", field="output_format")
        name = data.get("name") or (Path(path).stem if path else "experiment")
        return cls(name=name, dataset=data["dataset"], pipeline=data["pipeline"], measures=list(measures),
                   expected={str(k): float(v) for k, v in expected.items()},
                   tolerance=float(data.get("tolerance", 1e-4)),
                   rel_level=data.get("rel_level"), queries=data.get("queries", "qrels"),
                   output_format=data.get("output_format", "trec"), description=data.get("description", ""),
                   ci=bool(data.get("ci", True)), path=path)

    @classmethod
    def load(cls, path: str | Path) -> "Experiment":
        import yaml

        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(path, "no such experiment file") from None
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            raise InputError(path, f"invalid YAML: {getattr(error, 'problem', error)}",
                             line=mark.line + 1 if mark else None) from None
        return cls.from_dict(data, str(path))


def status(score: float, expected: float, tolerance: float) -> str:
    """The one comparator of every regression: OK, OKISH (within 10x tolerance) or FAIL."""
    gap = abs(score - expected)
    if gap <= tolerance + 1e-12:
        return "OK"
    return "OKISH" if gap <= OKISH_FACTOR * tolerance else "FAIL"


def run_pipeline(spec: str, dataset_name: str, use_cache: bool = True) -> tuple[Run, object, object]:
    """Parse `spec`, bind it to the dataset, and run it on the dataset's topics (and candidates, for a reranker
    first). Returns (run, stage, dataset)."""
    from pipeline.data.registry import get_dataset
    from pipeline.spec import parse

    dataset = get_dataset(dataset_name)
    stage = parse(spec).bind(dataset)
    topics = dataset.topics()
    candidates = dataset.run() if stage.needs_run else None
    if stage.needs_run and candidates is None:
        raise ConfigError(f"{stage!r} starts with a reranker, but {dataset_name} ships no candidate run: "
                          "start the pipeline with a retriever, e.g. bm25() % 100 >> ...")
    with cache.using(cache.StageCache() if use_cache else None) as stage_cache:
        run = stage(topics, candidates)
    if stage_cache:
        logger.info("stage cache: %d hit(s), %d miss(es)", stage_cache.hits, stage_cache.misses)
    return run, stage, dataset


def run_experiment(experiment: Experiment, output: str | Path | None = None, results_dir: str | Path = "eval/results",
                   use_cache: bool = True) -> dict:
    from pipeline.evaluate import evaluate, parse_measure

    start = time.perf_counter()
    run, stage, dataset = run_pipeline(experiment.pipeline, experiment.dataset, use_cache)
    output = Path(output or Path("runs") / f"{experiment.name}.{experiment.output_format}")
    run.write(output, format=experiment.output_format, tag=experiment.name.replace(" ", "_"))
    rel_level = experiment.rel_level if experiment.rel_level is not None else dataset.rel_level
    qrels = dataset.qrels()
    scores = evaluate(run, qrels, experiment.measures, rel_level=rel_level, queries=experiment.queries)
    checks = {}
    for measure, expected in experiment.expected.items():
        key = str(parse_measure(measure, rel_level))  # "AP" is "AP(rel=2)" on graded qrels
        score = scores.get(key)
        checks[key] = {"expected": expected, "score": score,
                       "status": status(score, expected, experiment.tolerance) if score is not None else "FAIL"}
    from pipeline.spec import parse

    result = {"name": experiment.name, "dataset": experiment.dataset, "pipeline": repr(parse(experiment.pipeline)),
              "spec": experiment.pipeline, "measures": scores, "rel_level": rel_level,
              "queries": _query_count(run, qrels, experiment.queries), "checks": checks,
              "tolerance": experiment.tolerance,
              "description": experiment.description, "run": str(output),
              "command": f"irpipe run {experiment.path}" if experiment.path else None,
              "seconds": round(time.perf_counter() - start, 2), "irpipe": __version__}
    if experiment.path:
        with atomic_write(Path(results_dir) / f"{experiment.name}.json") as out:
            json.dump(result, out, indent=2)
            out.write("\n")
    return result


def _query_count(run: Run, qrels: dict, queries: str) -> int:
    from pipeline.evaluate import evaluated_queries

    return len(evaluated_queries(run, qrels, queries))


def format_result(result: dict) -> str:
    width = max(len(m) for m in result["measures"]) if result["measures"] else 8
    lines = [f"{result['name']}  {result['dataset']}  {result['pipeline']}  ({result['queries']} queries)"]
    for measure, score in result["measures"].items():
        check = result["checks"].get(measure)
        note = f"  expected {check['expected']:.4f}  {check['status']}" if check else ""
        lines.append(f"  {measure:<{width}}  {score:.4f}{note}")
    return "\n".join(lines)


# -- irpipe run ---------------------------------------------------------------------------------------------

def define_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", metavar="SPEC|YAML",
                        help="a pipeline spec such as \"bm25(k1=0.9,b=0.4) %% 100\", or an experiment file (.yaml); "
                             "none: the default experiment")
    parser.add_argument("--dataset", metavar="NAME", help="dataset to run a spec on (topics, qrels, corpus)")
    parser.add_argument("--output", metavar="RUN", help="run file (default runs/<name>.trec)")
    parser.add_argument("--output-format", choices=RUN_FORMATS, help="trec (default) or msmarco")
    parser.add_argument("--eval", metavar="MEASURES", help="measures for a spec, comma-separated (RR@10,AP,nDCG@10)")
    parser.add_argument("--rel-level", type=int, metavar="N", help="binary relevance level (default: the dataset's)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a score leaves its expected tolerance")
    parser.add_argument("--no-cache", action="store_true", help="recompute every stage")
    parser.add_argument("--results-dir", default="eval/results", metavar="DIR", help="where experiment results go")


def main(args: argparse.Namespace) -> int:
    target = args.target
    if target and (target.endswith((".yaml", ".yml")) or Path(target).is_file()):
        experiment = Experiment.load(target)
    elif target:
        if not args.dataset:
            raise ConfigError("a pipeline spec needs --dataset NAME (or give an experiment .yaml file)")
        experiment = Experiment.from_dict({"name": Path(args.output).stem.split(".")[0] if args.output else "run",
                                           "dataset": args.dataset, "pipeline": target,
                                           "measures": args.eval or "RR@10,AP,nDCG@10"})
    else:
        experiment = Experiment.from_dict(DEFAULT_EXPERIMENT)
    if args.rel_level is not None:
        experiment.rel_level = args.rel_level
    if args.output_format:
        experiment.output_format = args.output_format
    result = run_experiment(experiment, args.output, args.results_dir, use_cache=not args.no_cache)
    print(format_result(result))
    failed = [m for m, c in result["checks"].items() if c["status"] == "FAIL"]
    if failed:
        logger.warning("%s: %s outside tolerance %g", experiment.name, ", ".join(failed), experiment.tolerance)
    return 1 if args.check and failed else 0

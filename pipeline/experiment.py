"""Experiments: a pipeline from a spec string or an experiment file run on a dataset, end to end (`irpipe run`;
the command: pipeline/commands/run.py).

    irpipe run "bm25(k1=0.9,b=0.4) % 100 >> hcan(ckpt=DIR)" --dataset NAME --output runs/x.trec --eval RR@10,AP
    irpipe run eval/cacm-bm25.yaml [--check]
    irpipe run                                  # the main job: eval/main-job.yaml (DEFAULT_EXPERIMENT)

An experiment file (the shape of Pyserini's 2cr regressions) names the dataset, the pipeline spec, the measures
and the expected scores with a tolerance (published numbers live in eval/references.yaml, for the leaderboard):

    dataset: cacm
    pipeline: bm25(k1=0.9, b=0.4, hits=1000)
    measures: [AP, nDCG@10, RR@10, P@10, R@100]
    expected: {AP: 0.3114, nDCG@10: 0.4519}
    tolerance: 0.0001
    ci: true            # false: too long for the test suite (training); reproduce it by hand
    engine: local       # or ray: the stages' work on a Ray cluster (pipeline/engine/), the same output
    baseline: bm25(k1=0.9, b=0.4, hits=1000)   # optional: a second pipeline to compare with
    seeds: [0, 1, 2]    # optional: run the pipeline once per seed, put in for `{seed}` in its spec
    beside: {biencoder: "bm25() % 100 >> biencoder()"}   # optional, with a baseline: more rows in its table
    make: {models/b: "irpipe pretrain-mlm --output models/b --steps 1000 ..."}  # what re-creates a path it names
                        # that the repository and the mirror lack (checked before running: pipeline/experiment_inputs.py)
    archived: superseded by eval/X.yaml (AP 0.80 against 0.70)   # only under eval/archive/: out of the pins

With `seeds`, the pipeline spec names `{seed}` (e.g. `hcan(train=trecqa/train, seed={seed})`); each seed's run is
written as runs/<name>.seed<N>.trec, the scores are the mean over the seeds with their sample sd beside, and the
expected scores pin that mean. The tolerance should come from the measured spread: `spread_tolerance` (two
standard errors of the difference between two means of n seeds, 2·sd·sqrt(2/n)) is printed with the result,
and a tolerance tighter than it is warned about: another lab's mean of n seeds would fail it by chance. A
baseline may name `{seed}` too (the model's own untrained start, `mrnn(..., epochs=0, seed={seed})`): it runs once
per seed (runs/<name>.baseline.seed<N>.trec) and is tested as the seed mean against the pipeline's seed mean.

Running it writes runs/<name>.trec and runs/results/<name>.json (LOCAL_RESULTS: untracked, so a check leaves the
checkout as it was); `--record` writes eval/results/<name>.json instead (RECORDED_RESULTS: the results the leaderboard,
the reproduction page and the prose tables are made from). Each expected score is OK (within tolerance),
OKISH (within 10x tolerance: a warning) or FAIL, and `--check` exits 1 on any FAIL. With a `baseline`, the
baseline's run is written too (runs/<name>.baseline.trec), the table shows both pipelines with paired t-test
p-values (pipeline.compare), and the per-query win/loss plot of the first measure goes beside the run
(runs/<name>.png). `beside` names more pipelines (label: spec) run after the others and compared with the same
baseline: each is a row of the table with its p-values and a panel of the plot, its run written as
runs/<name>.<label>.trec; the expected scores stay the pipeline's.

The results file also says how the result was obtained (pipeline/provenance.py): date, environment (commit,
library versions, CPU, torch kernels and threads), what was reused from the cache, the cost of the last cold run
and, with a baseline, the per-query wins and losses; a run prints a note where its environment differs from the
replaced file's, and for a pin known to move with the CPU's kernels (eval/benchmarks/cpu-sensitivity.yaml).
"""
from __future__ import annotations

import json
import math
import re
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from pipeline import provenance
from pipeline.version import __version__
from pipeline.data import reuse
from pipeline.data.files import atomic_write
from pipeline.data.yaml_files import load_yaml
from pipeline.data.outputs import check_writable
from pipeline.data.runs import RUN_FORMATS, Run
from pipeline.engine import ENGINES, EngineOptions
from pipeline.errors import ConfigError, InputError, IrpipeError
from pipeline.experiment_inputs import check_inputs, check_make
from pipeline.log import logger
from pipeline.stage import Stage

DEFAULT_EXPERIMENT = Path("eval") / "main-job.yaml"  # `irpipe run` alone, in the working folder (the checkout)
LOCAL_RESULTS = Path("runs") / "results"  # where a run's result goes unless recorded: untracked, beside the runs
RECORDED_RESULTS = Path("eval") / "results"  # `--record`: the tracked results that the leaderboard and pages read
OKISH_FACTOR = 10
BASELINE = "baseline"  # the baseline pipeline's row in the comparison table
_KEYS = {"name", "dataset", "pipeline", "measures", "expected", "tolerance", "rel_level", "queries",
         "output_format", "description", "ci", "baseline", "seeds", "engine", "beside", "make", "archived"}
# (key, accepted YAML types, as said in the error) for the optional and required fields
_FIELD_KINDS = [("name", (str,), "a string"), ("dataset", (str,), "a dataset name or folder (a string)"),
                ("pipeline", (str,), "a pipeline spec (a string)"), ("measures", (str, list), "a list of measures"),
                ("expected", (dict,), "a mapping measure: score"), ("tolerance", (int, float), "a number"),
                ("rel_level", (int,), "an integer"), ("queries", (str,), "qrels or run"),
                ("output_format", (str,), "trec or msmarco"), ("description", (str,), "a string"),
                ("ci", (bool,), "true or false"), ("baseline", (str,), "a pipeline spec (a string)"),
                ("seeds", (list,), "a list of integer seeds, e.g. [0, 1, 2]"), ("engine", (str,), "local or ray"),
                ("beside", (dict,), "a mapping label: pipeline spec"),
                ("make", (dict,), "a mapping path: the command that makes it"),
                ("archived", (str,), "a one-line reason (a string)")]
SEED = "{seed}"  # where each of an experiment's seeds goes in its pipeline spec
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # no path separators, no leading dot (no `..`)


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
    baseline: str | None = None  # a second pipeline spec, compared with `pipeline` (paired t-tests, win/loss plot)
    seeds: list[int] | None = None  # run the pipeline once per seed (SEED in its spec); scores are mean ± sd
    engine: str = "local"  # where the stages run: here, or on a Ray cluster (pipeline/engine/; the same output)
    beside: dict[str, str] | None = None  # label -> pipeline spec: more rows compared with the baseline
    make: dict[str, str] | None = None  # path -> the command that makes it (pipeline/experiment_inputs.py)
    archived: str | None = None  # why it left the pins (eval/archive/; docs/reproducing.md), or None: a pin
    path: str | None = None
    _stages: dict = field(default_factory=dict, repr=False, compare=False)  # spec -> its Stage, parsed once
    _measures: dict = field(default_factory=dict, repr=False, compare=False)  # (text, rel_level) -> its Measure

    def stage(self, spec: str) -> Stage:
        """The Stage of one of this experiment's specs, parsed the first time it is asked for (by `check()`, when the
        file is read) and held: running the experiment parses nothing again."""
        if spec not in self._stages:
            from pipeline.spec import parse

            self._stages[spec] = parse(spec)
        return self._stages[spec]

    def measure(self, text: str, rel_level: int):
        """One of this experiment's measures at a relevance level, parsed once (ir-measures' object)."""
        if (text, rel_level) not in self._measures:
            from pipeline.evaluation import parse_measure

            self._measures[text, rel_level] = parse_measure(text, rel_level)
        return self._measures[text, rel_level]

    @classmethod
    def from_dict(cls, data: dict, path: str | None = None) -> "Experiment":
        """The experiment of a parsed YAML mapping, every field checked (types, measures, relevance level, a safe
        name, both pipeline specs) before anything runs; a problem is an InputError naming the file and field."""
        where = path or "experiment"
        if not isinstance(data, dict):
            raise InputError(where, "an experiment file is a YAML mapping")
        data = {key: value for key, value in data.items() if value is not None}  # `key: null` is the default
        unknown = set(data) - _KEYS
        if unknown:
            raise InputError(where, f"unknown keys {sorted(unknown)}; allowed: {sorted(_KEYS)}", field=sorted(unknown)[0])
        for key in ("dataset", "pipeline", "measures"):
            if not data.get(key):
                raise InputError(where, f"missing required key {key!r}", field=key)
        for key, kinds, what in _FIELD_KINDS:
            value = data.get(key)
            if value is not None and (not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool))):
                raise InputError(where, f"{key} must be {what}, got {value!r}", field=key)
        from pipeline.evaluation import split_measures

        measures = data["measures"]
        measures = split_measures(measures) if isinstance(measures, str) else measures
        if not all(isinstance(m, str) for m in measures):
            raise InputError(where, f"measures are names such as AP or nDCG@10, got {measures!r}", field="measures")
        expected = data.get("expected") or {}
        for measure, value in expected.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise InputError(where, f"expected score for {measure} is not a number: {value!r}", field=f"expected.{measure}")
        name = data.get("name") or (Path(path).stem if path else "experiment")
        experiment = cls(name=str(name), dataset=data["dataset"], pipeline=data["pipeline"], measures=list(measures),
                         expected={str(k): float(v) for k, v in expected.items()},
                         tolerance=float(data.get("tolerance", 1e-4)),
                         rel_level=data.get("rel_level"), queries=data.get("queries", "qrels"),
                         output_format=data.get("output_format", "trec"), description=data.get("description", ""),
                         ci=data.get("ci", True), baseline=data.get("baseline"), seeds=data.get("seeds"),
                         engine=data.get("engine", "local"), beside=data.get("beside"),
                         make=data.get("make"), archived=data.get("archived"), path=path)
        experiment.check()
        return experiment

    def check(self) -> None:
        """Everything that can be checked without running: the name, the measures at the relevance level, the
        expected scores' measures, the tolerance and both pipeline specs. InputError (file, field) on a problem."""
        from pipeline.evaluation import QUERY_SETS, parse_measures

        def problem(message: str, field: str) -> IrpipeError:  # a file's fields, or a spec's command-line options
            return InputError(self.path, message, field=field) if self.path else ConfigError(message, field)

        if not _SAFE_NAME.fullmatch(self.name) or self.name == BASELINE:
            raise problem(f"name {self.name!r} must be letters, digits, '_', '-', '.' (not first) and not "
                          f"{BASELINE!r}: it names files under runs/ and the results folder", "name")
        if self.rel_level is not None and (isinstance(self.rel_level, bool) or not isinstance(self.rel_level, int)
                                           or self.rel_level < 1):
            raise problem(f"rel_level must be an integer >= 1, got {self.rel_level!r}", "rel_level")
        if not math.isfinite(self.tolerance) or self.tolerance < 0:
            raise problem(f"tolerance must be a number >= 0, got {self.tolerance!r}", "tolerance")
        if self.output_format not in RUN_FORMATS:
            raise problem(f"output_format must be one of {RUN_FORMATS}", "output_format")
        if self.queries not in QUERY_SETS:
            raise problem(f"queries must be one of {', '.join(QUERY_SETS)}", "queries")
        if self.engine not in ENGINES:
            raise problem(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}", "engine")
        if self.baseline is not None and not self.baseline.strip():
            raise problem("baseline is a pipeline spec (a string)", "baseline")
        for label, spec in (self.beside or {}).items():
            if not isinstance(label, str) or not _SAFE_NAME.fullmatch(label) or label in (BASELINE, self.name, *self.pipelines()):
                raise problem(f"beside: label {label!r} must be letters, digits, '_', '-', '.' (not first), not "
                              f"{BASELINE!r} nor a run's name: it names a row and runs/<name>.<label>.trec",
                              f"beside.{label}")
            if not isinstance(spec, str) or not spec.strip():
                raise problem(f"beside: {label} must be a pipeline spec (a string), got {spec!r}", f"beside.{label}")
        if self.beside and not self.baseline:
            raise problem("beside pipelines are compared with the baseline: add `baseline: SPEC`", "beside")
        if self.seeds is not None:
            if (len(self.seeds) < 2 or len(set(map(str, self.seeds))) != len(self.seeds)
                    or not all(isinstance(s, int) and not isinstance(s, bool) for s in self.seeds)):
                raise problem(f"seeds must be at least two different integers (3 or more for a reported number), "
                              f"got {self.seeds!r}", "seeds")
            if SEED not in self.pipeline:
                raise problem(f"seeds are given, but the pipeline does not say where they go: write {SEED} in it, "
                              f"e.g. hcan(train=..., seed={SEED})", "pipeline")
        elif SEED in self.pipeline:
            raise problem(f"the pipeline names {SEED}, but no seeds are given: add e.g. `seeds: [0, 1, 2]`", "seeds")
        if self.baseline and SEED in self.baseline and self.seeds is None:
            raise problem(f"the baseline names {SEED}, but no seeds are given: add e.g. `seeds: [0, 1, 2]`", "baseline")
        for label, spec in (self.beside or {}).items():
            if isinstance(spec, str) and SEED in spec:
                raise problem(f"beside: {label} names {SEED}; only the pipeline and the baseline run once per seed",
                              f"beside.{label}")
        rel_level = self.rel_level or 1
        try:
            measures = [str(m) for m in parse_measures(self.measures, rel_level)]
        except IrpipeError as error:
            raise problem(str(error), "measures") from None
        for measure in self.expected:
            try:
                key = str(self.measure(measure, rel_level))
            except IrpipeError as error:
                raise problem(str(error), f"expected.{measure}") from None
            if key not in measures:
                raise problem(f"expected score for {measure}, which is not among the measures "
                              f"({', '.join(self.measures)})", f"expected.{measure}")
        for key, spec in [*(("pipeline", spec) for spec in self.pipelines().values()),
                          *(("baseline", spec) for spec in self.baselines().values()),
                          *((f"beside.{label}", spec) for label, spec in (self.beside or {}).items())]:
            if spec:
                try:
                    self.stage(spec)
                except IrpipeError as error:
                    raise problem(str(error), key) from None
        check_make(self, problem)

    def pipelines(self) -> dict[str, str]:
        """The spec to run under each run name: the experiment's name, or `<name>.seed<N>` per seed."""
        if self.seeds is None:
            return {self.name: self.pipeline}
        return {f"{self.name}.seed{seed}": self.pipeline.replace(SEED, str(seed)) for seed in self.seeds}

    def baselines(self) -> dict[str, str]:
        """The baseline's spec under each row name: `baseline`, or `baseline.seed<N>` per seed when it names
        {seed} (a model's own untrained start, `mrnn(..., epochs=0, seed={seed})`): each seed's run is then
        paired with its seed's baseline through the per-query seed means of both. Empty without a baseline."""
        if not self.baseline:
            return {}
        if self.seeds is None or SEED not in self.baseline:
            return {BASELINE: self.baseline}
        return {f"{BASELINE}.seed{seed}": self.baseline.replace(SEED, str(seed)) for seed in self.seeds}

    @classmethod
    def load(cls, path: str | Path) -> "Experiment":
        if not Path(path).is_file():
            raise InputError(path, "no such experiment file")
        return cls.from_dict(load_yaml(path), str(path))


def status(score: float, expected: float, tolerance: float) -> str:
    """The one comparator of every regression: OK, OKISH (within 10x tolerance) or FAIL."""
    gap = abs(score - expected)
    if gap <= tolerance + 1e-12:
        return "OK"
    return "OKISH" if gap <= OKISH_FACTOR * tolerance else "FAIL"


def spread_tolerance(sd: float, seeds: int) -> float:
    """The tolerance that a mean over `seeds` seeds with sample sd `sd` supports: two standard errors of the
    difference between two such means (2·sd·sqrt(2/n)), rounded up to 4 decimals."""
    return math.ceil(2 * sd * math.sqrt(2 / seeds) * 1e4) / 1e4


def run_pipeline(spec: str | Stage, dataset, use_cache: bool = True,
                 engine: EngineOptions | None = None) -> tuple[Run, object, object]:
    """Parse `spec` (or take the stage) and run it on the dataset through `Stage.run_on` (bind, stage cache, checks).
    Returns (run, bound stage, dataset). Every entry point runs a pipeline through here or `Stage.run`."""
    from pipeline.spec import parse

    return (parse(spec) if isinstance(spec, str) else spec).run_on(dataset, use_cache, engine)


def run_experiment(experiment: Experiment, output: str | Path | None = None, results_dir: str | Path = LOCAL_RESULTS,
                   use_cache: bool = True, dataset=None, engine_options: EngineOptions | None = None) -> dict:
    """Run the experiment (on `dataset` when given, else on the one it names) on its engine (`engine_options` with
    the experiment's kind), write its run file(s) and, for an experiment file, its result JSON; returns the result."""
    options = replace(engine_options or EngineOptions(), kind=experiment.engine)
    return _run_experiment(experiment, output, results_dir, use_cache, dataset, options)


def _run_experiment(experiment: Experiment, output, results_dir, use_cache: bool, dataset,
                    options: EngineOptions) -> dict:
    from pipeline.compare import compare, fold_seeds, nan_as_none, plot_differences

    experiment.check()  # again: the command line may have changed fields since loading (a spec parsed is held)
    check_inputs(experiment)  # the files it reads there, each pinned BERT the pinned one (exit 2 otherwise)
    start = time.perf_counter()
    output = Path(output or Path("runs") / f"{experiment.name}.{experiment.output_format}")
    outputs = {name: output.with_suffix(name[len(experiment.name):] + output.suffix)  # x.seed0.trec
               for name in experiment.pipelines()}
    baselines = experiment.baselines()
    baseline_outputs = {name: output.with_suffix(f".{name}{output.suffix}") for name in baselines}  # x.baseline.trec
    beside = {label: output.with_suffix(f".{label}{output.suffix}") for label in experiment.beside or {}}
    results = Path(results_dir) / f"{experiment.name}.json"
    for path in [*outputs.values(), *baseline_outputs.values(), *([output.with_suffix(".png")] if baselines else []),
                 *beside.values(), *([results] if experiment.path else [])]:
        check_writable(path, "file")  # every file written, before any work
    # the result this one replaces, else the recorded one: its cost is kept by a warm run, its environment compared
    before = (provenance.previous(results) or provenance.previous(RECORDED_RESULTS / results.name)
              if experiment.path else {})
    reuse.begin()
    runs = {}
    for run_name, spec in experiment.pipelines().items():  # one run, or one per seed
        run, _, dataset = run_pipeline(experiment.stage(spec), dataset or experiment.dataset, use_cache, options)
        run.write(outputs[run_name], format=experiment.output_format, tag=run_name.replace(" ", "_"))
        runs[run_name] = run
    rel_level = experiment.rel_level if experiment.rel_level is not None else dataset.rel_level
    qrels = dataset.qrels()
    baseline_runs = {}
    for name, spec in baselines.items():  # one, or one per seed
        baseline_runs[name] = run_pipeline(experiment.stage(spec), dataset, use_cache, options)[0]
        baseline_runs[name].write(baseline_outputs[name], format=experiment.output_format,
                                  tag=f"{experiment.name.replace(' ', '_')}.{name}")
    runs = {**baseline_runs, **runs}
    for label, spec in (experiment.beside or {}).items():  # rows beside the pipeline's, compared with the baseline
        runs[label] = run_pipeline(experiment.stage(spec), dataset, use_cache, options)[0]
        runs[label].write(beside[label], format=experiment.output_format, tag=f"{experiment.name}.{label}")
    comparison = compare(runs, qrels, experiment.measures, baseline=next(iter(baselines), None),
                         rel_level=rel_level, queries=experiment.queries)
    first = next(iter(outputs))  # the experiment's run, or its first seed's
    per_run = {name: comparison.scores[name] for name in outputs}
    scores = {m: statistics.fmean(s[m] for s in per_run.values()) for m in per_run[first]}
    checks = {}
    for measure, expected in experiment.expected.items():
        key = str(experiment.measure(measure, rel_level))  # "AP" is "AP(rel=2)" on graded qrels
        score = scores.get(key)
        checks[key] = {"expected": expected, "score": score,
                       "status": status(score, expected, experiment.tolerance) if score is not None else "FAIL"}
    shown = experiment.pipeline if experiment.seeds else repr(experiment.stage(experiment.pipeline))  # {seed}: no
    result = {"name": experiment.name, "dataset": dataset.name, "pipeline": shown,
              "spec": experiment.pipeline, "measures": scores, "rel_level": rel_level,
              "queries": comparison.queries[first], "checks": checks,
              "tolerance": experiment.tolerance,
              "description": experiment.description, "run": str(outputs[experiment.name]) if not experiment.seeds
              else [str(path) for path in outputs.values()],
              "command": f"irpipe run {_shown(experiment.path)}" if experiment.path else None,
              "irpipe": __version__}
    if experiment.seeds:
        result["seeds"] = {str(seed): per_run[name] for seed, name in zip(experiment.seeds, outputs)}
        result["sd"] = {m: statistics.stdev(s[m] for s in per_run.values()) for m in scores}
        result["spread_tolerance"] = {m: spread_tolerance(sd, len(experiment.seeds)) for m, sd in result["sd"].items()}
        tight = [m for m in checks if experiment.tolerance < result["spread_tolerance"][m]]
        if tight:
            logger.warning("%s: tolerance %g is tighter than the seeds' spread allows for %s (%s): another mean of "
                           "%d seeds would leave it by chance", experiment.name, experiment.tolerance, ", ".join(tight),
                           ", ".join(f"{result['spread_tolerance'][m]:.4f}" for m in tight), len(experiment.seeds))
    wins = (comparison, list(outputs))  # the per-query differences of the seeds' runs from the baseline
    if baselines:
        tested = fold_seeds(comparison) if experiment.seeds else comparison  # the seed mean's row, tested per query
        row = next(name for name in tested.runs if name not in (tested.baseline, *beside))  # the experiment's
        seeded = len(baselines) > 1  # a baseline per seed: plotted and counted as seed mean against seed mean
        plot = plot_differences(tested if seeded else comparison, output.with_suffix(".png"))
        wins = (tested, [row]) if seeded else wins
        result["baseline"] = {"spec": experiment.baseline,
                              "measures": {m: statistics.fmean(comparison.scores[name][m] for name in baselines)
                                           for m in comparison.scores[next(iter(baselines))]},
                              "run": [str(path) for path in baseline_outputs.values()] if seeded
                              else str(baseline_outputs[BASELINE]), "pvalues": nan_as_none(tested.pvalues[row]),
                              "test": tested.significance_test(), "plot": str(plot), "table": tested.to_table()}
        if seeded:
            result["baseline"]["seeds"] = {str(seed): comparison.scores[name]
                                           for seed, name in zip(experiment.seeds, baselines)}
        result["beside"] = {label: {"spec": experiment.beside[label], "measures": comparison.scores[label],
                                    "run": str(path), "pvalues": nan_as_none(tested.pvalues[label])}
                            for label, path in beside.items()}
    result["seconds"] = round(time.perf_counter() - start, 2)
    provenance.record(result, before, *wins)  # date, environment, cost, win_loss ...
    result["notes"] = provenance.environment_notes(before, result, experiment.pipeline)
    if experiment.path:
        with atomic_write(results) as out:
            json.dump(result, out, indent=2)
            out.write("\n")
    return result


def _shown(path: str) -> str:
    """`path` relative to the working directory when it lies below it (commands read the same on every machine)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return path

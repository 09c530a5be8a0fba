"""The Python front door, re-exported by the package (`import pipeline as ir`): datasets, running a pipeline,
evaluating a run and comparing pipelines, through the same bind, stage cache and checks as `irpipe run`.

    import pipeline as ir

    cacm = ir.dataset("cacm")
    pipe = ir.bm25(k1=0.9, b=0.4) % 100 >> ir.overlap(idf=True)
    run = pipe.run(cacm)                                       # = ir.run(pipe, cacm)
    ir.evaluate(run, cacm, ["AP", "nDCG@10"])                 # {"AP": ..., "nDCG@10": ...}
    table = ir.Experiment([ir.bm25(k1=0.9, b=0.4), pipe], cacm, ["AP", "RR@10"], baseline=0)
    print(table)                                               # the table `irpipe run EXPERIMENT.yaml` prints
    table.to_dataframe()

Every stage of the spec grammar is a name of the package too (`ir.bm25`, `ir.monobert`, `ir.fusion`, ...), so a
spec and its Python read alike; `help(ir.monobert)` lists that stage's options with their defaults.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pipeline import cache as stage_cache
from pipeline.compare import Comparison, compare
from pipeline.data.frames import is_frame
from pipeline.data.outputs import check_writable
from pipeline.data.paths import names_file
from pipeline.data.registry import get_dataset
from pipeline.data.runs import Run, read_run
from pipeline.data.topics import Topics, read_topics
from pipeline.errors import ConfigError
from pipeline.evaluation import QrelsLike, RunLike, as_qrels, as_run
from pipeline.evaluation import evaluate as evaluate_run
from pipeline.experiment import run_pipeline
from pipeline.spec import parse
from pipeline.stage import Stage

if TYPE_CHECKING:
    import pandas


def dataset(name):
    """A registered dataset by name (`irpipe datasets list`; `irds:<id>` for ir_datasets), or a folder with a
    dataset.yaml, a BEIR folder or MS MARCO's passage files.

        >>> cacm = ir.dataset("cacm")
        >>> len(cacm.topics()), cacm.rel_level
        (64, 1)
    """
    return get_dataset(str(name) if isinstance(name, Path) else name)


def run(pipeline: str | Stage, dataset, output: str | Path | None = None, format: str = "trec",
        tag: str | None = None, cache: bool = True) -> Run:
    """The run of `pipeline` (a Stage, or a spec string) on `dataset` (a name, a folder or a dataset), written to
    `output` when given (atomically, "trec" or "msmarco", as `irpipe run SPEC --output` writes it).

        >>> run = ir.run("bm25(k1=0.9, b=0.4)", "cacm")        # or ir.bm25(k1=0.9, b=0.4).run("cacm")
        >>> docid, score = run.ranking["1"][0]                 # query 1's top hit
        >>> run.num_hits(), docid, round(score, 4)
        (58558, 'CACM-1938', 12.0328)
    """
    if output is not None:
        check_writable(output, "file")  # before any work
    result = run_pipeline(pipeline, dataset, use_cache=cache)[0]
    if output is not None:
        result.write(output, format=format, tag=tag)
    return result


def evaluate(run: RunLike, qrels, measures, rel_level: int | None = None, queries: str = "qrels") -> dict[str, float]:
    """{measure: score} of `run` (a Run, a run file, a result frame -- PyTerrier's qid, docno, score or ir_measures'
    query_id, doc_id, score -- or {qid: {docid: score}}) against `qrels` (a dataset, its name, a qrels file, a qrels
    frame -- PyTerrier's qid, docno, label or ir_measures' query_id, doc_id, relevance --, ir-measures qrels, or
    (topics, qrels)). `rel_level` defaults to the dataset's (2 on DL19/DL20), else 1. A query of the qrels that the
    run lacks scores 0 (`queries="qrels"`, trec_eval -c); `queries="run"` scores the run's only.

        >>> scores = ir.evaluate(ir.bm25(k1=0.9, b=0.4).run("cacm"), "cacm", ["AP", "nDCG@10"])
        >>> {measure: round(score, 4) for measure, score in scores.items()}
        {'AP': 0.3114, 'nDCG@10': 0.4519}
    """
    qrels, level = _qrels(qrels)
    return evaluate_run(run, qrels, measures, rel_level or level, queries)


def Experiment(pipelines, dataset, measures, names=None, baseline=None,  # noqa: N802
               correction: str | None = None, rel_level: int | None = None, queries: str = "qrels",
               cache: bool = True, test: str = "t", perquery: bool = False) -> Comparison | "pandas.DataFrame":
    """Run each pipeline on `dataset` and compare them on `measures`: the comparison table `irpipe run` prints (one
    row per pipeline; with a `baseline`, paired p-values against it, optionally Holm/Bonferroni-corrected).

    `pipelines` are systems, as pt.Experiment takes them: Stages, spec strings, and runs made elsewhere -- a `Run`,
    a run file, a result frame (qid, docno, score) -- evaluated as they are. `dataset` is a dataset (its name, a
    folder) or `(topics, qrels)`: topics as a `Topics`, a query frame or a topics file, qrels as a qrels frame
    (PyTerrier's or ir_measures' columns), a qrels file or {qid: {docid: label}}; stages then run on those topics
    with their own arguments (`bm25(index=DIR)`). `names` label the rows (default: a spec, a file's path, `run N`);
    `baseline` is the index of one of them (PyTerrier's convention), or another system, run first as the row
    "baseline" (when a name has it: "baseline: " and its own name). `test`: "t" (paired t-test) or "wilcoxon"
    (signed-rank). Returns a `Comparison`: print it, `.to_dataframe()` (with each measure's wins and losses against
    the baseline), `.to_markdown()`, `.pvalues`; with `perquery=True`, pt.Experiment's long per-query frame (name,
    qid, measure, value).

        >>> table = ir.Experiment([ir.bm25(k1=0.9, b=0.4), ir.bm25(k1=0.9, b=0.4) % 100 >> ir.overlap(idf=True)],
        ...                       "cacm", ["AP"], names=["bm25", "overlap"], baseline=0)
        >>> print(table.to_table())                          # doctest: +NORMALIZE_WHITESPACE
        run      queries      AP  AP p-value
        bm25          52  0.3114           -
        overlap       52  0.2195      0.0003
        queries: 52 -- every judged query in the qrels; a query missing from a run scores 0 (trec_eval -c).
        Tied scores (overlap: 64 queries) are ordered as trec_eval orders them, docid descending; pt.Experiment's
        RR@k (ir-measures' msmarco provider) orders them otherwise, so its number can differ. p-values: two-sided
        paired t-test vs bm25.
    """
    systems = list(pipelines)
    names = [_name(system, i) for i, system in enumerate(systems)] if names is None else [str(n) for n in names]
    if len(names) != len(systems) or len(set(names)) != len(names):
        raise ConfigError(f"Experiment: {len(names)} names for {len(systems)} pipelines; names must be distinct",
                          field="names")
    data, topics, qrels, level = _inputs(dataset)
    if baseline is not None and not isinstance(baseline, int):  # another system: a row of its own, first
        label = "baseline" if "baseline" not in names else f"baseline: {_name(baseline, 0)}"
        if label in names:
            raise ConfigError(f"Experiment: the baseline's row {label!r} has the name of a pipeline; rename it",
                              field="names")
        systems, names, baseline = [baseline, *systems], [label, *names], 0
    if baseline is not None and not (isinstance(baseline, int) and 0 <= baseline < len(systems)):
        raise ConfigError(f"Experiment: baseline={baseline!r} is not an index of the {len(systems)} pipelines, "
                          "a pipeline, nor None", field="baseline")
    runs = {name: _system_run(system, data, topics, cache) for name, system in zip(names, systems)}
    comparison = compare(runs, qrels, measures, baseline=names[baseline] if baseline is not None else None,
                         correction=correction, rel_level=rel_level or level, queries=queries, test=test)
    return comparison.to_dataframe(per_query=True) if perquery else comparison


def _name(system, position: int) -> str:
    """A system's default row name: a spec string or a file as given, a stage's spec, `run N` for a run or frame."""
    if isinstance(system, (str, Path)):
        return str(system)
    return repr(system) if isinstance(system, Stage) else f"run {position}"


def _inputs(dataset) -> tuple[object, Topics | None, QrelsLike, int]:
    """(dataset or None, topics or None: the dataset's, qrels, relevance level) of a dataset or (topics, qrels)."""
    if isinstance(dataset, tuple):
        if len(dataset) != 2:
            raise ConfigError(f"Experiment: a tuple of {len(dataset)} for the dataset; expected (topics, qrels)",
                              field="dataset")
        topics, qrels = dataset
        if isinstance(topics, (str, Path)):
            topics = read_topics(topics)
        return None, topics if isinstance(topics, Topics) else Topics.from_frame(topics), as_qrels(qrels), 1
    data = get_dataset(str(dataset)) if isinstance(dataset, (str, Path)) else dataset
    return data, None, data.qrels(), data.rel_level


def _system_run(system, data, topics: Topics | None, cache: bool) -> Run:
    """The run of a system: a stage or spec run on the dataset (or bound to nothing, on `topics`); a run, a run
    file or a result frame as it is."""
    if isinstance(system, Path) or (isinstance(system, str) and names_file(system)):  # a spec of any length
        return read_run(system)
    if not isinstance(system, (str, Stage)):
        return as_run(system) if isinstance(system, Run) or is_frame(system) else _not_a_system(system)
    if data is not None:
        return run_pipeline(system, data, use_cache=cache)[0]
    stage = parse(system) if isinstance(system, str) else system
    with stage_cache.using(stage_cache.StageCache() if cache else None):
        return stage.bind(None)(topics)


def _not_a_system(system) -> Run:
    raise ConfigError(f"Experiment: {type(system).__name__} is not a system: expected a Stage, a spec string, a Run, "
                      "a run file or a result frame", field="pipelines")


def _qrels(qrels) -> tuple[QrelsLike, int]:
    """(qrels, the dataset's relevance level) of a dataset or its name; (qrels, 1) of (topics, qrels) or anything
    else."""
    if isinstance(qrels, tuple) and len(qrels) == 2:
        qrels = qrels[1]
    if isinstance(qrels, str) and not Path(qrels).is_file():
        qrels = get_dataset(qrels)
    if hasattr(qrels, "qrels") and hasattr(qrels, "rel_level"):
        return qrels.qrels(), qrels.rel_level
    return qrels, 1

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

from pipeline.compare import Comparison, compare
from pipeline.data.outputs import check_writable
from pipeline.data.registry import get_dataset
from pipeline.data.runs import Run
from pipeline.errors import ConfigError
from pipeline.evaluation import QrelsLike, RunLike
from pipeline.evaluation import evaluate as evaluate_run
from pipeline.experiment import run_pipeline
from pipeline.stage import Stage


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
    """{measure: score} of `run` (a Run, a run file or {qid: {docid: score}}) against `qrels` (a dataset, its name,
    a qrels file or ir-measures qrels). `rel_level` defaults to the dataset's (2 on DL19/DL20), else 1. A query of
    the qrels that the run lacks scores 0 (`queries="qrels"`, trec_eval -c); `queries="run"` scores the run's only.

        >>> scores = ir.evaluate(ir.bm25(k1=0.9, b=0.4).run("cacm"), "cacm", ["AP", "nDCG@10"])
        >>> {measure: round(score, 4) for measure, score in scores.items()}
        {'AP': 0.3114, 'nDCG@10': 0.4519}
    """
    qrels, level = _qrels(qrels)
    return evaluate_run(run, qrels, measures, rel_level or level, queries)


def Experiment(pipelines, dataset, measures, names=None, baseline: int | str | Stage | None = None,  # noqa: N802
               correction: str | None = None, rel_level: int | None = None, queries: str = "qrels",
               cache: bool = True) -> Comparison:
    """Run each pipeline on `dataset` and compare them on `measures`: the comparison table `irpipe run` prints (one
    row per pipeline; with a `baseline`, paired t-test p-values against it, optionally Holm/Bonferroni-corrected).
    `pipelines` are Stages or spec strings; `names` label the rows (default: each pipeline's spec); `baseline` is
    the index of one of them (PyTerrier's convention), or another pipeline, run first as the row "baseline".
    Returns a `Comparison`: print it, `.to_dataframe()`, `.to_markdown()`, `.pvalues`.

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
    pipelines = list(pipelines)
    names = [str(p) if isinstance(p, str) else repr(p) for p in pipelines] if names is None else list(names)
    if len(names) != len(pipelines) or len(set(names)) != len(names):
        raise ConfigError(f"Experiment: {len(names)} names for {len(pipelines)} pipelines; names must be distinct",
                          field="names")
    data = get_dataset(dataset) if isinstance(dataset, (str, Path)) else dataset
    if isinstance(baseline, (str, Stage)):
        pipelines, names, baseline = [baseline, *pipelines], ["baseline", *names], 0
    if baseline is not None and not (isinstance(baseline, int) and 0 <= baseline < len(pipelines)):
        raise ConfigError(f"Experiment: baseline={baseline!r} is not an index of the {len(pipelines)} pipelines, "
                          "a pipeline, nor None", field="baseline")
    runs = {name: run_pipeline(pipeline, data, use_cache=cache)[0] for name, pipeline in zip(names, pipelines)}
    return compare(runs, data.qrels(), measures, baseline=names[baseline] if baseline is not None else None,
                   correction=correction, rel_level=rel_level or data.rel_level, queries=queries)


def _qrels(qrels) -> tuple[QrelsLike, int]:
    """(qrels, the dataset's relevance level) of a dataset or its name; (qrels, 1) of anything else."""
    if isinstance(qrels, str) and not Path(qrels).is_file():
        qrels = get_dataset(qrels)
    if hasattr(qrels, "qrels") and hasattr(qrels, "rel_level"):
        return qrels.qrels(), qrels.rel_level
    return qrels, 1

"""irpipe: BM25 through Pyserini, neural rerankers, TREC runs and ir-measures evaluation, in one namespace.

    import pipeline as ir

    dl19 = ir.dataset("dl19-passage")
    pipe = ir.candidates() >> ir.addax(train="dl20-passage", negatives="bm25", epochs=1, train_queries=10)
    run = pipe.run(dl19)                                   # bind, stage cache and checks, as `irpipe run`
    ir.evaluate(run, dl19, ["nDCG@10", "RR@10"])
    print(ir.Experiment([ir.candidates(), pipe], dl19, ["nDCG@10"], baseline=0))

Every stage of the spec grammar is a name here, spelt as in a spec (`ir.bm25`, `ir.bm25kw`, `ir.keywords`,
`ir.exclude`, `ir.overlap`, `ir.candidates`, `ir.cutoff`, `ir.fusion`, `ir.rrf`, `ir.features` (`a ** b`), `ir.ltr`,
the Python function stages `ir.apply_query`, `ir.apply_doc_score`, `ir.apply_generic`, and one per model:
`ir.monobert`, `ir.biencoder`, `ir.hcan`, `ir.mrnn`, `ir.addax`, `ir.kwbert`); `help(ir.<stage>)` lists its options
with their defaults. `ir.dataset`, `ir.run`, `ir.evaluate`, `ir.Experiment` and `ir.parse` (a spec string to its
stages) are in pipeline/api.py; `ir.Run` and `ir.Topics` are the currency every stage maps between.

Importing the package is cheap: a name is imported on first use (torch with a neural stage, the JVM when Lucene is
first needed: see `pipeline.java`).
"""
from pipeline.version import __version__  # noqa: F401  (setup.cfg reads it from pipeline/version.py)
from pipeline.data.runs import Run  # noqa: E402,F401
from pipeline.data.topics import Topics  # noqa: E402,F401

_API = ("dataset", "run", "evaluate", "Experiment")


def __getattr__(name: str):
    """`ir.<stage>` (the spec grammar's names) and the functions of pipeline/api.py, imported on first use."""
    import importlib
    import importlib.util

    if name in _API:
        return getattr(importlib.import_module("pipeline.api"), name)
    if name == "parse":
        return importlib.import_module("pipeline.spec").parse
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is None:
        # (a submodule not imported yet, `from pipeline import cache` in pipeline/stage.py, is the import system's:
        # looking it up among the stages would import pipeline.stages, and so pipeline.stage, half made)
        stages = importlib.import_module("pipeline.stages")
        if name in stages.stage_names():
            return stages.get_stage_class(name)
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")


def __dir__() -> list[str]:
    from pipeline.stages import stage_names

    return sorted({*globals(), *_API, "parse", *stage_names()})

"""The stages, by the names the spec grammar knows them by: the algebra's own (pipeline/stage.py: `cutoff`,
`candidates`, `fusion`, `rrf`), the first stages and filters of this package (`bm25`, `bm25kw`, `keywords`,
`exclude`, `overlap`), the Python function stages (`apply_query`, `apply_doc_score`, `apply_generic`), the feature
union (`features`, `a ** b`) and the learned ranker over it (`ltr`), and one reranker per model file of pipeline/rerank/models/ (made on first use by
pipeline/stages/neural.py). A stage module registers its classes with `@register` (and the neural module its
reranker maker with `register_model_stages`) when it is imported; the registry imports a module, by name, only
when a spec names one of its stages, so this package imports none of its modules itself (nor torch).
"""
from __future__ import annotations

import importlib

from pipeline import stage
from pipeline.errors import UnknownNameError
from pipeline.rerank import models
from pipeline.stage import Candidates, Cutoff, Fusion, rrf

_MODULES = {
    "bm25": "pipeline.stages.bm25",
    "bm25kw": "pipeline.stages.keywords",
    "keywords": "pipeline.stages.keywords",
    "exclude": "pipeline.stages.exclude",
    "overlap": "pipeline.stages.rerank",
    "apply_query": "pipeline.stages.functions",
    "apply_doc_score": "pipeline.stages.functions",
    "apply_generic": "pipeline.stages.functions",
    "features": "pipeline.stages.features",
    "ltr": "pipeline.stages.ltr",
}
_MODEL_STAGES_MODULE = "pipeline.stages.neural"
_REGISTRY: dict[str, type] = {"cutoff": Cutoff, "candidates": Candidates, "fusion": Fusion, "rrf": rrf}
_model_stages = []  # the maker of a model's reranker stage class (name -> class), once its module is imported


def register(cls: type) -> type:
    """Class decorator: make a Stage reachable from the spec grammar by its `name`."""
    if not cls.name:
        raise TypeError(f"{cls.__name__} needs a `name` to be registered")
    if _REGISTRY.get(cls.name, cls) is not cls:
        raise TypeError(f"stage name {cls.name!r} is taken by {_REGISTRY[cls.name].__name__}")
    _REGISTRY[cls.name] = cls
    return cls


def register_model_stages(maker) -> None:
    """Called by pipeline/stages/neural.py: `maker(model_name)` is the reranker stage class of that model."""
    _model_stages[:] = [maker]


def get_stage_class(name: str) -> type:
    """The stage class (or, for `rrf`, function) that `name(...)` in a spec makes."""
    if name not in _REGISTRY and name in _MODULES:
        importlib.import_module(_MODULES[name])
    if name not in _REGISTRY and name in models.model_names():
        importlib.import_module(_MODEL_STAGES_MODULE)
        return _model_stages[0](name)
    if name not in _REGISTRY:
        raise UnknownNameError("stage", name, stage_names())
    return _REGISTRY[name]


def stage_names() -> list[str]:
    return sorted(set(_REGISTRY) | set(_MODULES) | set(models.model_names()))


stage.registered = get_stage_class  # the operators of pipeline/stage.py (`a ** b`, `function >> a`) make stages by name

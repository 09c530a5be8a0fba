"""The model registry: one file per neural reranker model in this package, or one small package for a model with
inputs of its own (hcan/, mrnn/: config, inputs, network); the file's (package's) name is the model's name.

A model file declares itself once, with `@register_model` on its `RerankModel` subclass (whose `name` must equal
the file's name). Stage names (`hcan(...)` in a spec), `irpipe train MODEL`, checkpoint loading, `irpipe encode`
and the benchmarks all find models here; listing them reads only file names (nothing imported, torch included).
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING

from pipeline.errors import UnknownNameError

if TYPE_CHECKING:
    from pipeline.rerank.model import RerankModel

_MODELS: dict[str, type] = {}


def model_names() -> list[str]:
    """Every model of the package, by file name."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def model_class(name: str) -> type["RerankModel"]:
    """The `RerankModel` subclass of the model file `name` (imported on first use)."""
    if name not in _MODELS:
        if name not in model_names():
            raise UnknownNameError("model", name, model_names())
        importlib.import_module(f"{__name__}.{name}")
    if name not in _MODELS:
        raise TypeError(f"{__name__}.{name} registers no model: decorate its RerankModel with @register_model")
    return _MODELS[name]


def register_model(cls: type["RerankModel"]) -> type["RerankModel"]:
    """Class decorator of a model file: the model becomes a spec stage (`<name>(...)`, made by
    pipeline/stages/neural.py), a training target (`irpipe train <name>`) and a checkpoint kind."""
    if not cls.name:
        raise TypeError(f"{cls.__name__} needs a `name` to be registered")
    module = cls.__module__.removeprefix(f"{__name__}.").split(".")[0]  # the model file, or the model's package
    if cls.name != module:
        raise TypeError(f"{cls.__name__}.name is {cls.name!r}; it must be the model file's name {module!r}")
    _MODELS[cls.name] = cls
    return cls

"""The model registry: one file per neural reranker model in this package, or one small package for a model with
inputs of its own (hcan/, mrnn/: config, inputs, network); the file's (package's) name is the model's name.

A model declares itself once, by its `RerankModel` subclass whose `name` is the file's (package's) name: the
registry imports the module on first use and takes that class; a model module imports nothing of the registry, so
the arrows run one way (registry -> model). Stage names (`hcan(...)` in a spec), `irpipe train MODEL`, checkpoint
loading, `irpipe encode` and the benchmarks all find models here; listing them reads only file names (nothing
imported, torch included).
"""
from __future__ import annotations

import importlib
import inspect
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
    """The `RerankModel` subclass named `name` of the model module `name` (imported on first use)."""
    if name not in _MODELS:
        if name not in model_names():
            raise UnknownNameError("model", name, model_names())
        module = importlib.import_module(f"{__name__}.{name}")
        found = [cls for _, cls in inspect.getmembers(module, inspect.isclass)
                 if getattr(cls, "name", None) == name and hasattr(cls, "config_class")
                 and cls.__module__.startswith(module.__name__)]
        if len(found) != 1:
            raise TypeError(f"{module.__name__} declares {len(found)} models named {name!r}: give its RerankModel "
                            f"subclass `name = {name!r}` (exactly one)")
        _MODELS[name] = found[0]
    return _MODELS[name]

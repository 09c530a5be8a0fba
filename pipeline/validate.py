"""Checks of configured values, one convention for all of them: a `ConfigError` that names the owner (a stage, a
model or training config, the engine, a command), the field, the value given and what is allowed; the command line
prints it as one line and exits 2.

    at_least("bm25", "hits", hits, 1, integer=True)    # bm25: hits=0; expected an integer >= 1
    between("bm25", "b", b, 0, 1)                       # bm25: b=5; expected a number between 0 and 1
    above("engine", "cpus_per_worker", cpus, 0)         # engine: cpus_per_worker=0; expected a number > 0
    choice("fusion", "norm", norm, NORMS)               # fusion: norm='max'; choose one of none, minmax, zscore
    one_word("search", "--run-tag", tag)                # search: --run-tag='my tag'; expected one word (...)
    problem("fusion", "weights", "3 weights for 2 fused stages")     # a rule between fields
    field_problem(HCANConfig, "encoder", 3)             # why a value cannot be a config dataclass's field, or None

Stages call these when they are made, configs in their `check()` (pipeline/rerank/config.py `make_config`), both
before any work. Numbers are finite and never booleans.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
from typing import Callable

from pipeline.errors import ConfigError


def problem(owner: str, name: str, message: str) -> ConfigError:
    """The ConfigError for a rule these helpers do not cover (raise it): `owner: message`, with `name` as its field."""
    return ConfigError(f"{owner}: {message}", field=name)


def choice(owner: str, name: str, value, allowed) -> None:
    """ConfigError unless `value` is one of `allowed`."""
    if value not in allowed:
        import difflib

        close = difflib.get_close_matches(value, list(map(str, allowed)), n=1) if isinstance(value, str) else []
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise problem(owner, name, f"{name}={value!r}; choose one of {', '.join(map(str, allowed))}{hint}")


def at_least(owner: str, name: str, value, low, integer: bool = False, optional: bool = False) -> None:
    """ConfigError unless `value` is a finite number (an integer when `integer`) >= `low` (None allowed when
    `optional`)."""
    in_bounds(owner, name, value, f">= {low}", lambda v: v >= low, integer, optional)


def above(owner: str, name: str, value, low, integer: bool = False, optional: bool = False) -> None:
    """ConfigError unless `value` is a finite number (an integer when `integer`) > `low`."""
    in_bounds(owner, name, value, f"> {low}", lambda v: v > low, integer, optional)


def between(owner: str, name: str, value, low, high, integer: bool = False, optional: bool = False) -> None:
    """ConfigError unless `value` is a finite number (an integer when `integer`) in [low, high]."""
    in_bounds(owner, name, value, f"between {low} and {high}", lambda v: low <= v <= high, integer, optional)


def in_bounds(owner: str, name: str, value, bounds: str, within: Callable, integer: bool, optional: bool) -> None:
    if value is None and optional:
        return
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value) or not within(value):
        raise problem(owner, name, f"{name}={value!r}; expected {'an integer' if integer else 'a number'} {bounds}")


def one_word(owner: str, name: str, value, why: str = "") -> None:
    """ConfigError unless `value` is a non-empty text without whitespace (a run tag, an id: one column of a file)."""
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        raise problem(owner, name, f"{name}={value!r}; expected one word (no spaces, tabs or newlines){why}")


def default_of(field: dataclasses.Field):
    """A dataclass field's default (its factory's value), or dataclasses.MISSING."""
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def same_kind(value, default) -> bool:
    """Whether a value fits a field by its default's type (None and missing defaults accept anything)."""
    if default is None or default is dataclasses.MISSING:
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, str):
        return isinstance(value, str)
    if isinstance(default, (list, tuple)):
        return isinstance(value, (list, tuple))
    if isinstance(default, dict):
        return isinstance(value, dict)
    return True


def field_problem(config_class: type, name: str, value) -> str | None:
    """Why `value` cannot be the field `name` of the config dataclass, or None when it can."""
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    if name not in fields:
        return f"{config_class.__name__} has no field {name!r} (fields: {', '.join(fields)})"
    default = default_of(fields[name])
    if value is None and "None" in str(fields[name].type):  # an optional field (`float | None = 1.0`)
        return None
    if not same_kind(value, default):
        return f"{name}={value!r} should be of type {type(default).__name__}, like the default {default!r}"
    return None


_KINDS = {"bool": (bool,), "int": (int,), "float": (int, float)}


def annotation_problem(parameter: inspect.Parameter, value) -> str | None:
    """Why `value` does not fit a stage parameter annotated bool / int / float (optionally `| None`), or None."""
    annotation = str(parameter.annotation).replace(" ", "")
    optional = annotation.endswith("|None")
    kinds = _KINDS.get(annotation.removesuffix("|None"))
    if kinds is None or (value is None and optional) or parameter.kind is inspect.Parameter.VAR_POSITIONAL:
        return None
    if kinds == (bool,):
        return None if isinstance(value, bool) else "expected true or false (booleans are spelled true / false)"
    if isinstance(value, bool) or not isinstance(value, kinds):
        return f"expected {'an integer' if kinds == (int,) else 'a number'}"
    return None

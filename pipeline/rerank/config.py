"""One convention for model (and training) configs: a dataclass whose fields are checked by kind and by `check()`.

    config = make_config(HCANConfig, {"encoder": "wide"}, where="hcan(...)")   # spec, --set, checkpoint: one path

Every problem is a `ConfigError` naming the field, the value and what is allowed (`choice`, `at_least`); callers
that read a file re-raise it with the file named (a checkpoint's config.json). No `__post_init__` raising
ValueError: a config holds what it was given until `make_config` checks it.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

from pipeline.errors import ConfigError


def choice(owner: str, name: str, value, allowed) -> None:
    """ConfigError unless `value` is one of `allowed`."""
    if value not in allowed:
        raise ConfigError(f"{owner}: {name}={value!r}; choose one of {', '.join(map(str, allowed))}", field=name)


def at_least(owner: str, name: str, value, low, optional: bool = False) -> None:
    """ConfigError unless `value` is a number >= `low` (None allowed when `optional`)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
        raise ConfigError(f"{owner}: {name}={value!r}; expected a number >= {low}", field=name)


def default_of(field: dataclasses.Field):
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


def make_config(config_class: type, values: dict[str, Any], base=None):
    """The config dataclass from `values` (over `base`, or the defaults), each field checked by kind, then the
    whole by its `check()`; a `ConfigError` names the field otherwise."""
    for name, value in values.items():
        problem = field_problem(config_class, name, value)
        if problem:
            raise ConfigError(problem, field=name)
    defaults = {f.name: default_of(f) for f in dataclasses.fields(config_class)}
    values = {name: tuple(v) if isinstance(defaults[name], tuple) and isinstance(v, list) else v
              for name, v in values.items()}
    config = dataclasses.replace(base, **values) if base is not None else config_class(**values)
    check = getattr(config, "check", None)
    if check is not None:
        check()
    return config


def config_to_dict(config) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(config)))  # tuples -> lists, as they come back from JSON


def recipe_fields(values) -> dict:
    """What a config (or TrainOptions) says about the model it trains, for cache keys: every field less those still at
    their `LEGACY` value (the class's `LEGACY = {field: value}`: the value that does what the class did before the
    field existed), so that a field added with its LEGACY entry leaves every recipe key, and so every cached model,
    as it was. Checkpoints saved before the field read it as that value too (checkpoint_config)."""
    legacy = json.loads(json.dumps(getattr(type(values), "LEGACY", {})))
    return {name: value for name, value in config_to_dict(values).items()
            if name not in legacy or value != legacy[name]}


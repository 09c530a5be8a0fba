"""One convention for model (and training) configs: a dataclass whose fields are checked by kind and by `check()`.

    config = make_config(HCANConfig, {"encoder": "wide"}, where="hcan(...)")   # spec, --set, checkpoint: one path

Every problem is a `ConfigError` naming the field, the value and what is allowed (the helpers of pipeline/validate.py:
`choice`, `at_least`, ...); callers that read a file re-raise it with the file named (a checkpoint's config.json). A
model config holds what it was given until `make_config` calls its `check()`.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

from pipeline.errors import ConfigError
from pipeline.rerank import migrations
from pipeline.validate import default_of, field_problem


def make_config(config_class: type, values: dict[str, Any], base=None):
    """The config dataclass from `values` (over `base`, or the defaults), each field checked by kind, then the
    whole by its `check()`; a `ConfigError` names the field otherwise."""
    for name, value in values.items():
        problem = (migrations.retired_message(config_class, name)
                   or migrations.renamed_value_message(config_class, name, value)
                   or field_problem(config_class, name, value))
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
    the value they had in effect before they existed (pipeline/rerank/migrations.py ADDED), so that a field added
    with its entry there leaves every recipe key, and so every cached model, as it was; a renamed field keyed under
    its old name; a retired field back at the value the class computes with now (migrations.RETIRED), as it was
    keyed before its retirement. Checkpoints saved before the field read it as that value too (checkpoint_config)."""
    legacy = json.loads(json.dumps(migrations.added(type(values))))
    old_names = {new: old for old, new in migrations.renamed(type(values)).items()}  # keys keep a field's old name
    fields = json.loads(json.dumps(migrations.retired(type(values)))) | config_to_dict(values)
    old_values = {name: {new: old for old, new in renames.items()}
                  for name, renames in migrations.values_renamed(type(values)).items()}
    fields = {name: old_values.get(name, {}).get(value, value) if isinstance(value, str) else value
              for name, value in fields.items()}  # a renamed value keyed as it was
    return {old_names.get(name, name): value for name, value in fields.items()
            if name not in legacy or value != legacy[name]}


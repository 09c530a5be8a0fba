"""A recipe's identity: the one place a training recipe is resolved and identified.

    identity = RecipeIdentity.resolve("monobert", "wikiqa/train", "wikiqa/dev", {"epochs": 2}, {"max_length": 128})
    identity.key()             # the cache key of the trained model (pipeline/training/recipes.py)
    identity.record()          # the recipe its checkpoint's config.json records (pipeline/training/loop.py)
    identity.resume_record()   # what a --resume must match

The key is the sha1 of the model name, the resolved training options (less how it runs: `RUNTIME_OPTIONS`), the
resolved model config, the data's checksums and the irpipe version. Options and config fields at their class's
LEGACY value are left out (`recipe_fields`): adding a field does not re-key, and so retrain, every cached model.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pipeline.version import __version__
from pipeline.data.registry import get_dataset
from pipeline.errors import ConfigError
from pipeline.rerank import models
from pipeline.rerank.config import config_to_dict, make_config, recipe_fields
from pipeline.training.distill import teacher_identity
from pipeline.training.examples import dataset_fingerprint
from pipeline.training.options import RUNTIME_OPTIONS, SHARED, TrainOptions, resolve_options


@dataclass(frozen=True)
class RecipeIdentity:
    """A recipe resolved: the model, its training options (defaults <- model <- config <- given), its config and the
    training and dev datasets."""

    model: str
    model_class: type
    options: TrainOptions
    config: Any
    train_set: Any
    dev_set: Any | None = None

    @classmethod
    def resolve(cls, model: str, train, dev=None, options: TrainOptions | dict | None = None,
                overrides: dict | None = None) -> RecipeIdentity:
        """From names (or dataset objects), options as given and model config overrides; a ConfigError for a bad
        option or field."""
        model_class = models.model_class(model)
        if isinstance(options, TrainOptions):  # resolved already: its `seed` is the config's or given with it
            options = dataclasses.asdict(options)
        else:
            overrides = dict(overrides or {}) | shared_fields(model_class.config_class, options, overrides)
        config = make_config(model_class.config_class, overrides)
        options = resolve_options(model_class, config, options, dev=dev is not None)
        return cls(model, model_class, options, config, get_dataset(train),
                   get_dataset(dev) if dev is not None else None)

    def data(self) -> dict:
        """The datasets' fingerprints (their names and files' checksums), and a checkpoint teacher's digest."""
        data = {"train": dataset_fingerprint(self.train_set),
                "dev": dataset_fingerprint(self.dev_set) if self.dev_set is not None else None}
        teacher = teacher_identity(self.options.teacher)
        return data | ({"teacher": teacher} if teacher else {})  # a checkpoint teacher's weights (distill.py)

    def key(self) -> str:
        """The cache key: sha1 of what the weights depend on (fields at their LEGACY value left out)."""
        options = {k: v for k, v in recipe_fields(self.options).items() if k not in RUNTIME_OPTIONS}
        blob = json.dumps({"model": self.model, "options": options, "config": recipe_fields(self.config),
                           "data": self.data(), "irpipe": __version__}, sort_keys=True)
        return hashlib.sha1(blob.encode()).hexdigest()

    def record(self) -> dict:
        """The recipe as the checkpoint's config.json records it (every option and field)."""
        return {"model": self.model, "train": self.train_set.name,
                "dev": self.dev_set.name if self.dev_set is not None else None,
                "options": dataclasses.asdict(self.options), "config": config_to_dict(self.config), "data": self.data()}

    def resume_record(self) -> dict:
        """What a resumed run must match (the record less `RUNTIME_OPTIONS`), as it reads back from JSON."""
        record = self.record()
        record["options"] = {k: v for k, v in record["options"].items() if k not in RUNTIME_OPTIONS}
        return json.loads(json.dumps(record))


def shared_fields(config_class: type, options: dict | None, overrides: dict | None) -> dict:
    """The SHARED names (`seed`) given as training options that the model config also has, for the config too: as
    a spec's `seed=` reaches both (training/options.py split_options), so does `train(..., options={"seed": 3})`;
    one given twice with two values is refused."""
    fields = {f.name for f in dataclasses.fields(config_class)}
    options, overrides = options or {}, overrides or {}
    shared = {name: options[name] for name in SHARED if name in options and name in fields}
    for name, value in shared.items():
        if name in overrides and overrides[name] != value:
            raise ConfigError(f"{name} is {value!r} as a training option and {overrides[name]!r} as a model config "
                              f"field: it sets both, give it once", field=name)
    return shared

"""Training recipes: a model trained once from a stage's `train=DATASET` options, then loaded from the cache.

    monobert(train=wikiqa/train, dev=wikiqa/dev, epochs=2)   ->   <irpipe cache>/models/monobert-<key>

The key is the sha1 of the model name, the resolved training options (less how it runs: device, threads, eval
batch size), the resolved model config, the data's checksums and the irpipe version. Options and config fields at
their class's LEGACY value are left out (`recipe_fields`): adding a field does not re-key, and so retrain, every
cached model.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pipeline import __version__
from pipeline.log import logger
from pipeline.rerank import models
from pipeline.rerank.config import make_config, recipe_fields
from pipeline.training.examples import dataset_fingerprint, get_dataset
from pipeline.training.loop import train
from pipeline.training.options import RUNTIME_OPTIONS, resolve_options


class Recipe:
    """A training recipe of the reranker stage (`monobert(train=wikiqa/train, dev=wikiqa/dev, epochs=2)`)."""

    def __init__(self, model: str, train: str, dev: str | None, options: dict, overrides: dict,
                 device: str = "auto", amp: str | None = None, threads: int | None = None):
        self.model, self.train, self.dev = model, train, dev
        self.options = dict(options) | {"device": device, "amp": amp, "threads": threads}
        self.overrides = dict(overrides)

    def key(self) -> str:
        cls = models.model_class(self.model)
        config = make_config(cls.config_class, self.overrides)
        options = recipe_fields(resolve_options(cls, config, self.options))
        for name in RUNTIME_OPTIONS:
            options.pop(name, None)
        data = {"train": dataset_fingerprint(get_dataset(self.train)),
                "dev": dataset_fingerprint(get_dataset(self.dev)) if self.dev else None}
        blob = json.dumps({"model": self.model, "options": options, "config": recipe_fields(config), "data": data,
                           "irpipe": __version__}, sort_keys=True)
        return hashlib.sha1(blob.encode()).hexdigest()

    def directory(self) -> Path:
        from pipeline.cache import cache_root

        return cache_root() / "models" / f"{self.model}-{self.key()[:20]}"

    def ensure_trained(self) -> Path:
        directory = self.directory()
        config = directory / "config.json"
        if config.is_file() and json.loads(config.read_text(encoding="utf-8")).get("training", {}).get("finished"):
            logger.info("%s: trained model from the cache, %s", self.model, directory)
            return directory
        logger.info("%s: training on %s (recipe not in the cache yet) into %s", self.model, self.train, directory)
        train(self.model, self.train, directory, dev=self.dev, options=self.options, overrides=self.overrides,
              resume=True)
        return directory

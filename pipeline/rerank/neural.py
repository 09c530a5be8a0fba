"""The reranker stage of every neural model, and `register_model`, the decorator that makes a model file one.

    @register_model                                                # in pipeline/rerank/models/monobert.py
    class MonoBERT(RerankModel): name = "monobert"; ...

    bm25() % 100 >> monobert(ckpt=models/monobert-wikiqa)         # a checkpoint folder (pipeline/rerank/checkpoint.py)
    monobert(train=dl19-passage, epochs=2, seed=1)                # a training recipe (pipeline/training/recipes.py)
    biencoder()                                                   # a pretrained model, zero-shot (`pretrained` models)
    biencoder(store=stores/dl20)                                  # stored document encodings (late-interaction models)

With `train=DATASET` (+ `dev=`, and any `TrainOptions` field: epochs, lr, seed, negatives, measure...) the model is
trained once and kept under `<irpipe cache>/models/<key>` (key = model + recipe + model config + the data's
checksums); later runs load it from there. Other keyword arguments set fields of the model's config
(`monobert(ckpt=DIR, max_length=512)`, `hcan(train=trecqa/train, encoder=wide)`). `batch_size`, `device`
("auto": CUDA when present) and `threads` are about how the model runs, not what it computes: no part of a key.
`amp` ("bf16" | "fp16" autocast) is part of a recipe's key: training in half precision computes another model.

A late-interaction model (`LateInteraction`) scores through its stored-encoding path: documents are encoded alone
(read from `store=DIR` when given, the missing ones encoded on the fly and counted in the log), each query once.
A store made by another model is refused. The store's digest joins the stage's cache fingerprint.
"""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
from pathlib import Path
from typing import ClassVar

from pipeline.errors import ConfigError
from pipeline.log import logger
from pipeline.rerank import models
from pipeline.rerank.base import Reranker
from pipeline.rerank.checkpoint import checkpoint_digest, file_digest, load_checkpoint, read_checkpoint_config
from pipeline.rerank.config import at_least, config_to_dict, make_config
from pipeline.rerank.model import LateInteraction, RerankModel
from pipeline.rerank.pairs import Pair
from pipeline.rerank.scoring import DEVICES, check_amp, predict, resolve_device
from pipeline.stage import register
from pipeline.training.options import RUNTIME_OPTIONS, TrainOptions, check_options
from pipeline.training.recipes import Recipe


class NeuralReranker(Reranker):
    """Rerank with a neural model: a checkpoint (`ckpt=DIR`), a training recipe (`train=DATASET`), or, for a
    pretrained model, as it comes (neither)."""

    model_class: ClassVar[type[RerankModel]]  # set by register_model

    def __init__(self, ckpt: str | None = None, train: str | None = None, dev: str | None = None,
                 batch_size: int = 64, device: str = "auto", amp: str | None = None, threads: int | None = None,
                 index: str | None = None, store: str | None = None, **options):
        name = self.name
        if ckpt is not None and train is not None:
            raise ConfigError(f"{name}: a checkpoint folder (ckpt=DIR) or a training recipe (train=DATASET), not both")
        if ckpt is None and train is None and not self.model_class.pretrained:
            raise ConfigError(f"{name} needs a checkpoint folder (ckpt=DIR) or a training recipe "
                              "(train=DATASET [, dev=DATASET, epochs=N, ...])")
        if dev is not None and train is None:
            raise ConfigError(f"{name}: dev= goes with a training recipe (train=DATASET)", field="dev")
        at_least(name, "batch_size", batch_size, 1)
        at_least(name, "threads", threads, 1, optional=True)
        if device not in DEVICES and not str(device).startswith("cuda:"):
            raise ConfigError(f"{name}: device={device!r}; choose one of auto, cpu, cuda, cuda:N", field="device")
        if store is not None and not issubclass(self.model_class, LateInteraction):
            raise ConfigError(f"{name} scores query and document together: it has no stored encodings (store=)",
                              field="store")
        self.ckpt, self.train, self.dev = (str(ckpt) if ckpt is not None else None), train, dev
        self.batch_size, self.device, self.amp, self.index = int(batch_size), device, check_amp(amp), index
        self.threads, self.store = threads, (str(store) if store is not None else None)
        config_fields = {f.name for f in dataclasses.fields(self.model_class.config_class)}
        train_fields = {f.name for f in dataclasses.fields(TrainOptions)} - set(RUNTIME_OPTIONS) - {"amp"}
        self.overrides = {k: v for k, v in options.items() if k in config_fields}
        self.train_options = {k: v for k, v in options.items() if k not in config_fields}
        for key in self.train_options:
            if key not in train_fields:
                close = difflib.get_close_matches(key, sorted(config_fields | train_fields), n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise ConfigError(f"{name} has no option {key!r}{hint} (model config: "
                                  f"{', '.join(sorted(config_fields))}; training: {', '.join(sorted(train_fields))})",
                                  field=key)
            if train is None:
                raise ConfigError(f"{name}: {key}= is a training option; it goes with train=DATASET", field=key)
        make_config(self.model_class.config_class, self.overrides)  # checked now, not after minutes of work
        check_options(self.train_options)
        self.truncated = 0  # pairs truncated by the last transform
        self._model: RerankModel | None = None

    def config(self) -> dict:
        config = {"ckpt": self.ckpt} if self.ckpt is not None else {"train": self.train, "dev": self.dev}
        config.update(sorted(self.train_options.items()))
        config.update(sorted(self.overrides.items()))
        config.update({"amp": self.amp, "index": self.index, "store": self.store})
        return {k: v for k, v in config.items() if v is not None}

    # -- the model ---------------------------------------------------------------------------------------------
    def model_digest(self) -> str:
        """What identifies the model's weights: the checkpoint's digest, the recipe's key, or (pretrained) the
        config and the digest of the weights it starts from."""
        if self.ckpt:
            return checkpoint_digest(self.ckpt)
        if self.train:
            return self.recipe().key()
        return pretrained_digest(self.model_class, make_config(self.model_class.config_class, self.overrides))

    def arguments(self) -> dict:
        """The keyword arguments that make this stage again (elsewhere: a cluster's worker), less the dataset."""
        arguments = {"ckpt": self.ckpt, "train": self.train, "dev": self.dev, "batch_size": self.batch_size,
                     "device": self.device, "amp": self.amp, "threads": self.threads, "index": self.index,
                     "store": self.store}
        return {k: v for k, v in arguments.items() if v is not None} | self.train_options | self.overrides

    def fingerprint(self) -> str:
        store = self.encoding_store().digest() if self.store else ""
        return f"{self.model_digest()}\x1f{store}\x1f{super().fingerprint()}"

    def recipe(self) -> Recipe:
        return Recipe(self.name, self.train, self.dev, self.train_options, self.overrides, device=self.device,
                      amp=self.amp, threads=self.threads)

    def load(self) -> RerankModel:
        """The model, loaded once per stage."""
        if self._model is None:
            if self.ckpt:
                self._model = load_checkpoint(self.ckpt, self.overrides)
            elif self.train:
                self._model = load_checkpoint(self.recipe().ensure_trained())
            else:
                self._model = self.model_class(make_config(self.model_class.config_class, self.overrides))
        return self._model

    def encoding_store(self):
        from pipeline.rerank.store import EncodingStore

        return EncodingStore.open(self.store, self.name, self.model_digest())

    # -- scoring -----------------------------------------------------------------------------------------------
    def score(self, pairs: list[Pair]) -> list[float]:
        from pipeline import engine

        if engine.current() is not None:  # the ray engine: shards of the pairs on a cluster's workers
            from pipeline.engine.tasks import score_on_cluster

            scores, self.truncated, _ = score_on_cluster(self, pairs, engine.current())
            self._warn_truncated(self.truncated, len(pairs))
            return scores
        model = self.load()
        if self.threads:
            import torch

            torch.set_num_threads(self.threads)
        device = resolve_device(self.device)
        if isinstance(model, LateInteraction):
            from pipeline.rerank.store import score_late_interaction

            store = self.encoding_store() if self.store else None
            return score_late_interaction(model, pairs, store, self.batch_size, device, self.amp, desc=self.name)
        scored = predict(model, pairs, self.batch_size, device, self.amp, desc=self.name)
        self.truncated = scored.truncated
        self._warn_truncated(scored.truncated, len(pairs), model.config)
        return scored.scores

    def _warn_truncated(self, truncated: int, total: int, config=None) -> None:
        if truncated:
            limits = {k: v for k, v in dataclasses.asdict(config).items() if "length" in k} if config else {}
            logger.warning("%s: %d of %d pairs were truncated to fit the model (%s)", self.name, truncated, total,
                           ", ".join(f"{k}={v}" for k, v in limits.items()) or "its length limits")


def pretrained_digest(model_class: type[RerankModel], config) -> str:
    """sha1 of a pretrained model's name, config and the weights file of its `bert` folder (when it has one)."""
    digest = hashlib.sha1(json.dumps([model_class.name, config_to_dict(config)], sort_keys=True).encode())
    bert = getattr(config, "bert", None)
    if bert is not None:
        from pipeline.rerank.bert import bert_folder

        digest.update(file_digest(bert_folder(bert) / "model.safetensors").encode())
    return digest.hexdigest()


def register_model(model_class: type[RerankModel]) -> type[RerankModel]:
    """Class decorator of a model file: the model becomes a spec stage (`<name>(...)`), a training target
    (`irpipe train <name>`) and a checkpoint kind. The stage class is `model_class.stage`."""
    if not model_class.name:
        raise TypeError(f"{model_class.__name__} needs a `name` to be registered")
    models.add(model_class)
    stage = type(f"{model_class.__name__}Reranker", (NeuralReranker,),
                 {"name": model_class.name, "model_class": model_class, "__module__": model_class.__module__,
                  "__doc__": f"Rerank with {model_class.__name__} ({model_class.name}): see NeuralReranker."})
    model_class.stage = register(stage)
    return model_class


def reranker_for_model(model: str, **kwargs) -> NeuralReranker:
    """The stage of a checkpoint folder (the model named in its config.json) or, for a pretrained model's name,
    of that model as it comes."""
    if Path(model).is_dir() or "/" in model or model not in models.model_names():
        name = read_checkpoint_config(model)["model"]
        kwargs["ckpt"] = str(model)
    else:
        name = model
    return models.model_class(name).stage(**kwargs)

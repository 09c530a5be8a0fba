"""The reranker stage of every neural model: each model file of pipeline/rerank/models/ (a `RerankModel` with
its `name`) is a stage of that name, made here on first use (`reranker_class(name)`).

    bm25() % 100 >> monobert(ckpt=models/monobert-wikiqa)         # a checkpoint folder (pipeline/rerank/checkpoint.py)
    monobert(ckpt=hf:cross-encoder/ms-marco-MiniLM-L-6-v2)        # a model of the local Hugging Face cache (hf_cache.py)
    monobert(train=dl19-passage, epochs=2, seed=1)                # a training recipe (pipeline/training/recipes.py)
    biencoder()                                                   # a pretrained model, zero-shot (`pretrained` models)
    biencoder(store=stores/dl20)                                  # stored document encodings (late-interaction models)

With `train=DATASET` (+ `dev=`, and any `TrainOptions` field: epochs, lr, seed, negatives, measure...) the model is
trained once and kept under `<irpipe cache>/models/<key>` (key = model + recipe + model config + the data's
checksums); later runs load it from there. Other keyword arguments set fields of the model's config
(`monobert(ckpt=DIR, max_length=512)`, `hcan(train=trecqa/train, encoder=wide)`). `batch_size` (pairs a batch at
most), `batch_tokens` (padded positions a batch at most; both default to the device's, pipeline/rerank/batching.py),
`device` ("auto": CUDA when present) and `threads` are about how the model runs, not what it computes: no part of
a key. `amp` ("auto": bf16 autocast on CUDA and on a CPU with native bf16, else none; "none" | "bf16" | "fp16")
and `quantize` (an int8 scheme, pipeline/rerank/quantize.py: the linear layers dynamically quantised, CPU) change
the scores a little: they are part of the stage's config (an explicit `amp` is also part of a recipe's key:
training in half precision computes another model); where "auto" runs bf16 the stage cache keys the bf16 it runs.

A late-interaction model (`LateInteraction`) scores through its stored-encoding path: documents are encoded alone
(read from `store=DIR` when given, the missing ones encoded on the fly and counted in the log), each query once;
a stored candidate needs no text. A store made by another model is refused. The store's digest joins the stage's
cache fingerprint.

Bind loads the model (training a recipe first, through the recipe cache), opens and checks the store, resolves
the device, and, on the ray engine, hands scoring to the cluster's workers, which load the same checkpoint.
`transform` (pipeline/stages/rerank.py) then only scores.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import sys
from pathlib import Path
from typing import ClassVar

from pipeline.binding import Binding
from pipeline.declared import check_applies, check_declared, declarations, markdown_table
from pipeline.errors import ConfigError
from pipeline.log import logger
from pipeline.rerank import models
from pipeline.rerank.checkpoint import ModelSource, checkpoint_digest, file_digest, read_checkpoint_config
from pipeline.rerank.config import config_to_dict, make_config
from pipeline.rerank.model import LateInteraction, RerankModel
from pipeline.rerank.pairs import Pair
from pipeline.rerank.scoring import Runtime, check_amp, check_quantize, predict, resolve_amp, \
    resolve_device
from pipeline.stages import register, register_model_stages
from pipeline.stages.rerank import Reranker
from pipeline.training.options import RUNTIME, SOURCES, TrainOptions, check_namespaces, \
    resolve_options, split_options, training_names
from pipeline.training.recipes import Recipe
from pipeline.validate import default_of


class NeuralReranker(Reranker):
    """Rerank with a neural model: a checkpoint (`ckpt=DIR`), a training recipe (`train=DATASET`), or, for a
    pretrained model, as it comes (neither)."""

    model_class: ClassVar[type[RerankModel]]  # set by reranker_class
    model: RerankModel | None = None  # resolved by bind: loaded (a recipe trained first)
    _store = None                     # resolved by bind: the opened EncodingStore
    _cluster = None                   # resolved by bind: the EngineOptions of a cluster to score on (ray engine)

    def __init__(self, ckpt: str | None = None, train: str | None = None, dev: str | None = None,
                 batch_size: int | None = None, device: str = "auto", amp: str | None = "auto",
                 threads: int | None = None, index: str | None = None, store: str | None = None,
                 batch_tokens: int | None = None, quantize: str | None = None, compile: bool = False, **options):
        name = self.name
        if ckpt is not None and train is not None:
            raise ConfigError(f"{name}: a checkpoint folder (ckpt=DIR) or a training recipe (train=DATASET), not both")
        if ckpt is None and train is None and not self.model_class.pretrained:
            raise ConfigError(f"{name} needs a checkpoint folder (ckpt=DIR) or a training recipe "
                              "(train=DATASET [, dev=DATASET, epochs=N, ...])")
        if dev is not None and train is None:
            raise ConfigError(f"{name}: dev= goes with a training recipe (train=DATASET)", field="dev")
        check_declared(name, Runtime(batch_size, device, amp, threads, batch_tokens, quantize, compile))  # declared once
        if compile and issubclass(self.model_class, LateInteraction):
            raise ConfigError(f"{name} scores from its encoders (late interaction), not one forward over a pair: "
                              "compile=true would change nothing", field="compile")
        if store is not None and not issubclass(self.model_class, LateInteraction):
            raise ConfigError(f"{name} scores query and document together: it has no stored encodings (store=)",
                              field="store")
        self.ckpt, self.train, self.dev = (str(ckpt) if ckpt is not None else None), train, dev
        self.batch_size, self.device, self.index = batch_size, device, index
        self.amp = "none" if amp is None else check_amp(amp)  # None: `amp=none` in a spec
        self.batch_tokens, self.quantize, self.compile = batch_tokens, check_quantize(quantize), bool(compile)
        self.threads, self.store = threads, (str(store) if store is not None else None)
        split = split_options(name, self.model_class.config_class, options)  # runtime ones are the arguments above
        self.overrides = split.config
        # a SHARED name the config takes (`hcan(seed=1)`) reaches training through it (resolve_options)
        self.train_options = {k: v for k, v in split.training.items() if k not in split.config}
        for key in self.train_options:
            if train is None:
                raise ConfigError(f"{name}: {key}= is a training option; it goes with train=DATASET", field=key)
        config = make_config(self.model_class.config_class, self.overrides)  # checked now, not after minutes of work
        check_applies(name, config, self.overrides, {f.name: default_of(f) for f in dataclasses.fields(config)}, {})
        if train is not None:
            resolve_options(self.model_class, config, self.train_options, dev=dev is not None)
        self.truncated = 0  # pairs truncated by the last transform

    def with_training(self, **options) -> "NeuralReranker":
        """The same stage with training options changed (ltr's cross_fit: `hold_out=i/K`), checked as a new one."""
        return type(self)(train=self.train, dev=self.dev, batch_size=self.batch_size, device=self.device,
                          amp=self.amp, threads=self.threads, index=self.index, store=self.store,
                          batch_tokens=self.batch_tokens, quantize=self.quantize, compile=self.compile,
                          **{**self.train_options, **options}, **self.overrides)

    def config(self) -> dict:
        config = {"ckpt": self.ckpt} if self.ckpt is not None else {"train": self.train, "dev": self.dev}
        config.update(sorted(self.train_options.items()))
        config.update(sorted(self.overrides.items()))
        config.update({"amp": self.amp if self.amp != "auto" else None, "quantize": self.quantize,
                       "compile": self.compile or None, "index": self.index, "store": self.store})
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

    def runtime(self) -> Runtime:
        return Runtime(self.batch_size, self.device, self.amp, self.threads, self.batch_tokens, self.quantize,
                       self.compile)

    def fingerprint(self) -> str:
        if self._store is not None:
            store = self._store.digest()
        else:  # not bound yet: the manifest as it is on disk
            from pipeline.rerank.store import manifest_digest, read_manifest

            store = manifest_digest(read_manifest(Path(self.store))) if self.store else ""
        fingerprint = f"{self.model_digest()}\x1f{store}\x1f{super().fingerprint()}"
        # the precision the scores are computed in, as resolved here (auto: bf16 on CUDA or a CPU with native bf16),
        # with the score head's: fp32 under autocast since the head left bf16 (layers.fp32_head), so a score cached
        # from a bf16 head is not reused for one of an fp32 head
        amp = resolve_amp(self.amp, resolve_device(self.device), inference=not self.quantize and
                          self.model_class.auto_bf16)
        fingerprint += f"\x1famp={amp}\x1fhead=fp32" if amp else ""
        return fingerprint

    def recipe(self) -> Recipe:
        return Recipe(self.name, self.train, self.dev, self.train_options, self.overrides, device=self.device,
                      amp=self.amp if self.amp in ("bf16", "fp16") else None, threads=self.threads)

    # -- bind ----------------------------------------------------------------------------------------------------
    def resolve(self, binding: Binding) -> None:
        """The model (a recipe trained first, once, through the recipe cache), the store, the engine, then the
        candidates' texts (a stored candidate needs none)."""
        self._cluster = binding.on_cluster
        if self._cluster is not None and issubclass(self.model_class, LateInteraction):
            raise ConfigError(f"{self.name} is a late-interaction model: on the ray engine, encode its documents "
                              f"(`irpipe encode --engine ray ... --output STORE`), then rerank from the store "
                              f"(store=STORE) with the local engine", field="engine")
        self.resolve_model(load=self._cluster is None)
        if self.store is not None:
            from pipeline.rerank.store import EncodingStore

            self._store = EncodingStore.open(self.store, self.name, self.model_digest())
        super().resolve(binding)

    def resolve_model(self, load: bool = True) -> None:
        """Where the model comes from (`source`: a checkpoint, a recipe's, trained now if it is not in the recipe
        cache, or a pretrained model), and, with `load`, the model itself on its device (`irpipe encode` binds
        the model alone, through here)."""
        checkpoint = self.ckpt or (str(self.recipe().ensure_trained()) if self.train else None)
        overrides = tuple(sorted(self.overrides.items())) if self.ckpt or not self.train else ()  # a recipe's: in it
        self.source = ModelSource(self.name, checkpoint, overrides)
        if load:
            runtime = self.runtime()
            device = runtime.start()
            self.model = runtime.place(self.source.load(), device)

    def stored(self, docid: str) -> bool:
        return self._store is not None and docid in self._store

    # -- compute -------------------------------------------------------------------------------------------------
    def score(self, pairs: list[Pair]) -> list[float]:
        if self._cluster is not None:  # the ray engine: shards of the pairs on a cluster's workers
            from pipeline.rerank.on_cluster import score_on_cluster

            scores, self.truncated, _ = score_on_cluster(self.source, self.runtime(), self.model_digest(), pairs,
                                                         self._cluster)
            self._warn_truncated(self.truncated, len(pairs))
            return scores
        device = self.runtime().start()
        if isinstance(self.model, LateInteraction):
            from pipeline.rerank.store import score_late_interaction

            return score_late_interaction(self.model, pairs, self._store, self.batch_size, device, self.amp,
                                          desc=self.name, batch_tokens=self.batch_tokens)
        scored = predict(self.model, pairs, self.batch_size, device, self.amp, desc=self.name,
                         batch_tokens=self.batch_tokens)
        self.truncated = scored.truncated
        self._warn_truncated(scored.truncated, len(pairs), self.model.config)
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


@functools.cache
def reranker_class(name: str) -> type[NeuralReranker]:
    """The stage class of the model file `name` (pipeline/rerank/models/<name>.py), made once: `ir.<name>` of the
    package, `<name>(...)` of the spec grammar; its docstring and signature list every option with its default."""
    model_class = models.model_class(name)
    check_namespaces(name, model_class.config_class)
    stage = type(f"{model_class.__name__}Reranker", (NeuralReranker,),
                 {"name": name, "model_class": model_class, "__module__": __name__})
    groups = _option_groups(stage)
    stage.__doc__, stage.__signature__ = _options_doc(stage, groups), _options_signature(groups)
    return register(stage)


_SOURCE_DOCS = {"ckpt": "a checkpoint folder, or hf:ORG/NAME of the local Hugging Face cache",
                "train": "a training recipe's dataset (trained once, cached)",
                "dev": "its dev set (picks the best epoch)", "index": "an index for candidate texts",
                "store": "stored document encodings (late interaction)"}


def _option_groups(stage: type[NeuralReranker]) -> dict[str, dict]:
    """namespace -> {option: default} of a reranker stage (the model's training defaults applied)."""
    parameters = inspect.signature(NeuralReranker.__init__).parameters
    config = {f.name: default_of(f) for f in dataclasses.fields(stage.model_class.config_class)}
    training = {f.name: default_of(f) for f in dataclasses.fields(TrainOptions) if f.name in training_names()}
    training |= {k: v for k, v in getattr(stage.model_class, "training_defaults", {}).items() if k in training}
    return {"source": {k: parameters[k].default for k in SOURCES}, "config": config, "training": training,
            "runtime": {k: parameters[k].default for k in RUNTIME}}


def _options_doc(stage: type[NeuralReranker], groups: dict[str, dict]) -> str:
    model, name = stage.model_class, stage.name
    summary = (sys.modules[model.__module__].__doc__ or model.__name__).strip().splitlines()[0]  # the model file's
    how = "ckpt=DIR or train=DATASET" + (" (or neither: the pretrained model as it comes)" if model.pretrained else "")
    lines = [f"{name}(...): rerank with {summary}", "",
             f"Where the model comes from: {how}. Example:", "",
             "    >>> import pipeline as ir",
             f"    >>> pipe = ir.bm25() % 100 >> ir.{name}(ckpt='models/{name}')",
             f"    >>> pipe = ir.bm25() % 100 >> ir.{name}(train='wikiqa/train', dev='wikiqa/dev', epochs=2)", "",
             "Options, each in one namespace (pipeline/training/options.py; `seed` in both config and training):", ""]
    titles = {"source": "sources", "config": f"model config ({model.config_class.__name__}; a checkpoint's own values "
              "unless given)", "training": "training (with train=DATASET; this model's defaults)",
              "runtime": "runtime (how it runs; amp and quantize change scores a little)"}
    declared = {"source": {}, "config": declarations(model.config_class), "training": declarations(TrainOptions),
                "runtime": declarations(Runtime)}
    for group, options in groups.items():
        lines.append(f"  {titles[group]}:")
        for k, v in options.items():
            known = declared[group]
            note = _SOURCE_DOCS[k] if group == "source" else known[k].describe() if k in known else ""
            lines.append(f"    {k} = {v!r}" + (f"  # {note}" if note else ""))
    return "\n".join(lines) + "\n"


def _options_signature(groups: dict[str, dict]) -> inspect.Signature:
    seen, parameters = set(), []
    for options in groups.values():
        for key, default in options.items():
            if key not in seen:
                seen.add(key)
                parameters.append(inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=default))
    return inspect.Signature(parameters)


def options_page() -> str:
    """docs/options.md: the training options, then each model's config, as declared (pipeline/declared.py)."""
    parts = ["# Options of the neural stages\n",
             "Generated from the declarations (pipeline/declared.py) by `python -c \"from pipeline.stages.neural import "
             "options_page; print(options_page(), end='')\" > docs/options.md`; tests/test_declared.py checks it is "
             "current. An option given where it does not act (the *acts* column) is refused when the stage is made. "
             "The runtime options follow the training options.\n",
             "## Training (with `train=DATASET`)\n", markdown_table(TrainOptions),
             "\n## Runtime (how a model runs, not what it computes; every neural stage)\n",
             markdown_table(Runtime)]
    for name in models.model_names():
        model = models.model_class(name)
        parts += [f"\n## `{name}` ({model.config_class.__name__})\n", markdown_table(model.config_class)]
        if getattr(model, "training_defaults", None):
            shown = ", ".join(f"{k}={v}" for k, v in model.training_defaults.items())
            parts.append(f"\nIts training defaults: {shown}.\n")
    return "\n".join(parts)


def reranker_for_model(model: str, **kwargs) -> NeuralReranker:
    """The stage of a checkpoint folder (the model named in its config.json) or, for a pretrained model's name,
    of that model as it comes."""
    if Path(model).is_dir() or "/" in model or model not in models.model_names():
        name = read_checkpoint_config(model)["model"]
        kwargs["ckpt"] = str(model)
    else:
        name = model
    return reranker_class(name)(**kwargs)


register_model_stages(reranker_class)

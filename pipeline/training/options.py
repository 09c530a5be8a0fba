"""Training hyper-parameters (`TrainOptions`), and the one resolver of a neural stage's options.

A neural stage's keyword options (`addax(train=wikiqa/train, lr=1e-4, code_sharpness=4, device=cpu)`, or
`irpipe train`'s flags) fall into exactly one of three namespaces (`split_options`):

    model config   what the network is          the model's config dataclass (code_sharpness, max_length, ...)
    training       how its weights are learnt   `TrainOptions` less the runtime names (epochs, lr, negatives, ...)
    runtime        how it runs                  RUNTIME (device, amp, threads, batch sizes, quantize)

No name is in two of them, but `seed` (SHARED): HCAN's and MRNN's configs draw their unknown-word rows with it, and
it seeds their training run too. `check_namespaces` refuses a model whose config reuses another namespace's name
when its stage class is made (pipeline/stages/neural.py). Training options resolve as: the defaults below <- the
model class's `training_defaults` <- the config's `seed` <- what the caller passes. So HCAN trains with SGD +
Nesterov and LR halving on a dev plateau, BERT models with AdamW and linear warm-up/decay. What a model's loss is
(and its margin) belongs to the model's config.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pipeline.errors import ConfigError
from pipeline.rerank import migrations
from pipeline.validate import at_least, choice, field_problem

NEGATIVES = ("labelled", "bm25", "keyword", "random")
BALANCE = ("none", "length")
OPTIMIZERS = ("adamw", "adam", "sgd")
SCHEDULES = ("linear", "plateau", "constant")
RUNTIME_OPTIONS = ("device", "eval_batch_size", "threads")  # how, not what: neither in recipe keys nor resume checks
# The runtime namespace of a neural stage: how the model runs (pipeline/rerank/scoring.py Runtime). `amp` is here
# too although an explicit one joins a recipe's key: training in half precision computes another model.
RUNTIME = ("device", "amp", "threads", "batch_size", "batch_tokens", "quantize")
SOURCES = ("ckpt", "train", "dev", "index", "store")  # where a neural stage's model, candidates and encodings are
SHARED = ("seed",)  # in the model config and the training options at once (both take it)


@dataclass
class TrainOptions:
    """Training hyper-parameters; the defaults suit fine-tuning a BERT cross-encoder."""

    epochs: int = 3
    lr: float = 2e-5
    train_batch_size: int = 16
    seed: int = 0
    negatives: str = "labelled"      # labelled | bm25 | keyword | random (sampled: pipeline/training/negatives.py)
    depth: int = 100                 # bm25 negatives and dev runs without shipped candidates: hits per query
    negatives_per_positive: int = 1  # "pairs" sampling: negatives drawn per positive each epoch; keyword | random
                                     # negatives: sampled negatives per positive (once, before training)
    negatives_dict: str = ""         # keyword negatives / replacement: the keyword dictionary (preset or TSV)
    alpha: float = 0.6               # keyword negatives: BM25(q, Q) / BM25(q, q) below this
    beta: float = 0.2                # keyword negatives: keyword non-overlap ratio above this
    replace_ratio: float = 0.0       # keyword replacement: share of the queries with a keyword that get one more
                                     # negative, the query with a keyword swapped for another of its domain
    min_rel: int | None = None       # label >= min_rel is positive; None: the dataset's rel_level
    train_queries: int | None = None  # keep only the first N training queries (budgets, smoke tests)
    teacher: str = ""                # distillation: a pretrained model's name or a checkpoint folder whose scores of
                                     # the training candidates are the targets, no qrels read (training/distill.py)
    teacher_group: int = 8           # distillation: candidates of one query compared by one listwise KL term
    balance: str = "none"            # none | length: as many positives as negatives in each length tenth (examples.py)
    optimizer: str = "adamw"         # adamw | adam | sgd
    weight_decay: float = 0.01       # on matrices only (not biases, norms)
    momentum: float = 0.9            # sgd
    nesterov: bool = False           # sgd
    schedule: str = "linear"         # linear: warm-up then linear decay per step; plateau: x factor per epoch; constant
    warmup: float = 0.1              # linear: fraction of all steps spent warming up
    plateau_factor: float = 0.5
    plateau_patience: int = 2
    measure: str = "AP"              # dev measure that picks the best epoch (ir-measures name), or "loss"
    patience: int | None = None      # stop after this many epochs without a better dev score; None: never
    keep_start: bool = False         # score the untrained model on dev first ("epoch 0"): it is the checkpoint kept
                                     # unless an epoch beats it (a start that ranks well already: init=identity)
    max_grad_norm: float | None = 1.0
    eval_batch_size: int = 64
    bucket: int = 50                 # sort pairs by length within windows of this many batches (1: off): less padding
    device: str = "auto"
    amp: str | None = None           # bf16 | fp16 autocast
    threads: int | None = None       # torch CPU threads; None: torch's default (all cores). On a busy machine 1 can be
                                     # several times faster than 2 (threads wait for each other at every op)
    deterministic: bool = False      # torch.use_deterministic_algorithms and a fixed thread count (threads, or 1):
                                     # the same weights on every run of one machine; see `make_deterministic`
    # An option added after the first recipes were keyed goes into pipeline/rerank/migrations.py ADDED with the value
    # that trains as before it existed: at that value it stays out of recipe keys (recipe_fields).

    @property
    def scoring_amp(self) -> str:
        """The autocast of the training's own scoring (the dev set, a teacher's targets): `amp` as set, else none
        (fp32) -- never inference's "auto", which is bf16 on some CPUs: the same numbers on every machine."""
        return self.amp or "none"

    def check(self) -> None:
        choice("training", "negatives", self.negatives, NEGATIVES)
        choice("training", "balance", self.balance, BALANCE)
        choice("training", "optimizer", self.optimizer, OPTIMIZERS)
        choice("training", "schedule", self.schedule, SCHEDULES)
        for name in ("epochs", "train_batch_size", "depth", "negatives_per_positive", "eval_batch_size", "bucket"):
            at_least("training", name, getattr(self, name), 1)
        at_least("training", "teacher_group", self.teacher_group, 2)
        if self.teacher and (self.negatives not in ("labelled", "bm25") or self.balance != "none"):
            raise ConfigError(f"training: teacher={self.teacher} scores the dataset's candidates and reads no labels; "
                              f"negatives={self.negatives}, balance={self.balance} would sample by labels",
                              field="teacher")
        for name in ("threads", "train_queries", "min_rel", "patience"):
            at_least("training", name, getattr(self, name), 0 if name == "min_rel" else 1, optional=True)
        for name in ("lr", "weight_decay", "momentum", "warmup", "plateau_factor", "alpha", "beta", "replace_ratio"):
            at_least("training", name, getattr(self, name), 0)
        at_least("training", "max_grad_norm", self.max_grad_norm, 0, optional=True)
        for name in ("alpha", "beta"):  # a ratio that samples nothing would be a setting silently without effect
            if self.negatives != "keyword" and getattr(self, name) != getattr(TrainOptions, name):
                raise ConfigError(f"training: {name}={getattr(self, name)} is a threshold of keyword negatives; it "
                                  f"acts with negatives=keyword only (negatives={self.negatives}). ADDAX's code "
                                  "sharpness, once also called alpha, is code_sharpness=", field=name)


def check_options(values: dict) -> TrainOptions:
    """TrainOptions from `values`: known names, values of the field's kind, the whole checked (ConfigError)."""
    for name, value in values.items():
        problem = field_problem(TrainOptions, name, value)
        if problem:
            raise ConfigError(f"training option {problem}", field=name)
    options = TrainOptions(**values)
    options.check()
    return options


def resolve_options(model_cls: type, config, given: dict | None = None) -> TrainOptions:
    """TrainOptions defaults <- model class `training_defaults` <- the config's SHARED fields (`seed`) <- `given`."""
    values = dict(getattr(model_cls, "training_defaults", {}))
    values.update({f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name in SHARED})
    values.update(given or {})
    return check_options(values)


def training_names() -> set[str]:
    """The training namespace: TrainOptions' fields less those about how it runs."""
    return {f.name for f in dataclasses.fields(TrainOptions)} - set(RUNTIME_OPTIONS) - set(RUNTIME)


def check_namespaces(model: str, config_class: type) -> None:
    """TypeError when a model config field is also a training, runtime or source name (SHARED aside): one name would
    set two things, as ADDAX's `alpha` once did (code sharpness and the keyword-negatives ratio at once)."""
    fields = {f.name for f in dataclasses.fields(config_class)}
    for namespace, names in (("training", training_names()), ("runtime", set(RUNTIME) | set(RUNTIME_OPTIONS)),
                             ("source", set(SOURCES))):
        clash = sorted((fields & names) - set(SHARED))
        if clash:
            raise TypeError(f"{model}: {config_class.__name__} field(s) {', '.join(clash)} are {namespace} options "
                            f"too; rename the field (pipeline/rerank/migrations.py RENAMED keeps old checkpoints)")


@dataclass(frozen=True)
class StageOptions:
    """A neural stage's keyword options, each in its namespace (`seed` in both config and training)."""

    config: dict
    training: dict
    runtime: dict


def split_options(model: str, config_class: type, options: dict) -> StageOptions:
    """Send each option to its one namespace; an unknown name is a ConfigError listing the close ones and every
    namespace's names."""
    import difflib

    fields, training, runtime = {f.name for f in dataclasses.fields(config_class)}, training_names(), set(RUNTIME)
    split = StageOptions({}, {}, {})
    namespaces = ((split.config, fields), (split.training, training), (split.runtime, runtime))
    for key, value in options.items():
        homes = [values for values, names in namespaces if key in names]
        if not homes and migrations.retired_message(config_class, key):
            raise ConfigError(migrations.retired_message(config_class, key), field=key)
        if not homes:
            close = difflib.get_close_matches(key, sorted(fields | training | runtime), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(f"{model} has no option {key!r}{hint} (model config: {', '.join(sorted(fields))}; "
                              f"training: {', '.join(sorted(training))}; runtime: {', '.join(sorted(runtime))})",
                              field=key)
        for home in homes:
            home[key] = value
    return split


def make_deterministic(options: TrainOptions) -> None:
    """Deterministic kernels and a fixed CPU thread count (`threads`, or 1). The same machine then gives the same
    weights on every run; another CPU (its vector instructions, BLAS build) or a GPU may still round differently,
    which is why trained numbers are reported as the mean of several seeds. Process-wide, as torch's settings are."""
    import os

    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS's condition for deterministic GEMMs
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(options.threads or 1)

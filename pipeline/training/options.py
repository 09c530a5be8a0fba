"""Training hyper-parameters (`TrainOptions`), and the one resolver of a neural stage's options.

A neural stage's keyword options (`addax(train=wikiqa/train, lr=1e-4, code_sharpness=4, device=cpu)`, or
`irpipe train`'s flags) fall into exactly one of three namespaces (`split_options`):

    model config   what the network is          the model's config dataclass (code_sharpness, max_length, ...)
    training       how its weights are learnt   `TrainOptions` less the runtime names (epochs, lr, negatives, ...)
    runtime        how it runs                  RUNTIME (device, amp, threads, batch sizes, quantize, compile)

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

from pipeline.declared import When, check_applies, check_declared, field_is, given_in_context, option
from pipeline.errors import ConfigError, IrpipeError
from pipeline.rerank import migrations
from pipeline.validate import default_of, field_problem

RUNTIME_OPTIONS = ("device", "eval_batch_size", "threads")  # how, not what: neither in recipe keys nor resume checks
# The runtime namespace of a neural stage: how the model runs (pipeline/rerank/scoring.py Runtime). `amp` is here
# too although an explicit one joins a recipe's key: training in half precision computes another model.
RUNTIME = ("device", "amp", "threads", "batch_size", "batch_tokens", "quantize", "compile")
SOURCES = ("ckpt", "train", "dev", "index", "store")  # where a neural stage's model, candidates and encodings are
SHARED = ("seed",)  # in the model config and the training options at once (both take it)


def _dev_measure(owner: str, value: str) -> None:
    """A dev measure ir-measures parses (one measure), or "loss"."""
    if value == "loss":
        return
    from pipeline.evaluation import parse_measure

    try:
        parse_measure(value)
    except IrpipeError as error:  # an unknown name (with close ones) or a measure that is not one
        raise ConfigError(f"{owner}: measure={value!r}: {error} (or measure=loss)", field="measure") from None


def _hold_out(owner: str, value: str) -> None:
    """"" or "i/K": the i-th of K folds, 0 <= i < K, K >= 2."""
    if value and held_out_fold(value) is None:
        raise ConfigError(f"{owner}: hold_out={value!r}: give i/K, the i-th of K folds (0 <= i < K, K >= 2), "
                          "e.g. hold_out=0/5", field="hold_out")


def held_out_fold(value: str) -> tuple[int, int] | None:
    """(i, K) of hold_out="i/K"; None for "" or a value of another form."""
    first, slash, second = str(value).partition("/")
    if not (slash and first.isdigit() and second.isdigit()):
        return None
    fold, folds = int(first), int(second)
    return (fold, folds) if folds >= 2 and fold < folds else None


def fold_queries(qids: list[str], hold_out: str) -> list[str]:
    """The queries of the fold hold_out="i/K" names: the query at position p is in fold p mod K (positions in the
    training set's topic order, so every fold spreads over the whole set); none for ""."""
    fold = held_out_fold(hold_out)
    return [] if fold is None else qids[fold[0]::fold[1]]


def kept_queries(qids: list[str], hold_out: str) -> list[str]:
    """`qids` less the held-out fold (`fold_queries`): what a recipe with `hold_out` trains on."""
    held = set(fold_queries(qids, hold_out))
    return [qid for qid in qids if qid not in held]


SAMPLED = ("keyword", "random")  # negatives drawn from the data's texts (pipeline/training/negatives.py)


def _keyword_dictionary_used(options, _context) -> bool:
    return options.negatives == "keyword" or (options.negatives in SAMPLED and options.replace_ratio > 0)


_SAMPLED = field_is("negatives", *SAMPLED)
_KEYWORD = field_is("negatives", "keyword")
_SGD, _LINEAR, _PLATEAU = field_is("optimizer", "sgd"), field_is("schedule", "linear"), field_is("schedule", "plateau")
_DEV = given_in_context("dev", "a dev set (dev=DATASET)")
_TEACHER = When("with teacher=MODEL", lambda options, _: bool(options.teacher))
_LABELS = When("without teacher= (labels are read)", lambda options, _: not options.teacher)


@dataclass
class TrainOptions:
    """Training hyper-parameters; the defaults suit fine-tuning a BERT cross-encoder. Each field is declared once
    (pipeline/declared.py): bounds or choices, and when it acts; `check()` and the option tables read that."""

    epochs: int = option(3, "passes over the training examples; 0: the untrained start (the model as built from the "
                         "training data, no step taken), a baseline keyed apart from every trained recipe",
                         at_least=0, integer=True)
    lr: float = option(2e-5, "learning rate", at_least=0)
    train_batch_size: int = option(16, "examples (or groups) a training batch", at_least=1, integer=True)
    seed: int = option(0, "seeds sampling, shuffling and initialisation", integer=True)
    negatives: str = option("labelled", "where negatives come from (sampled ones: pipeline/training/negatives.py)",
                            choices=("labelled", "bm25", *SAMPLED))
    depth: int = option(100, "hits per query: bm25 negatives, keyword search, dev runs without shipped candidates",
                        at_least=1, integer=True)
    negatives_per_positive: int = option(1, '"pairs" sampling: negatives drawn per positive each epoch; sampled '
                                         "negatives: per positive, once before training", at_least=1, integer=True)
    negatives_dict: str = option("", "the keyword dictionary (preset or TSV) of keyword negatives or replacement",
                                 when=When("with negatives=keyword, or negatives=random and replace_ratio > 0",
                                           _keyword_dictionary_used))
    alpha: float = option(0.6, "keyword negatives: BM25(q, Q) / BM25(q, q) below this", at_least=0, when=_KEYWORD,
                          elsewhere="ADDAX's code sharpness, once also called alpha, is code_sharpness=")
    beta: float = option(0.2, "keyword negatives: keyword non-overlap ratio above this", at_least=0, at_most=1,
                         when=_KEYWORD)
    replace_ratio: float = option(0.0, "keyword replacement: share of the queries with a keyword that get one more "
                                  "negative, a keyword swapped for another of its domain", at_least=0, at_most=1,
                                  when=_SAMPLED)
    min_rel: int | None = option(None, "label >= min_rel is positive; none: the dataset's rel_level", at_least=0,
                                 integer=True, optional=True, when=_LABELS)
    train_queries: int | None = option(None, "keep only the first N training queries (budgets, smoke tests)",
                                       at_least=1, integer=True, optional=True)
    hold_out: str = option("", 'cross-fitting: "i/K" trains without the i-th of K folds of the judged training '
                           "queries (position mod K), for scores of that fold out of sample (ltr's cross_fit)",
                           check=_hold_out, when=_LABELS)
    teacher: str = option("", "distillation: a pretrained model's name or a checkpoint folder whose scores of the "
                          "training candidates are the targets; no qrels read (training/distill.py)")
    teacher_group: int = option(8, "distillation: candidates of one query in one listwise KL term", at_least=2,
                                integer=True, when=_TEACHER)
    balance: str = option("none", "length: as many positives as negatives in each length tenth (examples.py)",
                          choices=("none", "length"))
    optimizer: str = option("adamw", "", choices=("adamw", "adam", "sgd"))
    weight_decay: float = option(0.01, "on matrices only (not biases, norms)", at_least=0)
    momentum: float = option(0.9, "SGD momentum", at_least=0, below=1, when=_SGD)
    nesterov: bool = option(False, "SGD with Nesterov momentum", when=_SGD)
    schedule: str = option("linear", "linear: warm-up then linear decay per step; plateau: x plateau_factor when dev "
                           "stalls; constant", choices=("linear", "plateau", "constant"))
    warmup: float = option(0.1, "fraction of all steps spent warming up", at_least=0, at_most=1, when=_LINEAR)
    plateau_factor: float = option(0.5, "the learning rate's factor on a plateau", above=0, at_most=1, when=_PLATEAU)
    plateau_patience: int = option(2, "epochs without a better dev score before the factor", at_least=0,
                                   integer=True, when=_PLATEAU)
    measure: str = option("AP", 'dev measure that picks the best epoch (ir-measures name), or "loss"',
                          check=_dev_measure, when=_DEV)
    patience: int | None = option(None, "stop after this many epochs without a better dev score; none: never",
                                  at_least=1, integer=True, optional=True, when=_DEV)
    keep_start: bool = option(False, 'score the untrained model on dev first ("epoch 0"): kept unless an epoch '
                              "beats it (a start that ranks already: init=identity, start=rm0; where to use it: "
                              "docs/results.md)", when=_DEV)
    start_lr: float = option(1.0, "the learning rate's factor for the parameters a ranking start is made of (the "
                             "model's start_parameters: MRNN init=identity's block 1 and attention, HCAN start=rm0's "
                             "w); 0 freezes them, so training learns a correction beside the start", at_least=0,
                             when=given_in_context("ranking_start", "a ranking start (MRNN init=identity, HCAN "
                                                   "start=rm0)"))
    max_grad_norm: float | None = option(1.0, "gradient clipping; none: off", at_least=0, optional=True)
    eval_batch_size: int = option(64, "dev scoring batch size", at_least=1, integer=True)
    bucket: int = option(50, "sort pairs by length within windows of this many batches (1: off): less padding",
                         at_least=1, integer=True)
    device: str = "auto"
    amp: str | None = None           # bf16 | fp16 autocast
    threads: int | None = option(None, "torch CPU threads; none: torch's default (all cores)", at_least=1,
                                 integer=True, optional=True)
    deterministic: bool = option(False, "torch.use_deterministic_algorithms and a fixed thread count (threads, or "
                                 "1): the same weights on every run of one machine; see `make_deterministic`")
    # An option added after the first recipes were keyed goes into pipeline/rerank/migrations.py ADDED with the value
    # that trains as before it existed: at that value it stays out of recipe keys (recipe_fields).

    @property
    def scoring_amp(self) -> str:
        """The autocast of the training's own scoring (the dev set, a teacher's targets): `amp` as set, else none
        (fp32) -- never inference's "auto", which is bf16 on some CPUs: the same numbers on every machine."""
        return self.amp or "none"

    def check(self) -> None:
        """Every field within its declaration, then the rules between fields."""
        check_declared("training", self)
        if self.teacher and (self.negatives not in ("labelled", "bm25") or self.balance != "none"):
            raise ConfigError(f"training: teacher={self.teacher} scores the dataset's candidates and reads no labels; "
                              f"negatives={self.negatives}, balance={self.balance} would sample by labels",
                              field="teacher")


def check_options(values: dict) -> TrainOptions:
    """TrainOptions from `values`: known names, values of the field's kind, the whole checked (ConfigError)."""
    for name, value in values.items():
        problem = field_problem(TrainOptions, name, value)
        if problem:
            raise ConfigError(f"training option {problem}", field=name)
    options = TrainOptions(**values)
    options.check()
    return options


def resolve_options(model_cls: type, config, given: dict | None = None, dev: bool | None = None) -> TrainOptions:
    """TrainOptions defaults <- model class `training_defaults` <- the config's SHARED fields (`seed`) <- `given`;
    an option of `given` that would act on nothing here (momentum without SGD, patience without a dev set when `dev`
    says whether one is given, ...) is refused (pipeline/declared.py `check_applies`)."""
    baseline = {f.name: default_of(f) for f in dataclasses.fields(TrainOptions)}
    baseline.update(getattr(model_cls, "training_defaults", {}))
    baseline.update({f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name in SHARED})
    given = dict(given or {})
    options = check_options(baseline | given)
    context = {"ranking_start": bool(model_cls.start_parameters(config))} | ({} if dev is None else {"dev": dev})
    check_applies("training", options, given, baseline, context)
    return options


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

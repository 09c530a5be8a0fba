"""One training loop for every neural reranker, training recipes cached as models, and `irpipe train`.

    irpipe train monobert --train wikiqa/train --dev wikiqa/dev --out models/monobert-wikiqa --epochs 2
    train("monobert", "wikiqa/train", "models/x", dev="wikiqa/dev", options={"epochs": 2})

Examples come from a dataset's labelled candidates (`negatives="labelled"`: WikiQA/TrecQA answer candidates,
the judged part of DL19's top-100), or from a BM25 run (`negatives="bm25"`: relevant documents as positives, the
other top-`depth` hits as hard negatives). A candidate is positive when its qrels label is >= `min_rel` (default:
the dataset's relevance level, 2 on TREC DL).

Losses: "pointwise" -- the model's own `loss(output, labels)` over single pairs; "hinge" -- mean over (q, d+, d-)
of [margin - s(q, d+) + s(q, d-)]_+; "triplet" -- per query of a batch, the hardest positive against the hardest
negative, [margin - min s(q, d+) + max s(q, d-)]_+, with s = `model.margin_scores`. Default: the model's
`default_loss`.

Hyper-parameters (`TrainOptions`) come, later ones winning, from: the defaults below; the model class's
`training_defaults`; same-named fields of the model's config; what the caller passes. So HCAN trains with SGD +
Nesterov and LR halving on a dev plateau, BERT models with AdamW and linear warm-up/decay.

After every epoch the dev set is reranked and scored with pipeline.evaluate; the best epoch by `measure` ("loss":
the dev loss, lower is better) is the checkpoint left in OUT, and training stops after `patience` epochs without
improvement. OUT also gets train.jsonl (loss, learning rate, dev scores and seconds per epoch) and state/: the
last epoch's model, optimizer, scheduler and RNG states (safetensors + JSON, nothing pickled), from which
`resume=True` (`--resume`) continues an interrupted run exactly where it stopped. Same seed, same weights (CPU).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pipeline import __version__
from pipeline.data.files import atomic_write
from pipeline.errors import ConfigError
from pipeline.log import logger, progress

if TYPE_CHECKING:
    import torch

    from pipeline.data.runs import Run, Topics
    from pipeline.rerank.model import RerankModel

LOSSES = ("pointwise", "hinge", "triplet")
NEGATIVES = ("labelled", "bm25")
OPTIMIZERS = ("adamw", "adam", "sgd")
SCHEDULES = ("linear", "plateau", "constant")
RUNTIME_OPTIONS = ("device", "eval_batch_size", "threads")  # how, not what: neither in recipe keys nor resume checks
LOG_FILE = "train.jsonl"
STATE_DIR = "state"


@dataclass
class TrainOptions:
    """Training hyper-parameters; the defaults suit fine-tuning a BERT cross-encoder."""

    epochs: int = 3
    lr: float = 2e-5
    train_batch_size: int = 16
    seed: int = 0
    loss: str | None = None          # pointwise | hinge | triplet; None: the model's default_loss
    margin: float = 1.0              # hinge / triplet margin
    negatives: str = "labelled"      # labelled | bm25
    depth: int = 100                 # bm25 negatives and dev runs without shipped candidates: hits per query
    negatives_per_positive: int = 1  # hinge / triplet: negatives drawn per positive each epoch
    min_rel: int | None = None       # label >= min_rel is positive; None: the dataset's rel_level
    train_queries: int | None = None  # keep only the first N training queries (budgets, smoke tests)
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
    max_grad_norm: float | None = 1.0
    eval_batch_size: int = 64
    bucket: int = 50                 # sort pairs by length within windows of this many batches (1: off): less padding
    device: str = "auto"
    amp: str | None = None           # bf16 | fp16 autocast
    threads: int | None = None       # torch CPU threads; None: torch's default (all cores). On a busy machine 1 can be
                                     # several times faster than 2 (threads wait for each other at every op)

    def __post_init__(self):
        for name, allowed in (("loss", LOSSES), ("negatives", NEGATIVES), ("optimizer", OPTIMIZERS),
                              ("schedule", SCHEDULES)):
            value = getattr(self, name)
            if value is not None and value not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
        for name in ("epochs", "train_batch_size", "depth", "negatives_per_positive", "eval_batch_size", "bucket",
                     "threads"):
            value = getattr(self, name)
            if value is None and name == "threads":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("lr", "margin", "weight_decay", "momentum", "warmup", "plateau_factor"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")


def resolve_options(model_cls: type, config, given: dict | None = None) -> TrainOptions:
    """TrainOptions defaults <- model class `training_defaults` <- same-named config fields <- `given`."""
    names = {f.name for f in dataclasses.fields(TrainOptions)}
    values = dict(getattr(model_cls, "training_defaults", {}))
    values.update({f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name in names})
    values.update(given or {})
    unknown = set(values) - names
    if unknown:
        raise ConfigError(f"unknown training option(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(names))}")
    return TrainOptions(**values)


# -- training examples ------------------------------------------------------------------------------------------

@dataclass
class Examples:
    """Labelled (query, document) pairs: texts by id and 0/1 labels by query."""

    queries: dict[str, str]
    texts: dict[str, str]
    labels: dict[str, dict[str, int]]  # qid -> docid -> 0/1

    def pointwise(self) -> list[tuple[str, str, int]]:
        return [(qid, docid, label) for qid, docs in self.labels.items() for docid, label in docs.items()]

    def pairs(self, generator: "torch.Generator", per_positive: int = 1) -> list[tuple[str, str, str]]:
        """(qid, positive, negative) triples, negatives drawn uniformly per positive; grouped by query."""
        import torch

        triples = []
        for qid, docs in self.labels.items():
            positives = [d for d, label in docs.items() if label > 0]
            negatives = [d for d, label in docs.items() if label <= 0]
            if not negatives:
                continue
            for positive in positives:
                drawn = torch.randint(len(negatives), (per_positive,), generator=generator).tolist()
                triples += [(qid, positive, negatives[i]) for i in drawn]
        return triples

    def summary(self) -> dict:
        pairs = self.pointwise()
        return {"queries": len(self.labels), "pairs": len(pairs), "positives": sum(label for *_, label in pairs)}


def _candidates(dataset, depth: int) -> "Run":
    """The dataset's shipped candidates, else BM25's top `depth` on its own index (texts from the index)."""
    run = dataset.run()
    if run is not None:
        return run
    from pipeline.retrieve.bm25 import BM25

    topics = dataset.topics()
    run = BM25(hits=depth).bind(dataset)(topics)
    return _with_texts(run, dataset, {d for hits in run.ranking.values() for d, _ in hits})


def _with_texts(run: "Run", dataset, docids: set[str]) -> "Run":
    """`run` with the texts of `docids` it lacks, from the dataset's index (as the reranker stage gets them)."""
    missing = {d for d in docids if d not in run.texts}
    if not missing:
        return run
    from pipeline.retrieve.bm25 import open_index
    from pipeline.retrieve.index import dataset_index

    index = open_index(str(dataset_index(dataset)))
    texts = dict(run.texts)
    for docid in sorted(missing):
        text = index.doc_text(docid)
        if text is not None:
            texts[docid] = text
    return type(run)(run.ranking, texts, run.tag)


def examples_from(dataset, negatives: str = "labelled", depth: int = 100, min_rel: int | None = None,
                  max_queries: int | None = None) -> Examples:
    """Training pairs of `dataset` (see the module docstring for the two kinds of negatives)."""
    topics, qrels = dataset.topics(), dataset.qrels()
    level = min_rel if min_rel is not None else dataset.rel_level
    qids = [q for q in topics if q in qrels][:max_queries]
    labels: dict[str, dict[str, int]] = {}
    if negatives == "labelled":
        run = dataset.run()
        if run is None:
            raise ConfigError(f"{dataset.name} ships no labelled candidates; train with negatives=bm25 instead")
        texts = run.texts
        for qid in qids:
            judged = qrels[qid]
            labels[qid] = {d: int(judged[d] >= level) for d, _ in run.ranking.get(qid, []) if d in judged and d in texts}
    else:
        run = _candidates(dataset, depth).cut(depth)
        relevant = {qid: {d for d, label in qrels[qid].items() if label >= level} for qid in qids}
        run = _with_texts(run, dataset, set().union(*relevant.values())) if "docs" in dataset.provides else run
        texts = run.texts
        for qid in qids:
            labels[qid] = {d: 0 for d, _ in run.ranking.get(qid, []) if d not in relevant[qid] and d in texts}
            labels[qid].update({d: 1 for d in sorted(relevant[qid]) if d in texts})
    labels = {qid: docs for qid, docs in labels.items() if docs}
    if not labels:
        raise ConfigError(f"{dataset.name}: no labelled training pairs (negatives={negatives}, min_rel={level})")
    used = {d for docs in labels.values() for d in docs}
    return Examples({q: topics[q] for q in labels}, {d: texts[d] for d in used}, labels)


@dataclass
class DevSet:
    """A dev dataset's candidates (with texts), qrels and relevance level, for per-epoch evaluation."""

    name: str
    queries: dict[str, str]
    run: "Run"
    qrels: dict
    rel_level: int
    truncated: int = 0  # dev inputs the model truncated at the last evaluation

    @classmethod
    def of(cls, dataset, depth: int = 100) -> "DevSet":
        topics, qrels = dataset.topics(), dataset.qrels()
        run = _candidates(dataset, depth).cut(depth)
        return cls(dataset.name, {q: topics[q] for q in run.ranking}, run, qrels, dataset.rel_level)

    def evaluate(self, model: "RerankModel", options: TrainOptions, device) -> dict[str, float]:
        """Rerank the candidates; the dev measures, plus "loss" (the model's pointwise loss on binary labels)."""
        from pipeline.data.runs import Run
        from pipeline.evaluate import evaluate
        from pipeline.rerank.neural import predict

        pairs = [(qid, docid) for qid, hits in self.run.ranking.items() for docid, _ in hits]
        labels = [float(self.qrels.get(qid, {}).get(docid, 0) >= self.rel_level) for qid, docid in pairs]
        scored = predict(model, [self.queries[q] for q, _ in pairs], [self.run.texts[d] for _, d in pairs],
                         options.eval_batch_size, device, options.amp, labels=labels, desc=f"dev {self.name}")
        scores: dict[str, dict[str, float]] = {}
        for (qid, docid), score in zip(pairs, scored.scores):
            scores.setdefault(qid, {})[docid] = score
        measures = ["AP", "RR@10", "nDCG@10"] + ([options.measure] if options.measure != "loss" else [])
        result = evaluate(Run.from_scores(scores), self.qrels, list(dict.fromkeys(measures)), rel_level=self.rel_level)
        result["loss"] = scored.loss
        self.truncated = scored.truncated
        return result

    def key(self, measure: str) -> str:
        """The key of `measure` in `evaluate`'s result ("AP" is "AP(rel=2)" on graded qrels; "loss" is itself)."""
        from pipeline.evaluate import parse_measure

        return measure if measure == "loss" else str(parse_measure(measure, self.rel_level))


def dataset_fingerprint(dataset) -> str:
    """What a dataset's contents are, from the checksums of its files (no file is read)."""
    files = sorted((key, file.sha256, member or "") for key, (file, member) in getattr(dataset, "files", {}).items())
    return hashlib.sha1(json.dumps([dataset.name, files]).encode()).hexdigest()


def _dataset(value):
    if isinstance(value, str):
        from pipeline.data.registry import get_dataset

        return get_dataset(value)
    return value


# -- optimizer, schedule, losses --------------------------------------------------------------------------------

def make_optimizer(model: "RerankModel", options: TrainOptions) -> "torch.optim.Optimizer":
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": options.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    if options.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=options.lr, momentum=options.momentum, nesterov=options.nesterov)
    if options.optimizer == "adam":
        return torch.optim.Adam(groups, lr=options.lr)
    return torch.optim.AdamW(groups, lr=options.lr)


def make_scheduler(optimizer, options: TrainOptions, total_steps: int, maximize: bool):
    import torch

    if options.schedule == "plateau":
        return torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="max" if maximize else "min",
                                                          factor=options.plateau_factor,
                                                          patience=options.plateau_patience)
    if options.schedule == "constant":
        return None
    warmup = int(options.warmup * total_steps)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, _LinearWarmupDecay(warmup, total_steps))


@dataclass
class _LinearWarmupDecay:
    """lr factor at step s: s / warmup while warming up, then linear decay to 0 at the last step."""

    warmup: int
    total: int

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return (step + 1) / (self.warmup + 1)
        return max(0.0, (self.total - step) / max(1, self.total - self.warmup))


class _Stepper:
    """Optimizer, LR schedule and (fp16 on CUDA) gradient scaler: one step per batch, one schedule step per epoch
    for the plateau schedule, and their state for resuming."""

    def __init__(self, model, options: TrainOptions, total_steps: int, maximize: bool, device):
        import torch

        self.model, self.options = model, options
        self.optimizer = make_optimizer(model, options)
        self.scheduler = make_scheduler(self.optimizer, options, total_steps, maximize)
        self.scaler = torch.amp.GradScaler("cuda") if options.amp == "fp16" and device.type == "cuda" else None

    def step(self, loss) -> None:
        import torch

        self.optimizer.zero_grad(set_to_none=True)
        (self.scaler.scale(loss) if self.scaler else loss).backward()
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        if self.options.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.options.max_grad_norm)
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        if self.scheduler is not None and self.options.schedule == "linear":
            self.scheduler.step()

    def end_epoch(self, value: float) -> None:
        """The plateau schedule steps on the epoch's selection value (dev measure or loss)."""
        if self.scheduler is not None and self.options.schedule == "plateau":
            self.scheduler.step(value)

    def state_dict(self) -> dict:
        parts = {"optimizer": self.optimizer, "scheduler": self.scheduler, "scaler": self.scaler}
        return {name: part.state_dict() for name, part in parts.items() if part is not None}

    def load_state_dict(self, state: dict) -> None:
        parts = {"optimizer": self.optimizer, "scheduler": self.scheduler, "scaler": self.scaler}
        for name, part in parts.items():
            if part is not None and name in state:
                part.load_state_dict(state[name])


def pair_loss(positive: "torch.Tensor", negative: "torch.Tensor", qids: list[str], kind: str,
              margin: float) -> "torch.Tensor":
    """Hinge over (q, d+, d-) pairs, or triplet with the hardest positive and negative of each query."""
    import torch

    if kind == "hinge":
        return torch.relu(margin - positive + negative).mean()
    losses = []
    for qid in dict.fromkeys(qids):
        mask = torch.tensor([q == qid for q in qids], device=positive.device)
        losses.append(torch.relu(margin - positive[mask].min() + negative[mask].max()))
    return torch.stack(losses).mean()


# -- state that survives an interruption (nothing pickled) ---------------------------------------------------------

def _encode(obj, tensors: dict):
    """Split a nested state (optimizer/scheduler state_dicts, RNG states) into JSON and named tensors."""
    import torch

    if isinstance(obj, torch.Tensor):
        key = f"t{len(tensors)}"
        tensors[key] = obj.detach().cpu().contiguous()
        return {"__tensor__": key}
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in obj):
            return {k: _encode(v, tensors) for k, v in obj.items()}
        return {"__items__": [[_encode(k, tensors), _encode(v, tensors)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, tensors) for v in obj]}
    if isinstance(obj, list):
        return [_encode(v, tensors) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot save {type(obj).__name__} in training state")


def _decode(obj, tensors: dict):
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__items__" in obj:
            return {_decode(k, tensors): _decode(v, tensors) for k, v in obj["__items__"]}
        if "__tuple__" in obj:
            return tuple(_decode(v, tensors) for v in obj["__tuple__"])
        return {k: _decode(v, tensors) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v, tensors) for v in obj]
    return obj


def _rng_state(generator) -> dict:
    import numpy as np
    import torch

    kind, keys, position, has_gauss, gauss = np.random.get_state()
    state = {"torch": torch.get_rng_state(), "shuffle": generator.get_state(), "python": random.getstate(),
             "numpy": [kind, keys.tolist(), position, has_gauss, gauss]}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict, generator) -> None:
    import numpy as np
    import torch

    torch.set_rng_state(state["torch"])
    generator.set_state(state["shuffle"])
    random.setstate(state["python"])
    kind, keys, position, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), position, has_gauss, gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _save_state(directory: Path, model, trainer: dict) -> None:
    from safetensors.torch import save_file

    from pipeline.rerank.checkpoint import save_checkpoint

    save_checkpoint(model, directory, training={"state": "last epoch, for --resume"})
    tensors: dict = {}
    encoded = _encode(trainer, tensors)
    tmp = directory / ".trainer.safetensors.tmp"
    save_file(tensors, str(tmp))
    tmp.replace(directory / "trainer.safetensors")
    with atomic_write(directory / "trainer.json") as out:  # written last: the epoch is complete when it is there
        json.dump(encoded, out)


def _load_state(directory: Path) -> tuple["RerankModel", dict]:
    from safetensors.torch import load_file

    from pipeline.rerank.checkpoint import load_checkpoint

    path = directory / "trainer.json"
    try:
        encoded = json.loads(path.read_text(encoding="utf-8"))
        tensors = load_file(str(directory / "trainer.safetensors"))
    except (OSError, ValueError) as error:
        raise ConfigError(f"{directory}: cannot read the training state ({error}); start afresh without --resume "
                          "in a new --out folder") from None
    return load_checkpoint(directory), _decode(encoded, tensors)


# -- the loop -----------------------------------------------------------------------------------------------------

@dataclass
class TrainResult:
    out: Path
    best_epoch: int
    best: dict[str, Any]          # dev scores of the best epoch (empty without a dev set)
    history: list[dict] = field(default_factory=list)


def train(model_name: str, train_set, out: str | Path, dev=None, options: TrainOptions | dict | None = None,
          overrides: dict | None = None, resume: bool = False,
          on_epoch_end: Callable[[dict], None] | None = None) -> TrainResult:
    """Train `model_name` on `train_set` (a dataset or its name), keeping the best epoch by dev `measure` in `out`.

    `overrides` set model config fields; `on_epoch_end(record)` is called after each epoch's state is saved."""
    import torch

    from pipeline.rerank.checkpoint import config_to_dict, model_class, save_checkpoint
    from pipeline.rerank.neural import autocast, check_overrides, resolve_device

    cls = model_class(model_name)
    overrides = dict(overrides or {})
    try:
        check_overrides(cls.config_class, overrides)
    except ValueError as error:
        raise ConfigError(f"{model_name}: {error}") from None
    config = cls.config_class(**overrides)
    if isinstance(options, TrainOptions):
        options = dataclasses.asdict(options)
    try:
        options = resolve_options(cls, config, options)
    except ValueError as error:
        raise ConfigError(f"training option: {error}") from None
    loss_kind = options.loss or cls.default_loss
    train_set, dev = _dataset(train_set), _dataset(dev)
    out = Path(out)
    state_dir = out / STATE_DIR
    recipe = {"model": model_name, "train": train_set.name, "dev": dev.name if dev else None,
              "options": dataclasses.asdict(options) | {"loss": loss_kind}, "config": config_to_dict(config),
              "data": {"train": dataset_fingerprint(train_set), "dev": dataset_fingerprint(dev) if dev else None}}
    comparable = {k: v for k, v in recipe.items() if k != "options"} | {
        "options": {k: v for k, v in recipe["options"].items() if k not in RUNTIME_OPTIONS}}

    examples = examples_from(train_set, options.negatives, options.depth, options.min_rel, options.train_queries)
    dev_set = DevSet.of(dev, options.depth) if dev is not None else None
    selection = dev_set.key(options.measure) if dev_set is not None else None  # a bad measure fails here, not later
    device = resolve_device(options.device)
    if options.threads:
        torch.set_num_threads(options.threads)
    maximize = dev_set is not None and options.measure != "loss"  # without dev: the train loss, lower is better
    generator = torch.Generator()

    if (state_dir / "trainer.json").is_file():
        if not resume:
            raise ConfigError(f"{out} already holds a training run; pass --resume (resume=True) to continue it, "
                              "or choose another output folder")
        model, trainer = _load_state(state_dir)
        if trainer["recipe"] != json.loads(json.dumps(comparable)):
            changed = sorted(k for k in comparable if json.loads(json.dumps(comparable[k])) != trainer["recipe"].get(k))
            raise ConfigError(f"{out}: cannot resume with a different recipe (changed: {', '.join(changed)}); "
                              "use the original settings or a new output folder")
        logger.info("resuming %s after epoch %d", out, trainer["epoch"])
    else:
        torch.manual_seed(options.seed)
        random.seed(options.seed)
        import numpy as np

        np.random.seed(options.seed)
        generator.manual_seed(options.seed)
        model = cls.from_training_data(config, list(examples.queries.values()), list(examples.texts.values()))
        trainer = {"recipe": comparable, "epoch": 0, "best": None, "best_epoch": 0, "bad_epochs": 0, "history": [],
                   "finished": False}
    model.to(device)
    steps_per_epoch = math.ceil(_epoch_size(examples, loss_kind, options) / options.train_batch_size)
    stepper = _Stepper(model, options, steps_per_epoch * options.epochs, maximize, device)
    if trainer["epoch"]:
        stepper.load_state_dict(trainer["stepper"])
        _set_rng_state(trainer["rng"], generator)
    logger.info("training %s on %s (%s): %s, %s loss, %d steps/epoch, %s", model_name, train_set.name,
                ", ".join(f"{k} {v}" for k, v in examples.summary().items()), options.optimizer, loss_kind,
                steps_per_epoch, device)

    while trainer["epoch"] < options.epochs and not trainer["finished"]:
        epoch = trainer["epoch"] + 1
        start = time.perf_counter()
        model.train()
        batches = _batches(examples, loss_kind, options, generator)
        total, count, truncated = 0.0, 0, 0
        with progress(desc=f"epoch {epoch}/{options.epochs}", total=len(batches), unit="batch") as bar:
            for batch in batches:
                with autocast(device, options.amp):
                    loss, cut = _batch_loss(model, examples, batch, loss_kind, options, device)
                stepper.step(loss)
                total, count, truncated = total + loss.item(), count + 1, truncated + cut
                bar.update(1)
                bar.set_postfix(loss=f"{total / count:.4f}")
        record = {"epoch": epoch, "loss": total / max(1, count), "lr": stepper.optimizer.param_groups[0]["lr"],
                  "steps": count, "truncated": truncated, "train_seconds": round(time.perf_counter() - start, 2)}
        if truncated:
            logger.warning("epoch %d: %d training inputs were truncated to fit the model", epoch, truncated)
        if dev_set is not None:
            record["dev"] = dev_set.evaluate(model, options, device)
            record["dev_truncated"] = dev_set.truncated
            value = record["dev"][selection]
        else:
            value = None
        stepper.end_epoch(value if value is not None else record["loss"])
        improved = value is None or trainer["best"] is None or (value > trainer["best"] if maximize else value < trainer["best"])
        if improved:
            trainer.update(best=value, best_epoch=epoch, bad_epochs=0)
            save_checkpoint(model, out, training=_summary(recipe, trainer, record, finished=False))
        else:
            trainer["bad_epochs"] += 1
        record.update(best=improved, seconds=round(time.perf_counter() - start, 2))
        trainer["history"].append(record)
        trainer["epoch"] = epoch
        if options.patience is not None and trainer["bad_epochs"] >= options.patience:
            logger.info("early stop after epoch %d: no better dev %s for %d epochs", epoch, options.measure,
                        options.patience)
            trainer["finished"] = True
        _write_log(out, trainer["history"])
        trainer.update(stepper=stepper.state_dict(), rng=_rng_state(generator))
        _save_state(state_dir, model, trainer)
        logger.info("epoch %d: loss %.4f%s%s (%.0fs)", epoch, record["loss"],
                    "".join(f", dev {k} {v:.4f}" for k, v in record.get("dev", {}).items() if v is not None),
                    " *" if improved else "", record["seconds"])
        if on_epoch_end is not None:
            on_epoch_end(record)

    trainer["finished"] = True
    best_record = trainer["history"][trainer["best_epoch"] - 1]
    _finish(out, recipe, trainer, best_record)
    return TrainResult(out, trainer["best_epoch"], best_record.get("dev", {}), trainer["history"])


def _summary(recipe: dict, trainer: dict, record: dict, finished: bool) -> dict:
    return {"recipe": recipe, "finished": finished, "best_epoch": trainer["best_epoch"], "epochs_run": record["epoch"],
            "dev": record.get("dev"), "irpipe": __version__}


def _finish(out: Path, recipe: dict, trainer: dict, best_record: dict) -> None:
    """Mark the best checkpoint finished in its config.json (what the recipe cache looks for)."""
    path = out / "config.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("training", {}).get("finished"):
        return
    data["training"] = _summary(recipe, trainer, best_record, finished=True) | {"epochs_run": trainer["epoch"]}
    with atomic_write(path) as handle:
        json.dump(data, handle, indent=2, ensure_ascii=False)
        handle.write("\n")


def _write_log(out: Path, history: list[dict]) -> None:
    with atomic_write(out / LOG_FILE) as handle:  # rewritten whole: a resumed run never duplicates an epoch
        for record in history:
            handle.write(json.dumps(record) + "\n")


def _epoch_size(examples: Examples, loss_kind: str, options: TrainOptions) -> int:
    if loss_kind == "pointwise":
        return len(examples.pointwise())
    with_negatives = [docs for docs in examples.labels.values() if any(v <= 0 for v in docs.values())]
    return sum(v > 0 for docs in with_negatives for v in docs.values()) * options.negatives_per_positive


def _batches(examples: Examples, loss_kind: str, options: TrainOptions, generator) -> list[list[tuple]]:
    """One epoch of batches in a seeded order. Pointwise and hinge: shuffled pairs, sorted by length within windows
    of `bucket` batches (less padding), batches in shuffled order. Triplet: whole queries kept together in
    shuffled query order, so that in-batch mining sees several pairs per query."""
    import torch

    size = options.train_batch_size
    shuffle = lambda items: [items[i] for i in torch.randperm(len(items), generator=generator).tolist()]  # noqa: E731
    if loss_kind == "triplet":
        by_query: dict[str, list] = {}
        for triple in examples.pairs(generator, options.negatives_per_positive):
            by_query.setdefault(triple[0], []).append(triple)
        items = [t for qid in shuffle(list(by_query)) for t in by_query[qid]]
        return [items[i:i + size] for i in range(0, len(items), size)]
    if loss_kind == "pointwise":
        items = shuffle(examples.pointwise())
        length = lambda item: len(examples.queries[item[0]]) + len(examples.texts[item[1]])  # noqa: E731
    else:
        items = shuffle(examples.pairs(generator, options.negatives_per_positive))
        length = lambda item: len(examples.queries[item[0]]) + max(len(examples.texts[d]) for d in item[1:])  # noqa: E731
    if options.bucket == 1:
        return [items[i:i + size] for i in range(0, len(items), size)]
    batches = []
    for start in range(0, len(items), size * options.bucket):
        window = sorted(items[start:start + size * options.bucket], key=length)
        batches += [window[i:i + size] for i in range(0, len(window), size)]
    return shuffle(batches)


def _batch_loss(model, examples: Examples, batch: list[tuple], loss_kind: str, options: TrainOptions,
                device) -> tuple["torch.Tensor", int]:
    """The batch's loss, and how many of its model inputs were truncated."""
    import torch

    if loss_kind == "pointwise":
        prepared = model.prepare([examples.queries[q] for q, _, _ in batch], [examples.texts[d] for _, d, _ in batch])
        output = model(**prepared.to(device).tensors)
        labels = torch.tensor([float(label) for *_, label in batch], device=device)
        return model.loss(output, labels), prepared.truncated
    queries = [examples.queries[q] for q, _, _ in batch]
    docs = [examples.texts[p] for _, p, _ in batch] + [examples.texts[n] for _, _, n in batch]
    prepared = model.prepare(queries + queries, docs)  # positives and negatives in one forward pass
    scores = model.margin_scores(model(**prepared.to(device).tensors)).float()
    positive, negative = scores[:len(batch)], scores[len(batch):]
    return pair_loss(positive, negative, [q for q, _, _ in batch], loss_kind, options.margin), prepared.truncated


# -- recipes: a model trained once, then loaded from the cache ---------------------------------------------------

class Recipe:
    """A training recipe of the reranker stage (`monobert(train=wikiqa/train, dev=wikiqa/dev, epochs=2)`)."""

    def __init__(self, model: str, train: str, dev: str | None, options: dict, overrides: dict,
                 device: str = "auto", amp: str | None = None, threads: int | None = None):
        self.model, self.train, self.dev = model, train, dev
        self.options = dict(options) | {"device": device, "amp": amp, "threads": threads}
        self.overrides = dict(overrides)

    def key(self) -> str:
        """sha1 of model + resolved options + resolved config + data checksums + irpipe version."""
        from pipeline.rerank.checkpoint import config_to_dict, model_class

        cls = model_class(self.model)
        config = cls.config_class(**self.overrides)
        options = dataclasses.asdict(resolve_options(cls, config, self.options))
        for name in RUNTIME_OPTIONS:
            options.pop(name)
        options["loss"] = options["loss"] or cls.default_loss
        data = {"train": dataset_fingerprint(_dataset(self.train)),
                "dev": dataset_fingerprint(_dataset(self.dev)) if self.dev else None}
        blob = json.dumps({"model": self.model, "options": options, "config": config_to_dict(config), "data": data,
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


# -- irpipe train ---------------------------------------------------------------------------------------------------

def _value(text: str):
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def define_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="model name (monobert, hcan, ...)")
    parser.add_argument("--train", required=True, metavar="DATASET", help="training dataset (labelled candidates or qrels)")
    parser.add_argument("--dev", metavar="DATASET", help="dev dataset: evaluated every epoch, picks the best epoch")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder: the best checkpoint, train.jsonl, state/")
    parser.add_argument("--epochs", type=int, metavar="N")
    parser.add_argument("--lr", type=float, metavar="LR")
    parser.add_argument("--batch-size", type=int, metavar="N", dest="train_batch_size", help="training pairs per step")
    parser.add_argument("--seed", type=int, metavar="N")
    parser.add_argument("--loss", choices=LOSSES, help="default: the model's own")
    parser.add_argument("--negatives", choices=NEGATIVES, help="labelled candidates (default) or BM25 hard negatives")
    parser.add_argument("--depth", type=int, metavar="N", help="BM25 hits per query for negatives / dev (default 100)")
    parser.add_argument("--measure", metavar="MEASURE", help="dev measure that picks the best epoch (default AP; or loss)")
    parser.add_argument("--patience", type=int, metavar="N", help="early stop after N epochs without improvement")
    parser.add_argument("--train-queries", type=int, metavar="N", help="use only the first N training queries")
    parser.add_argument("--device", metavar="DEV", help="auto (default), cpu, cuda, cuda:N")
    parser.add_argument("--amp", choices=("bf16", "fp16"), help="autocast dtype")
    parser.add_argument("--threads", type=int, metavar="N", help="torch CPU threads (default: all cores)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="any other training option (optimizer=sgd, warmup=0.1, margin=0.5, ...); repeatable")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="config",
                        help="a model config field (max_length=128, bert=PATH, encoder=wide, ...); repeatable")
    parser.add_argument("--resume", action="store_true", help="continue the interrupted run in --out")


def _pairs(items: list[str], flag: str) -> dict:
    values = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{flag} {item!r}: expected KEY=VALUE")
        values[key.strip().replace("-", "_")] = _value(value.strip())
    return values


def main(args: argparse.Namespace) -> int:
    options = _pairs(args.option, "--option")
    options.update({k: getattr(args, k) for k in ("epochs", "lr", "train_batch_size", "seed", "loss", "negatives",
                                                  "depth", "measure", "patience", "train_queries", "device", "amp",
                                                  "threads")
                    if getattr(args, k) is not None})
    try:
        result = train(args.model, args.train, args.out, dev=args.dev, options=options,
                       overrides=_pairs(args.config, "--set"), resume=args.resume)
    except KeyboardInterrupt:
        logger.warning("interrupted: the last finished epoch is saved; continue with the same command and --resume")
        raise
    scores = ", ".join(f"{k} {v:.4f}" for k, v in result.best.items() if v is not None)
    print(f"{result.out}: best epoch {result.best_epoch} of {len(result.history)}{': dev ' + scores if scores else ''}")
    return 0

"""One training loop for every neural reranker.

    train("monobert", "wikiqa/train", "models/x", dev="wikiqa/dev", options={"epochs": 2})

Batches are drawn for the model's loss (`model.batch_sampling()`, pipeline/training/examples.py); the model's own
`loss(output, batch)` gives the total that is minimised and its named parts, each logged per epoch. With a
`teacher` the targets are its scores and the loss is the listwise KL from them (pipeline/training/distill.py).

After every epoch the dev set is reranked and scored with pipeline.evaluation; the best epoch by `measure` ("loss":
the dev loss, lower is better) is the checkpoint left in OUT, and training stops after `patience` epochs without
improvement. With `keep_start` the untrained model is scored first, as epoch 0: it is the checkpoint left unless an
epoch beats it (a start that already ranks well, such as MRNN's init=identity, is not lost to training). With
`epochs=0` the untrained model is the checkpoint (scored on dev when a dev set is given): the start that a trained
recipe of the same data is compared with (an experiment's `baseline:`), under a recipe key of its own. OUT also
gets train.jsonl (loss and its parts, learning rate, dev scores and seconds per epoch) and state/: the last epoch's
model, optimizer, scheduler and RNG states (pipeline/training/state.py), from which
`resume=True` (`--resume`) continues an interrupted run exactly where it stopped. Same seed, same weights (CPU).
"""
from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pipeline.version import __version__
from pipeline.data.files import atomic_write, writing
from pipeline.errors import ConfigError, OutputError
from pipeline.log import logger, progress
from pipeline.rerank.checkpoint import load_checkpoint, save_checkpoint
from pipeline.rerank.model import Loss, RerankModel
from pipeline.rerank.scoring import autocast, labelled, resolve_device
from pipeline.training.distill import TARGETS_FILE, listwise_kl, teacher_examples
from pipeline.training.examples import DevSet, Examples, epoch_batches, epoch_steps, examples_from, length_balanced
from pipeline.training.identity import RecipeIdentity
from pipeline.training.negatives import NegativeSampling
from pipeline.training.optim import Stepper
from pipeline.training.options import TrainOptions, make_deterministic
from pipeline.training.state import StateStore, rng_state, set_rng_state

LOG_FILE = "train.jsonl"
STATE_DIR = "state"


@dataclass
class TrainResult:
    out: Path
    best_epoch: int
    best: dict[str, Any]          # dev scores of the best epoch (empty without a dev set)
    history: list[dict] = field(default_factory=list)


@dataclass
class TrainerState:
    """What the loop carries from epoch to epoch; saved with each epoch's state (state/epoch-N/trainer.json)."""

    recipe: dict                  # RecipeIdentity.resume_record() of the run: a resume must match it
    epoch: int = 0                # epochs done
    best: float | None = None     # the best selection value so far (None without a dev set)
    best_epoch: int = 0
    bad_epochs: int = 0           # epochs since the best one
    history: list[dict] = field(default_factory=list)   # one record per epoch (train.jsonl)
    finished: bool = False        # early-stopped (or, at the end, done)
    stepper: dict = field(default_factory=dict)         # optimizer / schedule / grad-scaler states after `epoch`
    rng: dict = field(default_factory=dict)             # RNG states after `epoch` (pipeline/training/state.py)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, saved: dict) -> TrainerState:
        return cls(**{f.name: saved[f.name] for f in fields(cls) if f.name in saved})


@dataclass
class TrainingRun:
    """One training run's fixed parts: its recipe, data, device and output folder."""

    recipe: RecipeIdentity
    out: Path
    examples: Examples
    dev_set: DevSet | None
    selection: str | None         # the key of the dev measure in DevSet.evaluate's result
    device: torch.device
    store: StateStore

    @property
    def options(self) -> TrainOptions:
        return self.recipe.options

    @property
    def maximize(self) -> bool:
        """Dev measures: higher is better; the dev loss, or the train loss without a dev set: lower."""
        return self.dev_set is not None and self.options.measure != "loss"


def batch_loss(model: RerankModel, groups: list[list], device, teacher: bool = False) -> tuple[Loss, int]:
    """The model's loss on one batch of groups (with a teacher: the listwise KL from its targets, distill.py), and
    how many of its inputs were truncated."""
    batch = model.prepare([pair for group in groups for pair in group]).to(device)
    labelled(batch, device, [g for g, group in enumerate(groups) for _ in group])
    output = model(**batch.tensors)
    if teacher:
        kl = listwise_kl(model.score(output), batch.labels, batch.groups)
        return Loss(kl, {"kl": kl}), batch.truncated
    return model.loss(output, batch), batch.truncated


def train(model_name: str, train_set, out: str | Path, dev=None, options: TrainOptions | dict | None = None,
          overrides: dict | None = None, resume: bool = False,
          on_epoch_end: Callable[[dict], None] | None = None) -> TrainResult:
    """Train `model_name` on `train_set` (a dataset or its name), keeping the best epoch by dev `measure` in `out`.

    `overrides` set model config fields; `on_epoch_end(record)` is called after each epoch's state is saved."""
    run = _prepare(RecipeIdentity.resolve(model_name, train_set, dev, options, overrides), Path(out))
    generator = torch.Generator()
    model, state = _resume(run, generator) if _resuming(run, resume) else _start(run, generator)
    model.to(run.device)
    sampling = "listwise" if run.options.teacher else model.batch_sampling()
    steps_per_epoch = epoch_steps(run.examples, sampling, run.options)
    stepper = Stepper(model, run.options, steps_per_epoch * run.options.epochs, run.maximize, run.device)
    if state.epoch:
        stepper.load_state_dict(state.stepper)
        set_rng_state(state.rng, generator)
    logger.info("training %s on %s (%s): %s, %s batches, %d steps/epoch, %s", model_name, run.recipe.train_set.name,
                ", ".join(f"{k} {v}" for k, v in run.examples.summary().items()), run.options.optimizer, sampling,
                steps_per_epoch, run.device)
    run.store.sweep()  # folders of saves interrupted before their commit
    if (run.options.keep_start or run.options.epochs == 0) and not state.history:
        _keep_start(run, model, state)
    try:
        while state.epoch < run.options.epochs and not state.finished:
            record = _epoch(run, model, sampling, stepper, generator, state)
            if on_epoch_end is not None:
                on_epoch_end(record)
    except (KeyboardInterrupt, OutputError) as error:  # Ctrl-C, SIGTERM, a full disk: what --resume continues from
        saved = run.store.committed()
        logger.warning("%s: %s", "interrupted" if isinstance(error, KeyboardInterrupt) else "stopped",
                       f"epochs 1-{saved} are saved in {run.store.root}; continue with --resume"
                       if saved else "no epoch was saved yet; --resume would start afresh")
        raise
    return _finish(run, state)


# -- starting and resuming -----------------------------------------------------------------------------------------

def _prepare(recipe: RecipeIdentity, out: Path) -> TrainingRun:
    """Examples, dev set and device of the recipe, and the process set up for it (threads, deterministic kernels);
    a bad dev measure fails here, before training."""
    options = recipe.options
    device = resolve_device(options.device)
    if options.deterministic:
        make_deterministic(options)
    elif options.threads:
        torch.set_num_threads(options.threads)
    if options.teacher:
        examples = teacher_examples(recipe.train_set, options, device, out)
    else:
        examples = examples_from(recipe.train_set, options.negatives, options.depth, options.min_rel,
                                 options.train_queries, NegativeSampling.of(options), options.hold_out)
    if options.balance == "length":
        examples = length_balanced(examples, options.seed)
    if options.keep_start and recipe.dev_set is None:
        raise ConfigError("training: keep_start=true scores the untrained model on the dev set; give a dev set",
                          field="keep_start")
    dev_set = DevSet.of(recipe.dev_set, options.depth) if recipe.dev_set is not None else None
    selection = dev_set.key(options.measure) if dev_set is not None else None
    return TrainingRun(recipe, out, examples, dev_set, selection, device, StateStore(out / STATE_DIR, "epoch", 4))


def _resuming(run: TrainingRun, resume: bool) -> bool:
    """Whether OUT holds a state to continue (an error without `resume`)."""
    if run.store.exists():
        if not resume:
            raise ConfigError(f"{run.out} already holds a training run; pass --resume (resume=True) to continue it, "
                              "or choose another output folder")
        return True
    if resume and run.out.exists() and {path.name for path in run.out.iterdir()} != {TARGETS_FILE}:  # (a recipe's
        # first training resumes into a folder not made yet, or holding only the teacher's targets just written)
        logger.warning("%s holds no saved training state: training starts afresh", run.out)
    return False


def _start(run: TrainingRun, generator: torch.Generator) -> tuple[RerankModel, TrainerState]:
    """A new model from the training data, every RNG seeded with the recipe's seed first."""
    seed = run.options.seed
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    generator.manual_seed(seed)
    examples = run.examples
    model = run.recipe.model_class.from_training_data(run.recipe.config, list(examples.queries.values()),
                                                      list(examples.texts.values()),
                                                      list(examples.doc_fields.values()))
    return model, TrainerState(recipe=run.recipe.resume_record())


def _resume(run: TrainingRun, generator: torch.Generator) -> tuple[RerankModel, TrainerState]:
    """The committed state's model and bookkeeping, refused when the recipe differs from the one it was started
    with (the RNG and optimizer states are put back once the stepper exists)."""
    folder, saved = run.store.load()
    state, recipe = TrainerState.from_dict(saved), run.recipe.resume_record()
    if state.recipe != recipe:
        changed = sorted(k for k in recipe if recipe[k] != state.recipe.get(k))
        raise ConfigError(f"{run.out}: cannot resume with a different recipe (changed: {', '.join(changed)}); "
                          "use the original settings or a new output folder")
    model = load_checkpoint(folder)
    logger.info("resuming %s after epoch %d", run.out, state.epoch)
    return model, state


# -- an epoch ------------------------------------------------------------------------------------------------------

def _keep_start(run: TrainingRun, model: RerankModel, state: TrainerState) -> None:
    """keep_start or epochs=0: the untrained model is epoch 0 (train.jsonl's first record, with its dev scores when
    there is a dev set) and the checkpoint in OUT until an epoch beats it (with epochs=0, for good)."""
    record = {"epoch": 0}
    if run.dev_set is not None:
        record["dev"] = run.dev_set.evaluate(model, run.options, run.device)
    state.best, state.best_epoch = record["dev"][run.selection] if "dev" in record else None, 0
    _save_best(run, state, model, record)
    state.history.append(record | {"best": True})
    _write_log(run.out, state.history)
    logger.info("epoch 0 (the start)%s", _dev_scores(record))


def _epoch(run: TrainingRun, model: RerankModel, sampling: str, stepper: Stepper, generator: torch.Generator,
           state: TrainerState) -> dict:
    """Train one epoch, evaluate it, keep it when it is the best so far, log it and save the state after it."""
    epoch, start = state.epoch + 1, time.perf_counter()
    record = _train_epoch(model, run.examples, sampling, run.options, stepper, generator, run.device, epoch)
    value = None
    if run.dev_set is not None:
        record["dev"] = run.dev_set.evaluate(model, run.options, run.device)
        record["dev_truncated"] = run.dev_set.truncated
        value = record["dev"][run.selection]
    stepper.end_epoch(value if value is not None else record["loss"])
    improved = _select(run, state, value, epoch)
    if improved:
        _save_best(run, state, model, record)
    record.update(best=improved, seconds=round(time.perf_counter() - start, 2))
    state.history.append(record)
    state.epoch = epoch
    if run.options.patience is not None and state.bad_epochs >= run.options.patience:
        logger.info("early stop after epoch %d: no better dev %s for %d epochs", epoch, run.options.measure,
                    run.options.patience)
        state.finished = True
    _write_log(run.out, state.history)
    state.stepper, state.rng = stepper.state_dict(), rng_state(generator)
    run.store.save(epoch, lambda folder: save_checkpoint(model, folder, training={"state": "last epoch, for --resume"}),
                   state.to_dict())
    logger.info("epoch %d: loss %.4f%s%s (%.0fs)", epoch, record["loss"], _dev_scores(record),
                " *" if improved else "", record["seconds"])
    return record


def _save_best(run: TrainingRun, state: TrainerState, model: RerankModel, record: dict) -> None:
    """The best model so far (epoch `state.best_epoch`, its `record`) as OUT's checkpoint."""
    with writing(run.out):  # a full or read-only disk: exit 2 naming the folder (no traceback)
        save_checkpoint(model, run.out, training=_summary(run, state, record, finished=False))


def _dev_scores(record: dict) -> str:
    """An epoch record's dev scores for the log (", dev AP 0.8123, ..."; empty without a dev set)."""
    return "".join(f", dev {k} {v:.4f}" for k, v in record.get("dev", {}).items() if v is not None)


def _select(run: TrainingRun, state: TrainerState, value: float | None, epoch: int) -> bool:
    """Whether `epoch` (its dev selection `value`; None without a dev set: every epoch) is the best so far."""
    improved = value is None or state.best is None or (value > state.best if run.maximize else value < state.best)
    if improved:
        state.best, state.best_epoch, state.bad_epochs = value, epoch, 0
    else:
        state.bad_epochs += 1
    return improved


def _train_epoch(model: RerankModel, examples: Examples, sampling: str, options: TrainOptions, stepper: Stepper,
                 generator: torch.Generator, device, epoch: int) -> dict:
    """One pass over the epoch's batches: the record of its mean loss, the mean of each loss part, lr, steps."""
    start = time.perf_counter()
    model.train()
    batches = epoch_batches(examples, sampling, options, generator)
    total, parts, count, truncated = 0.0, {}, 0, 0
    with progress(desc=f"epoch {epoch}/{options.epochs}", total=len(batches), unit="batch") as bar:
        for groups in batches:
            with autocast(device, options.amp):
                loss, cut = batch_loss(model, groups, device, teacher=bool(options.teacher))
            stepper.step(loss.total)
            total, count, truncated = total + loss.total.item(), count + 1, truncated + cut
            for name, part in loss.parts.items():
                parts[name] = parts.get(name, 0.0) + part.item()
            bar.update(1)
            bar.set_postfix(loss=f"{total / count:.4f}")
    if truncated:
        logger.warning("epoch %d: %d training inputs were truncated to fit the model", epoch, truncated)
    return {"epoch": epoch, "loss": total / max(1, count),
            "loss_parts": {k: v / max(1, count) for k, v in parts.items()}, "lr": stepper.lr(), "steps": count,
            "truncated": truncated, "train_seconds": round(time.perf_counter() - start, 2)}


# -- the output ----------------------------------------------------------------------------------------------------

def _summary(run: TrainingRun, state: TrainerState, record: dict, finished: bool) -> dict:
    """config.json's "training": the recipe, whether it finished, the best epoch and its dev scores."""
    return {"recipe": run.recipe.record(), "finished": finished, "best_epoch": state.best_epoch,
            "epochs_run": record["epoch"], "dev": record.get("dev"), "irpipe": __version__}


def _finish(run: TrainingRun, state: TrainerState) -> TrainResult:
    """Mark the best checkpoint finished in its config.json (what the recipe cache looks for)."""
    state.finished = True
    best_record = next(record for record in state.history if record["epoch"] == state.best_epoch)
    path = run.out / "config.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    if not data.get("training", {}).get("finished"):
        data["training"] = _summary(run, state, best_record, finished=True) | {"epochs_run": state.epoch}
        with atomic_write(path) as handle:
            json.dump(data, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
    return TrainResult(run.out, state.best_epoch, best_record.get("dev", {}), state.history)


def _write_log(out: Path, history: list[dict]) -> None:
    with atomic_write(out / LOG_FILE) as handle:  # rewritten whole: a resumed run never duplicates an epoch
        for record in history:
            handle.write(json.dumps(record) + "\n")

"""One training loop for every neural reranker.

    train("monobert", "wikiqa/train", "models/x", dev="wikiqa/dev", options={"epochs": 2})

Batches are drawn for the model's loss (`model.batch_sampling()`, pipeline/training/examples.py); the model's own
`loss(output, batch)` gives the total that is minimised and its named parts, each logged per epoch.

After every epoch the dev set is reranked and scored with pipeline.evaluate; the best epoch by `measure` ("loss":
the dev loss, lower is better) is the checkpoint left in OUT, and training stops after `patience` epochs without
improvement. OUT also gets train.jsonl (loss and its parts, learning rate, dev scores and seconds per epoch) and
state/: the last epoch's model, optimizer, scheduler and RNG states (pipeline/training/state.py), from which
`resume=True` (`--resume`) continues an interrupted run exactly where it stopped. Same seed, same weights (CPU).
"""
from __future__ import annotations

import dataclasses
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from pipeline import __version__
from pipeline.data.files import atomic_write
from pipeline.errors import ConfigError
from pipeline.log import logger, progress
from pipeline.rerank import models
from pipeline.rerank.checkpoint import save_checkpoint
from pipeline.rerank.config import config_to_dict, make_config
from pipeline.rerank.model import Loss, RerankModel
from pipeline.rerank.scoring import autocast, labelled, resolve_device
from pipeline.training.examples import DevSet, Examples, dataset_fingerprint, epoch_batches, epoch_steps, \
    examples_from, get_dataset
from pipeline.training.negatives import NegativeSampling
from pipeline.training.optim import Stepper
from pipeline.training.options import RUNTIME_OPTIONS, TrainOptions, make_deterministic, resolve_options
from pipeline.training.state import committed_epoch, has_state, load_state, rng_state, save_state, set_rng_state, sweep_state

LOG_FILE = "train.jsonl"
STATE_DIR = "state"


@dataclass
class TrainResult:
    out: Path
    best_epoch: int
    best: dict[str, Any]          # dev scores of the best epoch (empty without a dev set)
    history: list[dict] = field(default_factory=list)


def batch_loss(model: RerankModel, groups: list[list], device) -> tuple[Loss, int]:
    """The model's loss on one batch of groups, and how many of its inputs were truncated."""
    batch = model.prepare([pair for group in groups for pair in group]).to(device)
    labelled(batch, device, [g for g, group in enumerate(groups) for _ in group])
    return model.loss(model(**batch.tensors), batch), batch.truncated


def train(model_name: str, train_set, out: str | Path, dev=None, options: TrainOptions | dict | None = None,
          overrides: dict | None = None, resume: bool = False,
          on_epoch_end: Callable[[dict], None] | None = None) -> TrainResult:
    """Train `model_name` on `train_set` (a dataset or its name), keeping the best epoch by dev `measure` in `out`.

    `overrides` set model config fields; `on_epoch_end(record)` is called after each epoch's state is saved."""
    cls = models.model_class(model_name)
    config = make_config(cls.config_class, dict(overrides or {}))
    if isinstance(options, TrainOptions):
        options = dataclasses.asdict(options)
    options = resolve_options(cls, config, options)
    train_set, dev = get_dataset(train_set), (get_dataset(dev) if dev is not None else None)
    out = Path(out)
    state_dir = out / STATE_DIR
    recipe = {"model": model_name, "train": train_set.name, "dev": dev.name if dev else None,
              "options": dataclasses.asdict(options), "config": config_to_dict(config),
              "data": {"train": dataset_fingerprint(train_set), "dev": dataset_fingerprint(dev) if dev else None}}
    comparable = {k: v for k, v in recipe.items() if k != "options"} | {
        "options": {k: v for k, v in recipe["options"].items() if k not in RUNTIME_OPTIONS}}

    examples = examples_from(train_set, options.negatives, options.depth, options.min_rel, options.train_queries,
                             NegativeSampling.of(options))
    dev_set = DevSet.of(dev, options.depth) if dev is not None else None
    selection = dev_set.key(options.measure) if dev_set is not None else None  # a bad measure fails here, not later
    device = resolve_device(options.device)
    if options.deterministic:
        make_deterministic(options)
    elif options.threads:
        torch.set_num_threads(options.threads)
    maximize = dev_set is not None and options.measure != "loss"  # without dev: the train loss, lower is better
    generator = torch.Generator()

    if has_state(state_dir):
        if not resume:
            raise ConfigError(f"{out} already holds a training run; pass --resume (resume=True) to continue it, "
                              "or choose another output folder")
        model, trainer = load_state(state_dir)
        if trainer["recipe"] != json.loads(json.dumps(comparable)):
            changed = sorted(k for k in comparable if json.loads(json.dumps(comparable[k])) != trainer["recipe"].get(k))
            raise ConfigError(f"{out}: cannot resume with a different recipe (changed: {', '.join(changed)}); "
                              "use the original settings or a new output folder")
        logger.info("resuming %s after epoch %d", out, trainer["epoch"])
    else:
        if resume and out.exists():  # (a recipe's first training resumes into a folder not made yet: no news)
            logger.warning("%s holds no saved training state: training starts afresh", out)
        torch.manual_seed(options.seed)
        random.seed(options.seed)
        np.random.seed(options.seed)
        generator.manual_seed(options.seed)
        model = cls.from_training_data(config, list(examples.queries.values()), list(examples.texts.values()),
                                       list(examples.doc_fields.values()))
        trainer = {"recipe": comparable, "epoch": 0, "best": None, "best_epoch": 0, "bad_epochs": 0, "history": [],
                   "finished": False}
    model.to(device)
    sampling = model.batch_sampling()
    steps_per_epoch = epoch_steps(examples, sampling, options)
    stepper = Stepper(model, options, steps_per_epoch * options.epochs, maximize, device)
    if trainer["epoch"]:
        stepper.load_state_dict(trainer["stepper"])
        set_rng_state(trainer["rng"], generator)
    logger.info("training %s on %s (%s): %s, %s batches, %d steps/epoch, %s", model_name, train_set.name,
                ", ".join(f"{k} {v}" for k, v in examples.summary().items()), options.optimizer, sampling,
                steps_per_epoch, device)

    if state_dir.is_dir():
        sweep_state(state_dir)  # folders of saves interrupted before their commit
    try:
        while trainer["epoch"] < options.epochs and not trainer["finished"]:
            epoch = trainer["epoch"] + 1
            start = time.perf_counter()
            record = _train_epoch(model, examples, sampling, options, stepper, generator, device, epoch)
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
            trainer.update(stepper=stepper.state_dict(), rng=rng_state(generator))
            save_state(state_dir, model, trainer)
            logger.info("epoch %d: loss %.4f%s%s (%.0fs)", epoch, record["loss"],
                        "".join(f", dev {k} {v:.4f}" for k, v in record.get("dev", {}).items() if v is not None),
                        " *" if improved else "", record["seconds"])
            if on_epoch_end is not None:
                on_epoch_end(record)
    except KeyboardInterrupt:
        saved = committed_epoch(state_dir)
        logger.warning("interrupted: %s", f"epochs 1-{saved} are saved in {state_dir}; continue with --resume"
                       if saved else "no epoch was saved yet; --resume would start afresh")
        raise

    trainer["finished"] = True
    best_record = trainer["history"][trainer["best_epoch"] - 1]
    _finish(out, recipe, trainer, best_record)
    return TrainResult(out, trainer["best_epoch"], best_record.get("dev", {}), trainer["history"])


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
                loss, cut = batch_loss(model, groups, device)
            stepper.step(loss.total)
            total, count, truncated = total + loss.total.item(), count + 1, truncated + cut
            for name, part in loss.parts.items():
                parts[name] = parts.get(name, 0.0) + part.item()
            bar.update(1)
            bar.set_postfix(loss=f"{total / count:.4f}")
    if truncated:
        logger.warning("epoch %d: %d training inputs were truncated to fit the model", epoch, truncated)
    return {"epoch": epoch, "loss": total / max(1, count), "loss_parts": {k: v / max(1, count) for k, v in parts.items()},
            "lr": stepper.optimizer.param_groups[0]["lr"], "steps": count, "truncated": truncated,
            "train_seconds": round(time.perf_counter() - start, 2)}


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

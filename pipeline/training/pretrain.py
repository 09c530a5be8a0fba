"""The MLM pretraining loop (`irpipe pretrain-mlm`; options, corpus and vocabulary in pipeline/training/mlm.py,
whose docstring gives the method; the masked examples and sentence pairs in pipeline/training/mlm_examples.py).

    OUT/config.json, model.safetensors, vocab.txt, tokenizer.json   the BERT folder (BertForMaskedLM), after every save
    OUT/pretrain.jsonl      one line per `log_every` steps: step, loss, accuracy, lr, tokens/s; held-out at saves
    OUT/pretrain.json       the options and corpus this folder was started with (a resume must match them)
    OUT/state/step-0001500/ weights, optimizer, schedule, RNG: committed by rewriting OUT/state/current.json

Step s draws the batch s mod (batches per epoch) of epoch s div (batches per epoch), in a per-epoch seeded order;
masks come from one generator whose state is saved, so a resumed run continues exactly. The optimiser, its
warm-up/decay schedule and the step are pipeline/training/optim.py's (`LinearWarmupDecay.mlm`); the saved states
pipeline/training/state.py's (`StateStore`), as for `irpipe train`.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import load_model, save_model

from pipeline.data.files import atomic_write, writing
from pipeline.errors import ConfigError
from pipeline.log import logger, progress
from pipeline.rerank.bert import new_bert_config, write_bert_folder
from pipeline.rerank.integrity import PRETRAIN_RECORD, PRETRAIN_STATE
from pipeline.rerank.scoring import autocast, resolve_amp, resolve_device
from pipeline.training.mlm import LOG, MLMOptions, build_vocab, make_tokenizer
from pipeline.training.mlm_examples import MaskedBatches
from pipeline.training.optim import GradientStepper, LinearWarmupDecay, make_optimizer
from pipeline.training.state import StateStore, rng_state, set_rng_state, write_by_path

WEIGHTS = "model.safetensors"


def split_held_out(texts: list[str], fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """(training, held-out) texts: a seeded random `fraction` held out (at least one when fraction > 0)."""
    order = torch.randperm(len(texts), generator=torch.Generator().manual_seed(seed)).tolist()
    count = max(1, round(fraction * len(texts))) if fraction > 0 else 0
    held = set(order[:count])
    return [t for i, t in enumerate(texts) if i not in held], [t for i, t in enumerate(texts) if i in held]


def new_model(vocab_size: int, options: MLMOptions):
    """A BertForMaskedLM (`pairs`: BertForPreTraining, with the pair head) initialised from `seed` (heads of 64, or
    32; feed-forward 4 x hidden)."""
    from transformers import BertForMaskedLM, BertForPreTraining

    config = new_bert_config(vocab_size, options.hidden, options.layers,
                             positions=max(128, options.max_length))  # fine-tuning uses up to 128 pieces
    torch.manual_seed(options.seed)
    return BertForPreTraining(config) if options.pairs else BertForMaskedLM(config)


def forward(model, batch: dict) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(MLM logits (B, L, V), pair logits (B, 2) or None, in fp32) of a batch (moved to the model's device; on CUDA
    under bf16 autocast)."""
    device = next(model.parameters()).device
    for key, value in batch.items():
        batch[key] = value.to(device, non_blocking=True)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}
    with autocast(device, resolve_amp("auto", device)):
        out = model(**inputs)
    if "pair_labels" in batch:
        return out.prediction_logits.float(), out.seq_relationship_logits.float()
    return out.logits.float(), None


def pair_hits(pair_logits: torch.Tensor, batch: dict) -> int:
    """How many pairs the head calls right (class 1: B is A's copy; BertForPreTraining's head, its classes ours)."""
    return int((pair_logits.argmax(-1) == batch["pair_labels"]).sum())


def new_stepper(model, options: MLMOptions) -> GradientStepper:
    """AdamW (decay on matrices), the mlm warm-up then linear decay over `steps`, gradients clipped to norm 1."""
    optimizer = make_optimizer(model, "adamw", options.lr, options.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, LinearWarmupDecay.mlm(options.warmup, options.steps))
    return GradientStepper(model, optimizer, scheduler, max_grad_norm=1.0)


@torch.no_grad()
def held_out_scores(model, batches: MaskedBatches, seed: int, batch_size: int) -> dict:
    """Masked-token loss and accuracy over every held-out sentence, with masks fixed by `seed` (comparable across
    saves)."""
    model.eval()
    generator, loss, correct, count, pairs_right = torch.Generator().manual_seed(seed), 0.0, 0, 0, 0
    rows = batches.keep
    for start in range(0, len(rows), batch_size):
        batch = batches.batch(rows[start:start + batch_size], generator)
        logits, pair_logits = forward(model, batch)                                     # (B, L, V), (B, 2)
        chosen = batch["labels"] != -100
        loss += torch.nn.functional.cross_entropy(logits[chosen], batch["labels"][chosen], reduction="sum").item()
        correct += (logits[chosen].argmax(-1) == batch["labels"][chosen]).sum().item()
        count += int(chosen.sum())
        pairs_right += pair_hits(pair_logits, batch) if pair_logits is not None else 0
    model.train()
    scores = {"loss": loss / max(1, count), "accuracy": correct / max(1, count), "tokens": count}
    return scores | ({"pair_accuracy": pairs_right / max(1, len(rows))} if batches.options.pairs else {})


def _store(out: Path) -> StateStore:
    return StateStore(out / PRETRAIN_STATE, "step", 7)


def _truncate_log(path: Path, step: int) -> None:
    """Drop the log records after `step`."""
    if path.is_file():
        kept = [line for line in path.read_text(encoding="utf-8").splitlines() if json.loads(line)["step"] <= step]
        with atomic_write(path) as handle:
            handle.write("".join(f"{line}\n" for line in kept))


def _started(out: Path, settings: dict, resume: bool) -> bool:
    """Record the settings of a new run; on --resume check they are the recorded ones. True when resuming."""
    record = out / PRETRAIN_RECORD
    if record.is_file():
        if not resume:
            raise ConfigError(f"{out} already holds a pretraining run: pass --resume to continue it, or another --output")
        before = json.loads(record.read_text(encoding="utf-8"))
        changed = sorted(k for k in settings if before.get(k) != settings[k])
        if changed:
            raise ConfigError(f"{out}: cannot resume with changed {', '.join(changed)} (recorded in {record})")
        return _store(out).exists()
    with atomic_write(record) as handle:
        json.dump(settings, handle, indent=2, ensure_ascii=False)
    return False


@dataclass
class Window:
    """Sums over the steps since the last log line."""

    loss: float = 0.0
    correct: int = 0
    count: int = 0
    seconds: float = 0.0
    tokens: int = 0
    pairs: int = 0
    pairs_right: int = 0

    def add(self, loss: torch.Tensor, logits: torch.Tensor, batch: dict, seconds: float,
            pair_logits: torch.Tensor | None = None) -> None:
        chosen = batch["labels"] != -100
        count = int(chosen.sum())
        self.loss += loss.item() * count
        self.correct += int((logits[chosen].argmax(-1) == batch["labels"][chosen]).sum())
        self.count += count
        self.seconds += seconds
        self.tokens += int(batch["attention_mask"].sum())
        if pair_logits is not None:
            self.pairs += len(pair_logits)
            self.pairs_right += pair_hits(pair_logits, batch)

    def record(self, step: int, per_epoch: int, lr: float) -> dict:
        record = {"step": step, "epoch": round(step / per_epoch, 3), "loss": self.loss / max(1, self.count),
                  "accuracy": self.correct / max(1, self.count), "lr": lr,
                  "tokens_per_s": self.tokens / max(1e-9, self.seconds)}
        return record | ({"pair_accuracy": self.pairs_right / self.pairs} if self.pairs else {})


@dataclass
class Pretraining:
    """One pretraining run: its folder, options, data, model, stepper, mask generator and saved states."""

    out: Path
    options: MLMOptions
    tokenizer: object
    batches: MaskedBatches
    held: MaskedBatches
    model: torch.nn.Module
    stepper: GradientStepper
    generator: torch.Generator
    store: StateStore

    @property
    def per_epoch(self) -> int:
        return -(-len(self.batches.keep) // self.options.batch_size)

    def train_step(self, step: int) -> tuple[torch.Tensor, torch.Tensor, dict, torch.Tensor | None]:
        """One optimizer step on batch `step`: (MLM loss, MLM logits, batch, pair logits or None)."""
        size = self.options.batch_size
        epoch, index = divmod(step, self.per_epoch)
        order = self.batches.epoch_order(epoch)
        batch = self.batches.batch(order[index * size:(index + 1) * size], self.generator)
        logits, pair_logits = forward(self.model, batch)                                # (B, L, V), (B, 2)
        chosen = batch["labels"] != -100
        loss = torch.nn.functional.cross_entropy(logits[chosen], batch["labels"][chosen])
        pair_loss = (torch.nn.functional.cross_entropy(pair_logits, batch["pair_labels"]) if pair_logits is not None
                     else 0.0)
        self.stepper.step(loss + pair_loss)
        return loss.detach(), logits, batch, pair_logits

    def save(self, step: int) -> None:
        """The resumable state after `step` (committed), then the BERT folder."""
        trainer = {"step": step, "stepper": self.stepper.state_dict(), "rng": rng_state(self.generator)}
        # the output embedding is tied to the input one: save_model writes it once
        self.store.save(step, lambda folder: write_by_path(folder / WEIGHTS, lambda path: save_model(self.model, path)),
                        trainer)
        write_bert_folder(self.model, self.tokenizer, self.out)

    def resume(self) -> int:
        """Model, stepper and RNG states of the committed state; its step."""
        folder, trainer = self.store.load()
        if "rng" not in trainer:  # saved before state.py was shared: the same states under other names
            trainer = {"step": trainer["step"], "rng": {"torch": trainer["torch"], "shuffle": trainer["generator"]},
                       "stepper": {"optimizer": trainer["optimizer"], "scheduler": trainer["scheduler"]}}
        try:
            load_model(self.model, str(folder / WEIGHTS))
        except (OSError, ValueError, RuntimeError) as error:
            raise self.store.inconsistent(error) from None
        self.stepper.load_state_dict(trainer["stepper"])
        set_rng_state(trainer["rng"], self.generator)
        logger.info("pretrain-mlm: resuming at step %d of %d", trainer["step"], self.options.steps)
        return trainer["step"]


def pretrain(texts: list[str], out: str | Path, options: MLMOptions, vocab: list[str] | None = None,
             resume: bool = False, max_minutes: float | None = None) -> dict:
    """Pretrain (or continue) a BERT by MLM on `texts` into `out`; returns the last log record."""
    options.check()
    if options.threads:
        torch.set_num_threads(options.threads)
    out = Path(out)
    train_texts, held_texts = split_held_out(texts, options.held_out, options.seed)
    vocab = vocab or build_vocab(train_texts)
    resuming = _started(out, _settings(texts, vocab, options), resume)
    tokenizer = make_tokenizer(vocab, out)
    batches, held = MaskedBatches(train_texts, tokenizer, options), MaskedBatches(held_texts, tokenizer, options)
    model = new_model(len(vocab), options).to(resolve_device(options.device))
    run = Pretraining(out, options, tokenizer, batches, held, model, new_stepper(model, options),
                      torch.Generator().manual_seed(options.seed), _store(out))
    step = run.resume() if resuming else 0
    _truncate_log(out / LOG, step)  # records after the state resumed from (all of them: none) are written again
    return _run(run, step, max_minutes)


def _settings(texts: list[str], vocab: list[str], options: MLMOptions) -> dict:
    """What a resume must match: the options (less how it runs), the corpus and the vocabulary."""
    return {"options": {k: v for k, v in asdict(options).items() if k not in ("threads", "device", "save_every", "log_every")},
            "corpus_sha1": hashlib.sha1("\n".join(texts).encode()).hexdigest(), "texts": len(texts),
            "vocab_sha1": hashlib.sha1("\n".join(vocab).encode()).hexdigest()}


def _run(run: Pretraining, step: int, max_minutes: float | None) -> dict:
    """Steps from `step` to `options.steps` (or until `max_minutes`), logging and saving on the way."""
    options = run.options
    started, window, record = time.monotonic(), Window(), {}
    run.model.train()
    with progress(desc="pretrain-mlm", total=options.steps, unit="step") as bar:
        bar.update(step)
        while step < options.steps:
            tick = time.monotonic()
            loss, logits, batch, pair_logits = run.train_step(step)
            step += 1
            bar.update(1)
            window.add(loss, logits, batch, time.monotonic() - tick, pair_logits)
            out_of_time = max_minutes is not None and time.monotonic() - started > 60 * max_minutes
            saving = step % options.save_every == 0 or step == options.steps or out_of_time
            if step % options.log_every == 0 or saving:
                record = window.record(step, run.per_epoch, run.stepper.scheduler.get_last_lr()[0])
                window = Window()
                if saving:
                    record["held_out"] = held_out_scores(run.model, run.held, options.seed + 1, 2 * options.batch_size)
                # appended (a resume drops later lines); a full or read-only disk: exit 2 naming the log
                with writing(run.out / LOG), open(run.out / LOG, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(record) + "\n")
                if saving:
                    run.save(step)
                bar.set_postfix(loss=f"{record['loss']:.3f}", acc=f"{record['accuracy']:.3f}")
            if out_of_time and step < options.steps:
                logger.info("pretrain-mlm: --max-minutes reached at step %d (saved); --resume continues", step)
                break
    return record

"""The MLM masking and pretraining loop (`irpipe pretrain-mlm`; options, corpus and vocabulary in
pipeline/training/mlm.py, whose docstring gives the method).

    OUT/config.json, model.safetensors, vocab.txt, tokenizer.json   the BERT folder (BertForMaskedLM), after every save
    OUT/pretrain.jsonl      one line per `log_every` steps: step, loss, accuracy, lr, tokens/s; held-out at saves
    OUT/pretrain.json       the options and corpus this folder was started with (a resume must match them)
    OUT/state/step-0001500/ weights, optimizer, schedule, RNG: committed by rewriting OUT/state/current.json

Step s draws the batch s mod (batches per epoch) of epoch s div (batches per epoch), in a per-epoch seeded order;
masks come from one generator whose state is saved, so a resumed run continues exactly.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import torch
from safetensors.torch import load_file, load_model, save_file, save_model

from pipeline.data.files import atomic_write
from pipeline.errors import ConfigError
from pipeline.log import logger, progress
from pipeline.rerank.checkpoint import file_digest
from pipeline.training.mlm import LOG, SPECIALS, MLMOptions, build_vocab, make_tokenizer
from pipeline.training.state import decode_state, encode_state

COMMIT = "current.json"


# -- masking ---------------------------------------------------------------------------------------------------

def word_ids(text: str, offsets: list[tuple[int, int]], whole_words: bool) -> list[int]:
    """The word of each token: jieba words by character span (whole-word masking), else each token its own."""
    if not whole_words:
        return list(range(len(offsets)))
    from pipeline.retrieve.segment import default_segmenter

    owner, start = [0] * len(text), 0
    for index, word in enumerate(default_segmenter().cut(text)):  # normalised text: NFKC keeps CJK positions
        owner[start:start + len(word)] = [index] * len(word)
        start += len(word)
    return [owner[s] if s < len(owner) else -1 for s, _ in offsets]


def mask_tokens(ids: list[int], words: list[int], rate: float, vocab_size: int, mask_id: int, first_normal: int,
                generator: torch.Generator) -> tuple[list[int], list[int]]:
    """(inputs, labels) of one sentence's token ids: round(rate x tokens) tokens chosen by whole words in a random
    order (a word that would overshoot is skipped); labels are the original ids there and -100 elsewhere."""
    budget = max(1, round(rate * len(ids)))
    groups: dict[int, list[int]] = {}
    for position, word in enumerate(words):
        groups.setdefault(word, []).append(position)
    order = torch.randperm(len(groups), generator=generator).tolist()
    chosen: list[int] = []
    for key in (list(groups)[i] for i in order):
        if len(chosen) + len(groups[key]) <= budget:
            chosen += groups[key]
    inputs, labels = list(ids), [-100] * len(ids)
    for position in chosen:
        labels[position] = ids[position]
        draw = torch.rand(1, generator=generator).item()
        if draw < 0.8:
            inputs[position] = mask_id
        elif draw < 0.9:
            inputs[position] = int(torch.randint(first_normal, vocab_size, (1,), generator=generator))
    return inputs, labels


class MaskedBatches:
    """Token ids and word ids of every text (tokenized once); batches with fresh masks from a seeded generator."""

    def __init__(self, texts: list[str], tokenizer, options: MLMOptions):
        encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, truncation=True,
                            max_length=options.max_length - 2)
        self.ids = encoded["input_ids"]
        self.words = [word_ids(text, offsets, options.whole_words)
                      for text, offsets in zip(texts, encoded["offset_mapping"])]
        self.tokenizer, self.options = tokenizer, options
        self.keep = [i for i, ids in enumerate(self.ids) if ids]

    def batch(self, rows: list[int], generator: torch.Generator) -> dict[str, torch.Tensor]:
        tok, options = self.tokenizer, self.options
        inputs, labels = [], []
        for row in rows:
            masked, target = mask_tokens(self.ids[row], self.words[row], options.mask_rate, tok.vocab_size,
                                         tok.mask_token_id, len(SPECIALS), generator)
            inputs.append([tok.cls_token_id, *masked, tok.sep_token_id])
            labels.append([-100, *target, -100])
        length = max(map(len, inputs))
        batch = {"input_ids": torch.full((len(rows), length), tok.pad_token_id), "labels": torch.full((len(rows), length), -100),
                 "attention_mask": torch.zeros((len(rows), length), dtype=torch.long)}   # (B, L) each
        for i, (row, target) in enumerate(zip(inputs, labels)):
            batch["input_ids"][i, :len(row)] = torch.tensor(row)
            batch["labels"][i, :len(row)] = torch.tensor(target)
            batch["attention_mask"][i, :len(row)] = 1
        return batch

    def epoch_order(self, epoch: int) -> list[int]:
        generator = torch.Generator().manual_seed(self.options.seed * 100003 + epoch)
        return [self.keep[i] for i in torch.randperm(len(self.keep), generator=generator).tolist()]


def split_held_out(texts: list[str], fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """(training, held-out) texts: a seeded random `fraction` held out (at least one when fraction > 0)."""
    order = torch.randperm(len(texts), generator=torch.Generator().manual_seed(seed)).tolist()
    count = max(1, round(fraction * len(texts))) if fraction > 0 else 0
    held = set(order[:count])
    return [t for i, t in enumerate(texts) if i not in held], [t for i, t in enumerate(texts) if i in held]


def new_model(vocab_size: int, options: MLMOptions):
    from transformers import BertConfig, BertForMaskedLM

    heads = options.hidden // 64 if options.hidden % 64 == 0 else options.hidden // 32
    config = BertConfig(vocab_size=vocab_size, hidden_size=options.hidden, num_hidden_layers=options.layers,
                        num_attention_heads=heads, intermediate_size=4 * options.hidden,
                        max_position_embeddings=max(128, options.max_length))  # fine-tuning uses up to 128 pieces
    torch.manual_seed(options.seed)
    return BertForMaskedLM(config)


def schedule(options: MLMOptions):
    warm = max(1, round(options.warmup * options.steps))
    return lambda step: min((step + 1) / warm, max(0.0, (options.steps - step) / max(1, options.steps - warm)))


@torch.no_grad()
def held_out_scores(model, batches: MaskedBatches, seed: int, batch_size: int) -> dict:
    """Masked-token loss and accuracy over every held-out sentence, with masks fixed by `seed` (comparable across
    saves)."""
    model.eval()
    generator, loss, correct, count = torch.Generator().manual_seed(seed), 0.0, 0, 0
    rows = batches.keep
    for start in range(0, len(rows), batch_size):
        batch = batches.batch(rows[start:start + batch_size], generator)
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits  # (B, L, V)
        chosen = batch["labels"] != -100
        loss += torch.nn.functional.cross_entropy(logits[chosen], batch["labels"][chosen], reduction="sum").item()
        correct += (logits[chosen].argmax(-1) == batch["labels"][chosen]).sum().item()
        count += int(chosen.sum())
    model.train()
    return {"loss": loss / max(1, count), "accuracy": correct / max(1, count), "tokens": count}


def _export(model, tokenizer, out: Path) -> None:
    """The BERT folder: written beside, then each file renamed into place."""
    scratch = out / ".export"
    shutil.rmtree(scratch, ignore_errors=True)
    model.save_pretrained(scratch)
    tokenizer.save_pretrained(scratch)
    for path in scratch.iterdir():
        os.replace(path, out / path.name)
    scratch.rmdir()


def _save_state(root: Path, model, trainer: dict) -> None:
    folder = root / f"step-{trainer['step']:07d}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    save_model(model, str(folder / "model.safetensors"))  # the output embedding is tied to the input one
    tensors: dict = {}
    encoded = encode_state(trainer, tensors)
    save_file(tensors, str(folder / "trainer.safetensors"))
    with atomic_write(folder / "trainer.json") as handle:
        json.dump(encoded, handle)
    files = {p.name: file_digest(p) for p in sorted(folder.iterdir())}
    with atomic_write(root / COMMIT) as handle:  # the commit point
        json.dump({"folder": folder.name, "step": trainer["step"], "files": files}, handle)
    for other in root.glob("step-*"):
        if other.name != folder.name:
            shutil.rmtree(other, ignore_errors=True)


def _load_state(root: Path, model) -> dict:
    try:
        record = json.loads((root / COMMIT).read_text(encoding="utf-8"))
        folder = root / record["folder"]
        for name, digest in record["files"].items():
            if file_digest(folder / name) != digest:
                raise ValueError(f"{folder / name} changed after it was saved")
        load_model(model, str(folder / "model.safetensors"))
        return decode_state(json.loads((folder / "trainer.json").read_text(encoding="utf-8")),
                            load_file(str(folder / "trainer.safetensors")))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ConfigError(f"{root / COMMIT}: the pretraining state is inconsistent ({error}); start afresh in a "
                          "new --out folder") from None


def _truncate_log(path: Path, step: int) -> None:
    """Drop the log records after the resumed state's step (they are written again)."""
    if path.is_file():
        kept = [line for line in path.read_text(encoding="utf-8").splitlines() if json.loads(line)["step"] <= step]
        with atomic_write(path) as handle:
            handle.write("".join(f"{line}\n" for line in kept))


def _started(out: Path, settings: dict, resume: bool) -> bool:
    """Record the settings of a new run; on --resume check they are the recorded ones. True when resuming."""
    record = out / "pretrain.json"
    if record.is_file():
        if not resume:
            raise ConfigError(f"{out} already holds a pretraining run: pass --resume to continue it, or another --out")
        before = json.loads(record.read_text(encoding="utf-8"))
        changed = sorted(k for k in settings if before.get(k) != settings[k])
        if changed:
            raise ConfigError(f"{out}: cannot resume with changed {', '.join(changed)} (recorded in {record})")
        return (out / "state" / COMMIT).is_file()
    with atomic_write(record) as handle:
        json.dump(settings, handle, indent=2, ensure_ascii=False)
    return False


def pretrain(texts: list[str], out: str | Path, options: MLMOptions, vocab: list[str] | None = None,
             resume: bool = False, max_minutes: float | None = None) -> dict:
    """Pretrain (or continue) a BERT by MLM on `texts` into `out`; returns the last log record."""
    options.check()
    if options.threads:
        torch.set_num_threads(options.threads)
    out = Path(out)
    train_texts, held_texts = split_held_out(texts, options.held_out, options.seed)
    vocab = vocab or build_vocab(train_texts)
    corpus = hashlib.sha1("\n".join(texts).encode()).hexdigest()
    settings = {"options": {k: v for k, v in asdict(options).items() if k not in ("threads", "save_every", "log_every")},
                "corpus_sha1": corpus, "texts": len(texts), "vocab_sha1": hashlib.sha1("\n".join(vocab).encode()).hexdigest()}
    resuming = _started(out, settings, resume)
    tokenizer = make_tokenizer(vocab, out)
    batches, held = MaskedBatches(train_texts, tokenizer, options), MaskedBatches(held_texts, tokenizer, options)
    model = new_model(len(vocab), options)
    decay = [p for n, p in model.named_parameters() if p.dim() > 1]
    rest = [p for n, p in model.named_parameters() if p.dim() <= 1]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": options.weight_decay},
                                   {"params": rest, "weight_decay": 0.0}], lr=options.lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule(options))
    generator, step = torch.Generator().manual_seed(options.seed), 0
    if resuming:
        trainer = _load_state(out / "state", model)
        optimizer.load_state_dict(trainer["optimizer"])
        scheduler.load_state_dict(trainer["scheduler"])
        generator.set_state(trainer["generator"])
        torch.set_rng_state(trainer["torch"])
        step = trainer["step"]
        _truncate_log(out / LOG, step)
        logger.info("pretrain-mlm: resuming at step %d of %d", step, options.steps)
    per_epoch = -(-len(batches.keep) // options.batch_size)
    started, window = time.monotonic(), {"loss": 0.0, "correct": 0, "count": 0, "seconds": 0.0, "tokens": 0}
    record: dict = {}
    model.train()
    with progress(desc="pretrain-mlm", total=options.steps, unit="step") as bar:
        bar.update(step)
        while step < options.steps:
            tick = time.monotonic()
            epoch, index = divmod(step, per_epoch)
            order = batches.epoch_order(epoch)
            batch = batches.batch(order[index * options.batch_size:(index + 1) * options.batch_size], generator)
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits  # (B, L, V)
            chosen = batch["labels"] != -100
            loss = torch.nn.functional.cross_entropy(logits[chosen], batch["labels"][chosen])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            step += 1
            bar.update(1)
            count = int(chosen.sum())
            window["loss"] += loss.item() * count
            window["correct"] += int((logits[chosen].argmax(-1) == batch["labels"][chosen]).sum())
            window["count"] += count
            window["seconds"] += time.monotonic() - tick
            window["tokens"] += int(batch["attention_mask"].sum())
            out_of_time = max_minutes is not None and time.monotonic() - started > 60 * max_minutes
            saving = step % options.save_every == 0 or step == options.steps or out_of_time
            if step % options.log_every == 0 or saving:
                record = {"step": step, "epoch": round(step / per_epoch, 3), "loss": window["loss"] / max(1, window["count"]),
                          "accuracy": window["correct"] / max(1, window["count"]), "lr": scheduler.get_last_lr()[0],
                          "tokens_per_s": window["tokens"] / max(1e-9, window["seconds"])}
                window = {"loss": 0.0, "correct": 0, "count": 0, "seconds": 0.0, "tokens": 0}
                if saving:
                    record["held_out"] = held_out_scores(model, held, options.seed + 1, 2 * options.batch_size)
                with open(out / LOG, "a", encoding="utf-8") as handle:  # appended; a resume drops lines after its step
                    handle.write(json.dumps(record) + "\n")
                if saving:
                    _save_state(out / "state", model, {"step": step, "optimizer": optimizer.state_dict(),
                                                       "scheduler": scheduler.state_dict(),
                                                       "generator": generator.get_state(),
                                                       "torch": torch.get_rng_state()})  # torch: dropout
                    _export(model, tokenizer, out)
                bar.set_postfix(loss=f"{record['loss']:.3f}", acc=f"{record['accuracy']:.3f}")
            if out_of_time and step < options.steps:
                logger.info("pretrain-mlm: --max-minutes reached at step %d (saved); --resume continues", step)
                break
    return record

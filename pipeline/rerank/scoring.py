"""Running a model: devices, autocast, and batched scoring of pairs (`predict`) shared by reranking and training.

`predict` sorts the pairs by length so that a batch holds similar lengths (less padding), runs under
`torch.inference_mode` (and autocast when asked), counts the pairs the model had to truncate, and, with
`with_loss=True`, also returns the mean of the model's own loss over labelled pairs (dev loss; pairs of one query
form one group).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from pipeline.errors import ConfigError
from pipeline.log import progress
from pipeline.rerank.model import Batch, RerankModel
from pipeline.rerank.pairs import Pair

AMP_DTYPES = ("bf16", "fp16")
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class Runtime:
    """How a model runs (not what it computes): pairs a batch, device ("auto": CUDA when present), autocast,
    torch CPU threads (None: torch's default)."""

    batch_size: int = 64
    device: str = "auto"
    amp: str | None = None
    threads: int | None = None

    def start(self) -> torch.device:
        """Set the thread count; the device to run on."""
        if self.threads:
            torch.set_num_threads(self.threads)
        return resolve_device(self.device)


def resolve_device(device: str = "auto") -> torch.device:
    """"auto": the first CUDA device when there is one, else the CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError:
        raise ConfigError(f"unknown device {device!r}; expected auto, cpu, cuda or cuda:N", field="device") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} asked for, but torch sees no CUDA device here; use device=cpu or auto",
                          field="device")
    return resolved


def check_amp(amp: str | None) -> str | None:
    if amp in (None, "", "none", "no", False):
        return None
    if amp not in AMP_DTYPES:
        raise ConfigError(f"amp={amp!r}; choose one of {', '.join(AMP_DTYPES)} or none", field="amp")
    return amp


def autocast(device: torch.device, amp: str | None):
    """torch.autocast for `amp` on `device`, or a no-op context. fp16 needs CUDA; bf16 works on both."""
    amp = check_amp(amp)
    if amp is None:
        return contextlib.nullcontext()
    if amp == "fp16" and device.type != "cuda":
        raise ConfigError("fp16 autocast needs a CUDA device; use amp=bf16 or no amp on the CPU", field="amp")
    return torch.autocast(device.type, dtype=torch.bfloat16 if amp == "bf16" else torch.float16)


def labelled(batch: Batch, device: torch.device | str, groups: list[int] | None = None) -> Batch:
    """`batch` with its pairs' labels and groups (what a pairwise loss compares) as tensors; default groups: one
    per query, numbered in order of appearance."""
    if groups is None:
        numbers: dict[str, int] = {}
        groups = [numbers.setdefault(p.qid, len(numbers)) for p in batch.pairs]
    batch.labels = torch.tensor([p.label for p in batch.pairs], dtype=torch.float32, device=device)
    batch.groups = torch.tensor(groups, device=device)
    return batch


@dataclass
class Scored:
    """What `predict` returns: one score per pair (input order), how many pairs were truncated, and the mean loss
    (with_loss) and its parts."""

    scores: list[float]
    truncated: int
    loss: float | None = None
    loss_parts: dict[str, float] | None = None


def length_order(pairs: list[Pair]) -> list[int]:
    """The order `predict` scores pairs in: longest first (query + text characters), ties in input order."""
    return sorted(range(len(pairs)), key=lambda i: len(pairs[i].query) + len(pairs[i].text), reverse=True)


def predict(model: RerankModel, pairs: list[Pair], batch_size: int = 64, device: torch.device | str = "cpu",
            amp: str | None = None, with_loss: bool = False, desc: str = "scoring",
            order: list[int] | None = None) -> Scored:
    """Score pairs with `model` in length-sorted batches (`order`, default `length_order(pairs)`: the i-th batch is
    `order[i * batch_size:(i + 1) * batch_size]`), in eval mode and under inference_mode."""
    device = torch.device(device) if isinstance(device, str) else device
    order = length_order(pairs) if order is None else order
    scores = torch.zeros(len(pairs), dtype=torch.float32)
    truncated, loss_sum, part_sums = 0, 0.0, {}
    model.eval().to(device)
    with torch.inference_mode(), autocast(device, amp), progress(desc=desc, total=len(order), unit="pair") as bar:
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            batch = model.prepare([pairs[i] for i in chunk]).to(device)
            truncated += batch.truncated
            output = model(**batch.tensors)
            scores[chunk] = model.score(output).float().cpu()
            if with_loss:
                loss = model.loss(output, labelled(batch, device))
                loss_sum += float(loss.total) * len(chunk)
                for name, part in loss.parts.items():
                    part_sums[name] = part_sums.get(name, 0.0) + float(part) * len(chunk)
            bar.update(len(chunk))
    if not with_loss or not order:
        return Scored(scores.tolist(), truncated)
    return Scored(scores.tolist(), truncated, loss_sum / len(order), {k: v / len(order) for k, v in part_sums.items()})

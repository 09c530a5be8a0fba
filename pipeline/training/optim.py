"""Optimisers, learning-rate schedules and the optimiser step, shared by `irpipe train` (pipeline/training/loop.py)
and `irpipe pretrain-mlm` (pipeline/training/pretrain.py), with their state for resuming.

    optimizer = make_optimizer(model, "adamw", lr=2e-5, weight_decay=0.01)   # decay on matrices only
    schedule  = LinearWarmupDecay.reranker(0.1, total)                        # or .mlm(0.05, total)
    stepper   = GradientStepper(model, optimizer, LambdaLR(optimizer, schedule), max_grad_norm=1.0)
    stepper.step(loss)                                                        # one batch

`Stepper(model, options, total_steps, maximize, device)` is the reranker loop's: its parts from `TrainOptions`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from pipeline.training.options import TrainOptions


def make_optimizer(model: torch.nn.Module, name: str, lr: float, weight_decay: float, momentum: float = 0.9,
                   nesterov: bool = False, start: tuple[str, ...] = (), start_lr: float = 1.0) -> torch.optim.Optimizer:
    """`name` (adamw | adam | sgd) over the trainable parameters: weight decay on matrices (dim >= 2), none on
    biases and norms; the parameters named by a prefix in `start` at lr x `start_lr` (0: frozen, requires_grad off)."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    start = start if start_lr != 1.0 else ()            # at 1 they are like the others; "x".startswith(()) is False
    slow = [p for n, p in named if n.startswith(start)]
    groups = _by_decay([p for n, p in named if not n.startswith(start)], weight_decay)
    if start_lr == 0:
        for p in slow:
            p.requires_grad_(False)
    else:
        groups += _by_decay(slow, weight_decay, lr=lr * start_lr)
    groups = [g for g in groups if g["params"]]
    if name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum, nesterov=nesterov)
    if name == "adam":
        return torch.optim.Adam(groups, lr=lr)
    return torch.optim.AdamW(groups, lr=lr)


def _by_decay(params: list, weight_decay: float, **group) -> list[dict]:
    """Two parameter groups: matrices (dim >= 2) with weight decay, biases and norms without."""
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay, **group},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0, **group}]


@dataclass
class LinearWarmupDecay:
    """The lr factor before step s (0-based) of `total`: a linear warm-up, then a linear decay to 0 at `total`,

        min(ramp, decay),  ramp = (s + 1) / (warmup + lag),  decay = max(0, (total - s) / max(1, total - warmup))

    Two callers, two shapes, each kept as it was because a trained model's every bit depends on it (cached recipes;
    the pretrained BERTs that kwbert's results come from):
      `reranker` (irpipe train): int(fraction x total) warm-up steps, lag 1 (the ramp peaks at step `warmup`); with a
          warm-up longer than the run (fraction > 1) the lr left after the last step is still the ramp's
          (`ramp_past_end`: it is logged as the last epoch's lr; no step uses it);
      `mlm` (irpipe pretrain-mlm): round(fraction x total) warm-up steps, at least 1, lag 0 (the ramp peaks at
          step `warmup` - 1 and the peak is held for two steps).
    The fields are the LambdaLR state that a resumed run reloads."""

    warmup: int
    total: int
    lag: int = 1
    ramp_past_end: bool = False

    @classmethod
    def reranker(cls, fraction: float, total: int) -> LinearWarmupDecay:
        return cls(int(fraction * total), total, lag=1, ramp_past_end=True)

    @classmethod
    def mlm(cls, fraction: float, total: int) -> LinearWarmupDecay:
        return cls(max(1, round(fraction * total)), total, lag=0)

    def __call__(self, step: int) -> float:
        ramp = (step + 1) / (self.warmup + self.lag)                                # 1 / (warmup + lag) -> 1
        decay = max(0.0, (self.total - step) / max(1, self.total - self.warmup))     # 1 -> 0 at `total`
        if self.ramp_past_end and self.total <= step < self.warmup:
            return ramp
        return min(ramp, decay)


def make_scheduler(optimizer, options: TrainOptions, total_steps: int, maximize: bool):
    """The reranker loop's schedule: linear (per step), plateau (per epoch, on the selection value) or none."""
    if options.schedule == "plateau":
        return torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="max" if maximize else "min",
                                                          factor=options.plateau_factor,
                                                          patience=options.plateau_patience)
    if options.schedule == "constant":
        return None
    return torch.optim.lr_scheduler.LambdaLR(optimizer, LinearWarmupDecay.reranker(options.warmup, total_steps))


class GradientStepper:
    """Optimizer, per-step schedule (or one stepped per epoch on a value: `per_epoch`) and optional fp16 gradient
    scaler: `step(loss)` once per batch, `end_epoch(value)` once per epoch, and their state for resuming."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler=None,
                 max_grad_norm: float | None = None, scaler=None, per_epoch: bool = False):
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.max_grad_norm, self.scaler, self.per_epoch = max_grad_norm, scaler, per_epoch

    def step(self, loss: torch.Tensor) -> None:
        """zero grad, backward (scaled), clip to `max_grad_norm`, optimizer step, schedule step."""
        self.optimizer.zero_grad(set_to_none=True)
        (self.scaler.scale(loss) if self.scaler else loss).backward()
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        if self.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        if self.scheduler is not None and not self.per_epoch:
            self.scheduler.step()

    def end_epoch(self, value: float) -> None:
        """A per-epoch schedule (plateau) steps on the epoch's selection value (dev measure or loss)."""
        if self.scheduler is not None and self.per_epoch:
            self.scheduler.step(value)

    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def state_dict(self) -> dict:
        parts = {"optimizer": self.optimizer, "scheduler": self.scheduler, "scaler": self.scaler}
        return {name: part.state_dict() for name, part in parts.items() if part is not None}

    def load_state_dict(self, state: dict) -> None:
        parts = {"optimizer": self.optimizer, "scheduler": self.scheduler, "scaler": self.scaler}
        for name, part in parts.items():
            if part is not None and name in state:
                part.load_state_dict(state[name])


class Stepper(GradientStepper):
    """The reranker loop's stepper, from `TrainOptions`: its optimizer and schedule, fp16 gradient scaling on CUDA."""

    def __init__(self, model, options: TrainOptions, total_steps: int, maximize: bool, device):
        optimizer = make_optimizer(model, options.optimizer, options.lr, options.weight_decay, options.momentum,
                                   options.nesterov, type(model).start_parameters(model.config), options.start_lr)
        scaler = torch.amp.GradScaler("cuda") if options.amp == "fp16" and device.type == "cuda" else None
        super().__init__(model, optimizer, make_scheduler(optimizer, options, total_steps, maximize),
                         options.max_grad_norm, scaler, per_epoch=options.schedule == "plateau")

"""Optimisers, learning-rate schedules and the training step (`Stepper`), with their state for resuming."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from pipeline.training.options import TrainOptions


def make_optimizer(model: torch.nn.Module, options: TrainOptions) -> torch.optim.Optimizer:
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
    if options.schedule == "plateau":
        return torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="max" if maximize else "min",
                                                          factor=options.plateau_factor,
                                                          patience=options.plateau_patience)
    if options.schedule == "constant":
        return None
    warmup = int(options.warmup * total_steps)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, LinearWarmupDecay(warmup, total_steps))


@dataclass
class LinearWarmupDecay:
    """lr factor at step s: s / warmup while warming up, then linear decay to 0 at the last step."""

    warmup: int
    total: int

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return (step + 1) / (self.warmup + 1)
        return max(0.0, (self.total - step) / max(1, self.total - self.warmup))


class Stepper:
    """Optimizer, LR schedule and (fp16 on CUDA) gradient scaler: one step per batch, one schedule step per epoch
    for the plateau schedule, and their state for resuming."""

    def __init__(self, model, options: TrainOptions, total_steps: int, maximize: bool, device):
        self.model, self.options = model, options
        self.optimizer = make_optimizer(model, options)
        self.scheduler = make_scheduler(self.optimizer, options, total_steps, maximize)
        self.scaler = torch.amp.GradScaler("cuda") if options.amp == "fp16" and device.type == "cuda" else None

    def step(self, loss) -> None:
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

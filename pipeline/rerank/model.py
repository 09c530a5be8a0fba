"""The contract between a neural reranker model and the shared framework (scoring, training, checkpoints).

A model file (hcan.py, monobert.py, mrnn.py, addax.py, kwbert.py) defines a config dataclass and a subclass of
`RerankModel`. The framework (pipeline/rerank/neural.py, train.py, checkpoint.py) never looks inside a model;
it only calls what is declared here:

    model = ModelClass.from_training_data(config, queries, docs)   # builds vocabularies / IDF tables, then the net
    batch = model.prepare(queries, docs)                             # tokenise + pad -> Batch (CPU tensors)
    out = model(**batch.tensors)                                     # forward pass -> raw output (e.g. logits)
    model.score(out)        -> (B,)  ranking score, higher = more relevant (inference)
    model.loss(out, labels) -> ()    the model's own pointwise loss (NLL for HCAN, CE for BERT, ...)
    model.save_assets(dir) / cls.load_assets(config, dir)          # vocabularies etc. beside the weights

Pairwise and triplet losses are computed by the framework from `score`-like outputs of positive and negative
batches (`model.margin_scores(out)`, by default the score itself).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import torch
from torch import nn


@dataclass
class Batch:
    """Model inputs for a list of (query, doc) pairs, plus how many of them were truncated."""

    tensors: dict[str, torch.Tensor]
    truncated: int = 0
    size: int = 0
    extra: dict = field(default_factory=dict)

    def to(self, device: torch.device | str) -> "Batch":
        return Batch({k: v.to(device) for k, v in self.tensors.items()}, self.truncated, self.size, self.extra)


class RerankModel(nn.Module):
    """Base class of every neural reranker model."""

    name: ClassVar[str] = ""            # registry / spec name, e.g. "hcan"
    config_class: ClassVar[type] = object  # the model's config dataclass
    default_loss: ClassVar[str] = "pointwise"  # "pointwise" (model.loss), "hinge" or "triplet"
    training_defaults: ClassVar[dict] = {}  # TrainOptions overrides (optimizer, lr, schedule...): see train.py

    def __init__(self, config):
        super().__init__()
        self.config = config

    @classmethod
    def from_training_data(cls, config, queries: list[str], docs: list[str]) -> "RerankModel":
        """A fresh model whose vocabularies/statistics come from the training texts (default: none needed)."""
        return cls(config)

    def prepare(self, queries: list[str], docs: list[str]) -> Batch:
        raise NotImplementedError

    def score(self, output: torch.Tensor) -> torch.Tensor:
        """(B,) ranking scores from the forward output."""
        raise NotImplementedError

    def loss(self, output: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Pointwise training loss for 0/1 (or graded) labels."""
        raise NotImplementedError

    def margin_scores(self, output: torch.Tensor) -> torch.Tensor:
        """(B,) scores that pairwise hinge / triplet losses compare (default: `score`)."""
        return self.score(output)

    def save_assets(self, directory: Path) -> None:
        """Write vocabularies, IDF tables, tokenizer files... beside the weights (default: nothing)."""

    @classmethod
    def load_assets(cls, config, directory: Path) -> "RerankModel":
        """Rebuild the (untrained) model from its config and assets; the framework then loads the weights."""
        return cls(config)

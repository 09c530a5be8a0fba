"""biencoder: cosine of mean-pooled sentence embeddings (docs/models.md §0, whose equation numbers these are), the
zero-shot baseline every model must beat.

    (1) u = mean_{i real} BERT("[CLS] q [SEP]")_i    (H,)  mean over real word pieces (attention mask)
    (2) v = mean_{j real} BERT("[CLS] d [SEP]")_j    (H,)
    (3) s(q, d) = cos(u, v)

Query and document are encoded separately, so document vectors are stored once (`irpipe encode`, a store of one
L2-normalised row per document; `biencoder(store=DIR)`). The default BERT is all-MiniLM-L6-v2 from its package,
trained with exactly this objective (sentence-transformers' mean pooling): `biencoder()` works zero-shot. Fine-tuning
(optional, `biencoder(train=...)`): in-batch negatives, cross-entropy over `scale` x cosine of each query against
every positive of the batch (MultipleNegativesRanking, (4)), through the shared loop.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from pipeline.rerank.bert import DEFAULT_BERT, BertBackbone, last_layer, mean_pool, single_inputs, single_lengths
from pipeline.declared import check_declared, option
from pipeline.rerank.model import Batch, LateInteraction, Loss, Pair, RerankModel
from pipeline.rerank.losses import in_batch_softmax


@dataclass
class BiEncoderConfig:
    bert: str = option(DEFAULT_BERT, "a local BERT checkpoint folder, or all-MiniLM-L6-v2 (the package's folder)")
    max_length: int = option(256, 'word pieces of "[CLS] text [SEP]", query and document alike', at_least=3,
                             integer=True)
    scale: float = option(20.0, "fine-tuning: softmax over scale * cos (sentence-transformers' MNRL default)",
                          at_least=0)

    def check(self) -> None:
        check_declared("biencoder", self)


class BiEncoder(LateInteraction, BertBackbone, RerankModel):
    name = "biencoder"
    config_class = BiEncoderConfig
    pretrained = True
    sampling = "positives"
    training_defaults = {"optimizer": "adamw", "lr": 2e-5, "weight_decay": 0.01, "schedule": "linear",
                         "warmup": 0.1, "train_batch_size": 32, "max_grad_norm": 1.0}

    def __init__(self, config: BiEncoderConfig, bert=None, tokenizer=None):
        super().__init__(config)
        self.attach_bert(bert, tokenizer)  # the config's BERT, pretrained, unless a checkpoint's is given

    # -- inputs ------------------------------------------------------------------------------------------------
    def prepare(self, pairs: list[Pair]) -> Batch:
        """"[CLS] q [SEP]" and "[CLS] d [SEP]" apart, each cut to max_length: (B, L) ids and masks."""
        q_ids, q_mask, q_cut = single_inputs(self.tokenizer, [p.query for p in pairs], self.config.max_length)
        d_ids, d_mask, d_cut = single_inputs(self.tokenizer, [p.text for p in pairs], self.config.max_length)
        return Batch({"query_ids": q_ids, "query_mask": q_mask, "doc_ids": d_ids, "doc_mask": d_mask},
                     q_cut + d_cut, pairs)

    def input_lengths(self, pairs: list[Pair]) -> list[int]:
        queries, docs = ([p.query for p in pairs], [p.text for p in pairs])
        return [q + d for q, d in zip(self.text_lengths(queries, "query"), self.text_lengths(docs, "document"))]

    # -- the model -----------------------------------------------------------------------------------------------
    def embed(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, L) -> (B, H): BERT's last layer, mean over real word pieces: eqs. (1)-(2)."""
        return mean_pool(last_layer(self.bert, ids, mask), mask)                         # (B, L, H) -> (B, H)

    def forward(self, query_ids, query_mask, doc_ids, doc_mask) -> torch.Tensor:
        return torch.stack([self.embed(query_ids, query_mask), self.embed(doc_ids, doc_mask)], 1)  # (B, 2, H)

    def score(self, output: torch.Tensor) -> torch.Tensor:
        return F.cosine_similarity(output[:, 0].float(), output[:, 1].float(), dim=-1)     # (B,)  (3)

    def loss(self, output: torch.Tensor, batch: Batch) -> Loss:
        positive = (batch.labels > 0).nonzero().flatten().tolist()                       # rows of positive pairs
        if not positive:
            zero = output.sum() * 0.0
            return Loss(zero, {"in_batch_ce": zero})
        ce = in_batch_softmax(output[positive, 0].float(), output[positive, 1].float(),    # (4)
                              [batch.pairs[i].qid for i in positive], self.config.scale)
        return Loss(ce, {"in_batch_ce": ce})

    # -- late interaction: documents and queries apart -----------------------------------------------------------
    def text_lengths(self, texts: list[str], side: str) -> list[int]:
        return single_lengths(self.tokenizer, texts, self.config.max_length)

    def prepare_texts(self, texts: list[str], side: str) -> tuple[torch.Tensor, torch.Tensor]:
        ids, mask, _ = single_inputs(self.tokenizer, texts, self.config.max_length)
        return ids, mask                                                                     # (B, L) each

    def encode_prepared(self, prepared: tuple[torch.Tensor, torch.Tensor], side: str) -> list[torch.Tensor]:
        device = next(self.parameters()).device
        ids, mask = (t.to(device, non_blocking=True) for t in prepared)
        vectors = F.normalize(self.embed(ids, mask).float(), dim=-1)                        # (B, H)
        return list(vectors) if side == "query" else list(vectors.unsqueeze(1))              # B x (H,) | (1, H)

    def encode_documents(self, texts: list[str]) -> list[torch.Tensor]:
        return self.encode_prepared(self.prepare_texts(texts, "document"), "document")       # B x (1, H)

    def encode_queries(self, texts: list[str]) -> list[torch.Tensor]:
        return self.encode_prepared(self.prepare_texts(texts, "query"), "query")             # B x (H,)

    def score_encoded(self, query: torch.Tensor, documents: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat(documents) @ query                                                  # (n, H) @ (H,) = cos

"""Keyword-attentive BERT (Miao, Cao & Tam; docs/models.md §4): a cross-encoder with an extra keyword-attentive
layer. The equation numbers are those of docs/models.md §4; the comments beside the code cite them.

    (1) x = "[CLS] A [SEP] B [SEP]"                 word pieces, longest-first truncation to max_length
        H = BERT layers 1..N-1 (x)                  (B, L, H)
    (2) main branch:    h_cls = pooler(layer_N(H))[CLS]                                (B, H)
    (3) M[i, j] = 1 iff (i in A and j in keywords(B)) or (i in B and j in keywords(A))  (B, L, L)
        (a side whose counterpart has no keyword attends to all of the counterpart's tokens)
    (4) keyword branch: K = layer_kw(H, M)          layer_kw starts as a copy of layer N  (B, L, H)
    (5) h_kw(A), h_kw(B) = mean of K over the tokens of A, of B                        (B, H) each
        k_diff = (h_kw(A) - h_kw(B)) ⊕ (h_kw(B) - h_kw(A))                            (B, 2H)
    (6) fusion="paper": z = W dropout(h_cls ⊕ h_kw(A) ⊕ h_kw(B) ⊕ k_diff) + b       (B, 5H) -> (B, 2)
        fusion="code":  z = W dropout(h_cls ⊕ tanh(V [h_kw(A); h_kw(B)])) + b       (B, 2H) -> (B, 2)
    (7) loss = CE(z, label); score = z_1 - z_0 (score="logit") or softmax(z)_1 ("prob")

Keywords of A and B are the words of a diff-idf dictionary (`dict=NAME|FILE`, pipeline/retrieve/keyword_dictionary.py)
found in each text; A's come from the topic instead when a `keywords()` stage ran before the reranker. Which word
pieces are keyword pieces is decided in inputs.py beside this file (the config in config.py). With neither a dictionary nor topic
keywords every side falls back to attending to its whole counterpart.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from pipeline.errors import ConfigError
from pipeline.rerank.bert import BertBackbone, cls_forward, cls_pool, mean_pool
from pipeline.rerank.layers import fp32_head
from pipeline.rerank.model import RerankModel
from pipeline.rerank.models.monobert import TwoClassOutput
from pipeline.rerank.models.kwbert.config import KeywordBERTConfig
from pipeline.rerank.models.kwbert.inputs import SIDE_A, SIDE_B, KeywordInputs


# -- the keyword attention mask, eq. (3) -------------------------------------------------------------------------------
def keyword_attention_mask(side: torch.Tensor, keyword: torch.Tensor) -> torch.Tensor:
    """(B, L) side ids and (B, L) 0/1 keyword flags -> (B, L, L) bool M of the keyword layer:
    M[i, j] = (i in A and j in kw(B)) or (i in B and j in kw(A)), eq. (3); kw(S) = all of S when S has no keyword.
    Rows outside A and B ([CLS], [SEP], padding: never pooled) attend to themselves only (no empty softmax row)."""
    in_a, in_b = side == SIDE_A, side == SIDE_B                                    # (B, L)
    kw_a, kw_b = in_a & (keyword > 0), in_b & (keyword > 0)                        # (B, L)
    kw_a = torch.where(kw_a.any(1, keepdim=True), kw_a, in_a)                      # fallback: all of A
    kw_b = torch.where(kw_b.any(1, keepdim=True), kw_b, in_b)                      # fallback: all of B
    mask = (in_a.unsqueeze(2) & kw_b.unsqueeze(1)) | (in_b.unsqueeze(2) & kw_a.unsqueeze(1))  # (B, L, L)
    own = torch.eye(side.shape[1], dtype=torch.bool, device=side.device).unsqueeze(0)         # (1, L, L)
    return mask | (own & ~(in_a | in_b).unsqueeze(2))


class KeywordBERT(KeywordInputs, TwoClassOutput, BertBackbone, RerankModel):
    name = "kwbert"
    config_class = KeywordBERTConfig
    training_defaults = {"optimizer": "adamw", "lr": 2e-5, "weight_decay": 0.01, "schedule": "linear",
                         "warmup": 0.1, "train_batch_size": 32, "max_grad_norm": 1.0}

    def __init__(self, config: KeywordBERTConfig, bert: nn.Module | None = None, tokenizer=None):
        super().__init__(config)
        self.attach_bert(bert, tokenizer)  # the config's BERT, pretrained, unless a checkpoint's is given
        if not getattr(self.tokenizer, "is_fast", False):
            raise ConfigError(f"kwbert: {config.bert} has no fast tokenizer (tokenizer.json): keyword pieces need "
                              "character offsets", field="bert")
        self.keyword_layer = copy.deepcopy(self.bert.encoder.layer[-1])  # [R]: initialised as a copy of layer N
        hidden = self.bert.config.hidden_size
        self.dropout = nn.Dropout(config.dropout)
        if config.fusion == "code":
            self.keyword_fusion = nn.Linear(2 * hidden, hidden)
        self.classifier = nn.Linear((2 if config.fusion == "code" else 5) * hidden, 2)
        self._extractor = None

    @classmethod
    def uses_pooler(cls, config: KeywordBERTConfig) -> bool:
        return True  # the main branch: h(CLS) through the pooler [C]

    # -- inputs: keywords, word pieces, their sides and flags (prepare): KeywordInputs, inputs.py --------

    # -- the model -----------------------------------------------------------------------------------------------
    def keyword_branch(self, hidden: torch.Tensor, side: torch.Tensor, keyword: torch.Tensor) -> torch.Tensor:
        """(B, L, H) H^(N-1) -> (B, L, H) outputs of the keyword-attentive layer under the mask M: eq. (4)."""
        allowed = keyword_attention_mask(side, keyword)                                 # (B, L, L)
        additive = torch.zeros(allowed.shape, dtype=hidden.dtype, device=hidden.device)
        additive = additive.masked_fill(~allowed, torch.finfo(hidden.dtype).min).unsqueeze(1)  # (B, 1, L, L)
        return self.keyword_layer(hidden, attention_mask=additive)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, attention_mask: torch.Tensor,
                side: torch.Tensor, keyword: torch.Tensor) -> torch.Tensor:
        if self.training or not self.cls_only:
            out = self.bert(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                            output_hidden_states=True)
            h_cls, penultimate = cls_pool(out, "pooler"), out.hidden_states[-2]        # (B, H) (2), (B, L, H) (1)
        else:  # inference: layer N for [CLS] alone, the same numbers (bert.py cls_forward)
            cls, penultimate = cls_forward(self.bert, input_ids, token_type_ids, attention_mask)
            h_cls = self.bert.pooler(cls)                                              # (B, H) main branch (2)
        states = self.keyword_branch(penultimate, side, keyword)                       # (B, L, H)  K, (3)-(4)
        h_a, h_b = mean_pool(states, side == SIDE_A), mean_pool(states, side == SIDE_B)  # (B, H) each  (5)
        if self.config.fusion == "code":
            features = torch.cat([h_cls, torch.tanh(self.keyword_fusion(torch.cat([h_a, h_b], -1)))], -1)  # (B, 2H)
        else:
            features = torch.cat([h_cls, h_a, h_b, h_a - h_b, h_b - h_a], -1)            # (B, 5H)
        return fp32_head(self.classifier, self.dropout(features))                       # (B, 2)  z, (6), fp32

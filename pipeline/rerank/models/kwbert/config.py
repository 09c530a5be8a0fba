"""Keyword-attentive BERT's config: every option declared once (pipeline/declared.py). The network is in network.py,
the keyword inputs in inputs.py (docs/models.md §4)."""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.declared import check_declared, option
from pipeline.rerank.bert import DEFAULT_BERT


@dataclass
class KeywordBERTConfig:
    bert: str = option(DEFAULT_BERT, "a local BERT checkpoint folder, or all-MiniLM-L6-v2 (the package's folder)")
    bert_sha256: str = option("", "the sha256 of `bert`'s tensors, pinned: another backbone is refused (bert.py)")
    bert_recipe: str = option("", "or the recipe irpipe pretrain-mlm made it by, pinned (bert.py)")
    dict: str = option("", 'keyword dictionary (preset name or TSV); "": topic keywords for A only, none for B')
    language: str = option("", 'keyword matching; "": the dictionary\'s language (zh without one)',
                           choices=("", "zh", "en"))
    max_length: int = option(128, 'word pieces of "[CLS] A [SEP] B [SEP]" (the paper\'s 128)', at_least=5,
                             integer=True)
    fusion: str = option("paper", "paper: CLS + h_kw(A) + h_kw(B) + k_diff; code: CLS + tanh(Linear([h_kw(A); "
                         "h_kw(B)]))", choices=("paper", "code"))
    dropout: float = option(0.1, "on the classifier's input", at_least=0, below=1)
    score: str = option("logit", "logit: z_rel - z_nonrel; prob: P(relevant)", choices=("logit", "prob"))

    def check(self) -> None:
        check_declared("kwbert", self)

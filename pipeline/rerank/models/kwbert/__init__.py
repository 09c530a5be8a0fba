"""Keyword-attentive BERT (docs/models.md §4), a model with inputs of its own, as a package: `config.py` (every option
declared once), `inputs.py` (keywords, word pieces, their sides and flags) and `network.py` (the equations, in
order, and the model class). Imports run config <- inputs <- network: no circle."""
from pipeline.rerank.models.kwbert.config import KeywordBERTConfig
from pipeline.rerank.models.kwbert.network import KeywordBERT, keyword_attention_mask

__all__ = ["KeywordBERT", "KeywordBERTConfig", "keyword_attention_mask"]

"""HCAN (Rao et al., EMNLP 2019; docs/models.md §1), a model with inputs of its own, as a package: `config.py` (what the
network is, every option declared once), `inputs.py` (texts -> vocabularies, IDF tables, ids, trigrams) and
`network.py` (the equations, in order, and the model class). Imports run config <- inputs <- network: no circle."""
from pipeline.rerank.models.hcan.config import HCANConfig
from pipeline.rerank.models.hcan.network import HCAN

__all__ = ["HCAN", "HCANConfig"]

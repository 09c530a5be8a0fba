"""MRNN (docs/models.md §2), a model with inputs of its own, as a package: `config.py` (what the network is, every
option declared once), `inputs.py` (texts -> vocabularies or frozen BERT features, ids, the memories) and
`network.py` (the equations, in order, and the model class). Imports run config <- inputs <- network: no circle."""
from pipeline.rerank.models.mrnn.config import MRNNConfig
from pipeline.rerank.models.mrnn.network import MRNN

__all__ = ["MRNN", "MRNNConfig"]

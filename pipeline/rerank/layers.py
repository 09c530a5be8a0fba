"""Tensor pieces that several models' equations share."""
from __future__ import annotations

import torch


def masked_softmax(x: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    """Softmax over `dim` where `mask` (broadcastable, True = real) is False gets -inf, i.e. weight 0."""
    return torch.softmax(x.masked_fill(~mask, float("-inf")), dim=dim)

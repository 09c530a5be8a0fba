"""MRNN's layers, private to pipeline/rerank/models/mrnn.py (which has the model, its config and the equations,
MODELS.md §2): the densely connected n-gram blocks of eq. (1) and the duplex attention of eqs. (2)-(8). `c` is the
model's MRNNConfig."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pipeline.rerank.layers import masked_softmax


# -- multi-resolution feature maps: (B, L, w) + (B, L) mask -> G (B, N, L, s) -----------------------------------
class NgramBlock(nn.Module):
    """G_n = sc_n · POOL(PReLU(BN(Conv1d(UB_n)))), eq. (1); BN and PReLU see the real positions only."""

    def __init__(self, channels: int, filters: int, kernel: int, pooling: str):
        super().__init__()
        self.conv = nn.Conv1d(channels, filters, kernel, padding=kernel // 2)
        self.norm = nn.BatchNorm1d(filters)  # over the (R, s) rows of real positions: a masked BatchNorm
        self.act = nn.PReLU(filters)
        self.scale = nn.Parameter(torch.ones(()))  # sc_n, init 1
        self.pool = kernel if pooling == "max" else 0

    def forward(self, ub: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.conv(ub.transpose(1, 2)).transpose(1, 2)                 # (B, L, s); padding of ub is zero
        g = torch.zeros_like(h)
        g[mask] = self.act(self.norm(h[mask]))                             # (R, s) real positions only
        if self.pool:                                                      # stride-1 max over ws positions
            g = F.max_pool1d(g.masked_fill(~mask[..., None], float("-inf")).transpose(1, 2), self.pool, 1,
                             self.pool // 2).transpose(1, 2)
        return self.scale * g.masked_fill(~mask[..., None], 0.0)           # (B, L, s), padding zero


class DenselyConnectedBlocks(nn.Module):
    """Block 1: kernel 1 on the embeddings (w -> s); block n: kernel ws on [G_1; ..; G_{n-1}] ((n-1)s -> s)."""

    def __init__(self, width: int, c):
        super().__init__()
        self.blocks = nn.ModuleList(NgramBlock(width if n == 1 else (n - 1) * c.filters, c.filters,
                                               1 if n == 1 else c.window, c.pooling) for n in range(1, c.blocks + 1))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        maps = [self.blocks[0](x * mask[..., None], mask)]                # G_1 (B, L, s)
        for block in self.blocks[1:]:
            maps.append(block(torch.cat(maps, -1), mask))                  # G_n from UB_n (B, L, (n-1)s)
        return torch.stack(maps, 1)                                        # G (B, N, L, s)


# -- the duplex attention ----------------------------------------------------------------------------------------
class MultiResolutionAttention(nn.Module):
    """Eqs. (2)-(4): per position, a softmax over the N resolutions of their feature sums; shared by Q and D."""

    def __init__(self, c):
        super().__init__()
        self.mean = c.summary == "mean"
        self.conductor = nn.Sequential(nn.Linear(c.blocks, c.blocks), nn.PReLU())

    def forward(self, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """G (B, N, L, s) -> MRA (B, L, s) and the weights aw (B, L, N)."""
        t = (g.mean(-1) if self.mean else g.sum(-1)).transpose(1, 2)      # (B, L, N)  T, eq. (2)
        aw = torch.softmax(self.conductor(t), -1)                          # (B, L, N)  eq. (3)
        return torch.einsum("bln,bnls->bls", aw, g), aw                    # (B, L, s)  eq. (4)


class DocumentAwareQueryAttention(nn.Module):
    """Eqs. (5)-(8) on query and document MRA with broadcastable leading dims (...): each pair, or (U, 1) queries
    against (1, B) documents for in-batch mining."""

    def __init__(self, c):
        super().__init__()
        self.length = c.max_doc_length if c.doc_attention == "fixed" else 0
        self.fc = nn.Linear(self.length, self.length) if self.length else nn.Linear(1, 1)
        if c.attention_init == "identity":                                 # start as plain dot-product attention
            nn.init.eye_(self.fc.weight)
            nn.init.zeros_(self.fc.bias)
        self.act = nn.PReLU()
        # e_ij = γ (α mra_q,i · d_j - β ‖d_j‖²): dot (paper) α = 1, β = 0, γ = 1; scaled γ = 1/√s; distance [R]
        # α = 2, β = 1, γ = 1/√s, i.e. (‖q_i‖² - ‖q_i - d_j‖²)/√s: the attention ranks positions by the distance of (8)
        self.alpha, self.beta = (2.0, 1.0) if c.attention_logits == "distance" else (1.0, 0.0)
        self.gamma = 1.0 if c.attention_logits == "dot" else c.filters ** -0.5

    def similarity(self, q, d) -> torch.Tensor:
        """q (..., n, s), d (..., m, s) -> e (..., n, m), eq. (5)."""
        e = q @ d.transpose(-1, -2)
        if self.beta:
            e = self.alpha * e - self.beta * d.pow(2).sum(-1).unsqueeze(-2)
        return e * self.gamma if self.gamma != 1.0 else e

    def forward(self, q, q_mask, d, d_mask) -> tuple[torch.Tensor, torch.Tensor]:
        """q (..., n, s), q_mask (..., n), d (..., m, s), d_mask (..., m) -> dist (...) and aw' (..., n, m)."""
        m = d.size(-2)
        e = self.similarity(q, d)                                          # (..., n, m)  e_i = MRA_d mra_q,i, (5)
        if self.length:                                                    # FC over the padded document axis
            logits = self.fc(F.pad(e, (0, self.length - m)))[..., :m]      # (..., n, m)
        else:                                                              # a e_ij + b, per position
            logits = self.fc(e.unsqueeze(-1)).squeeze(-1)                  # (..., n, m)
        aw = masked_softmax(self.act(logits), d_mask.unsqueeze(-2), -1)   # (..., n, m)  real j only, (6)
        sae = aw @ d                                                       # (..., n, s)  (7)
        return self.distance(sae, q, q_mask), aw

    @staticmethod
    def distance(sae, q, q_mask) -> torch.Tensor:
        qe = ((sae - q) ** 2).sum(-1).add(1e-12).sqrt()                    # (..., n)     ‖sae_i - mra_q,i‖ (8)
        return (qe * q_mask).sum(-1)                                       # (...)        Σ over real i

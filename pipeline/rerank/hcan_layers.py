"""HCAN's layers (MODELS.md §1), in the order the model uses them: the encoders that turn embeddings into levels
0..N, relevance matching (no parameters) and semantic matching (co-attention + BiLSTM). The model that joins them
is pipeline/rerank/models/hcan.py; the configuration fields read here are HCANConfig's.

Shapes: B pairs, n query tokens, m candidate tokens, E embedding width, F filters.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from pipeline.rerank.hcan_config import HCANConfig


def masked_softmax(x: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    """Softmax over `dim` where `mask` (broadcastable, True = real) is False gets -inf, i.e. weight 0."""
    return torch.softmax(x.masked_fill(~mask, float("-inf")), dim=dim)


def run_lstm(lstm: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor):
    """A batch-first (Bi)LSTM over the real steps only: (B, T, 2h) outputs, zero at padding, and h_n."""
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, (h_n, _) = lstm(packed)
    return pad_packed_sequence(out, batch_first=True, total_length=x.size(1))[0], h_n  # h_n in input order


# -- encoders: (B, T, E) embeddings + (B, T) mask -> [level 0 (B, T, E), level 1..N (B, T, F)] -------------------
class DeepEncoder(nn.Module):
    """Level l = Dropout(ReLU(Conv1d(level l-1, F, k))), 'same' padding 0 left / k-1 right: (l+1)-grams for k=2."""

    def __init__(self, c: HCANConfig, dim: int):
        super().__init__()
        self.stacked, self.pads = True, [c.kernel - 1] * c.levels
        self.convs = nn.ModuleList(nn.Conv1d(dim if l == 0 else c.filters, c.filters, c.kernel) for l in range(c.levels))
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> list[torch.Tensor]:
        levels, keep = [x], mask.unsqueeze(-1)
        for pad, conv in zip(self.pads, self.convs):
            h = conv(F.pad((levels[-1] if self.stacked else x).transpose(1, 2), (0, pad)))  # (B, F, T)
            levels.append(self.dropout(F.relu(h)).transpose(1, 2) * keep)  # (B, T, F), padding back to zero
        return levels


class WideEncoder(DeepEncoder):
    """Level l = one conv on the embeddings with kernel k+l-1 (2, 3, 4, 5): also (l+1)-grams for k=2."""

    def __init__(self, c: HCANConfig, dim: int):
        super().__init__(c, dim)
        self.stacked, self.pads = False, [c.kernel + l - 2 for l in range(1, c.levels + 1)]
        self.convs = nn.ModuleList(nn.Conv1d(dim, c.filters, c.kernel + l - 1) for l in range(1, c.levels + 1))


class ContextualEncoder(nn.Module):
    """Level l = BiLSTM(level l-1), F/2 units per direction (stacked)."""

    def __init__(self, c: HCANConfig, dim: int):
        super().__init__()
        self.lstms = nn.ModuleList(nn.LSTM(dim if l == 0 else c.filters, c.filters // 2, batch_first=True,
                                           bidirectional=True) for l in range(c.levels))
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> list[torch.Tensor]:
        levels = [x]
        for lstm in self.lstms:
            levels.append(self.dropout(run_lstm(lstm, levels[-1], lengths)[0]))  # (B, T, F), zero at padding
        return levels


ENCODERS = {"deep": DeepEncoder, "wide": WideEncoder, "contextual": ContextualEncoder}


# -- relevance matching (no parameters) -------------------------------------------------------------------------
def relevance_matching(uq, uc, qmask, cmask, weights, c: HCANConfig, length: int | None = None) -> torch.Tensor:
    """(B, n, *) x (B, m, *) -> (B, 2L) [max; mean] over the candidate axis times the query positions' `weights`
    (B, n) (IDF; code mode: (B, L) max only), each zero-padded to L = `length` (default max_query_length)."""
    length = length or c.max_query_length
    if c.rm_similarity == "cosine":
        uq, uc = F.normalize(uq, dim=-1), F.normalize(uc, dim=-1)
    s = uq @ uc.transpose(1, 2)                                            # (B, n, m)  S = U_q U_c^T
    rows, cols = qmask.unsqueeze(2), cmask.unsqueeze(1)
    if c.rm_softmax == "query":
        s = masked_softmax(s, rows, 1)
    elif c.rm_softmax == "context":
        s = masked_softmax(s, cols, 2)
    elif c.rm_softmax == "padded":
        s = padded_query_softmax(s, rows, length)
    features = [s.masked_fill(~cols, float("-inf")).amax(2) * weights]    # (B, n)  Max, times the weights
    if c.rm_mode == "paper":
        features.append((s * cols).sum(2) / cols.sum(2) * weights)        # (B, n)  Mean over real columns
    return torch.cat([F.pad(f, (0, length - f.size(1))) for f in features], 1)  # (B, 2L): fixed width


def padded_query_softmax(s: torch.Tensor, rows: torch.Tensor, length: int) -> torch.Tensor:
    """Softmax of (B, n, m) S over the query axis as if each query had `length` rows, the missing ones with logit 0
    (the code's unmasked padding): a candidate word near no query word then weighs little on every query row."""
    top = s.masked_fill(~rows, float("-inf")).amax(1, keepdim=True).clamp(min=0)  # (B, 1, m)  for stability
    e = torch.exp(s - top) * rows                                           # (B, n, m)  real rows only
    missing = (length - rows.sum(1, keepdim=True)).clamp(min=0)            # (B, 1, 1)  zero-logit rows
    return e / (e.sum(1, keepdim=True) + missing * torch.exp(-top))


# -- semantic matching -------------------------------------------------------------------------------------------
class CoAttention(nn.Module):
    """A = REP(U_q w_q) + REP(U_c w_c) + U_q W_b U_c^T; Ũ_q = A^T U_q; Ũ_c BiDAF-style; H (B, m, 4F)."""

    def __init__(self, f: int):
        super().__init__()
        self.w_q = nn.Linear(f, 1, bias=False)
        self.w_c = nn.Linear(f, 1, bias=False)
        self.w_b = nn.Parameter(nn.init.xavier_uniform_(torch.empty(f, f)))

    def forward(self, uq, uc, qmask, cmask) -> torch.Tensor:
        a_raw = self.w_q(uq) + self.w_c(uc).transpose(1, 2) + uq @ self.w_b @ uc.transpose(1, 2)  # (B, n, m)
        rows = qmask.unsqueeze(2)
        a = masked_softmax(a_raw, rows, 1)                                 # (B, n, m)  softmax over the query axis
        uq_att = a.transpose(1, 2) @ uq                                    # (B, m, F)  Ũ_q = A^T U_q, a real transpose
        b = masked_softmax(a_raw.masked_fill(~rows, float("-inf")).amax(1), cmask, 1)  # (B, m)  softmax_m(max_n A)
        uc_att = (b.unsqueeze(1) @ uc).expand_as(uc)                       # (B, m, F)  Ũ_c = REP(b U_c)
        return torch.cat([uc, uq_att, uc * uq_att, uc_att * uq_att], 2)   # (B, m, 4F)  H


class SemanticMatching(nn.Module):
    """O_SM = BiLSTM(H): the last real hidden state of each direction (B, d); code mode: max + mean (B, 2d)."""

    def __init__(self, c: HCANConfig):
        super().__init__()
        self.code = c.sm_mode == "code"
        self.coattention = CoAttention(c.filters)
        self.lstm = nn.LSTM(4 * c.filters, c.sm_hidden // 2, batch_first=True, bidirectional=True)

    def forward(self, uq, uc, qmask, cmask, lengths) -> torch.Tensor:
        h = self.coattention(uq, uc, qmask, cmask)                         # (B, m, 4F)
        out, h_n = run_lstm(self.lstm, F.relu(h) if self.code else h, lengths)  # (B, m, d), (2, B, d/2)
        if not self.code:
            return torch.cat([h_n[0], h_n[1]], 1)                          # (B, d)  forward end, backward start
        keep = cmask.unsqueeze(2)
        top = out.masked_fill(~keep, float("-inf")).amax(1)                # (B, d)
        return torch.cat([top, out.sum(1) / keep.sum(1)], 1)               # (B, 2d)

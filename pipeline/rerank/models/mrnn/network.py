"""MRNN: Multi-Resolution Neural Network with duplex attention (Cakaloglu & Xu), as read in docs/models.md §2.

No public code exists; [R] marks our resolutions (docs/models.md §2). Query and document share every layer. The
network is all in this file, in this order; how texts become ids, and the memories of frozen BERT features and of
each text's MRA in evaluation, are in inputs.py beside it.

    E = embed(text)                                    (L, w)   static word table, or frozen BERT token features
    G_n = sc_n · POOL(PReLU(BN(Conv1d(UB_n))))         (L, s)   (1) UB_1 = E (kernel 1); UB_n = [G_1; ..; G_{n-1}]
                                                                    (kernel ws = 3): block n sees a (2n-1)-gram
    G = stack(G_1..G_N)                                (N, L, s)
    T_i[n] = mean_j G[n, i, j]                         (L, N)   (2) "transformer": feature mean [R] (paper: sum)
    aw_i = softmax_N(PReLU(W T_i + b))                 (L, N)   (3) "conductor"
    MRA_i = Σ_n aw_i[n] G[n, i, :]                     (L, s)   (4) multi-resolution n-gram attention
    e_i = MRA_d · mra_q,i                              (m,)     (5) document-aware query attention, per query;
                                                                    attention_logits=distance (default) [R]:
                                                                    e_ij = (‖q_i‖² - ‖q_i - d_j‖²)/√s (eval/MRNN.md)
    aw'_i = softmax_{j real}(PReLU(FC(e_i)))           (m,)     (6) FC over a fixed padded length L_d [R], or a
                                                                    per-position scalar affine map (length-free [R]);
                                                                    FC starts as the identity [R] (attention_init)
    sae_i = Σ_j aw'_ij mra_d,j                         (s,)     (7)
    qe_i = ‖sae_i − mra_q,i‖₂,  dist = Σ_{i real} w_i qe_i      (8) ranking score = −dist; w_i = 1 (paper), or
                                                                    query_weights=idf [R]: the question word's
                                                                    normalised IDF over the training texts

Training: triplet margin loss with batch-hard mining [dist(Q, D+) − dist(Q, D−) + m]₊: for each question of the
batch its hardest positive (largest distance) against its hardest negative (smallest), where the negatives are the
other questions' positives in the batch and, with `own_negatives=True` [R], the question's own labelled negatives.
Adam lr 1e-2 [R] (paper 1e-4; see training_defaults), weight decay 1e-3 (as L2). `loss=listwise` [R]: each
positive's softmax cross-entropy of −dist against all the negatives the triplet loss mines (eval/MRNN.md 2.11).

Resolutions beyond docs/models.md §2: queries and documents of a batch pass the feature maps together (one set of
BatchNorm statistics, as at evaluation); inputs optionally IDF-scaled (idf_inputs). In evaluation a text's MRA
depends on that text alone, so each distinct text's is computed once (`remembered`, inputs.py): reranking a
query's top 100 costs the pair attention of eqs. (5)-(8), not 100 passes of the feature maps.
`init=identity` [R] starts the network as its inputs' own nearest-word distance (`start_as_identity`): on frozen
contextual features that ranks better untrained than PyTorch's initialisation does trained (eval/MRNN.md 2.7).
Two defaults depart from the paper because they stopped training (measured by bench/mrnn_dynamics.py):
the feature sum T of eq. (2) is ~0.3 s after BN + PReLU, so eq. (3) is one-hot from the start and its FC gets no
gradient (summary=mean keeps it soft); and Adam at lr 1e-4 moves no parameter by more than 1e-4 a step.

Shapes: B pairs, U distinct queries of the batch, n query / m document positions, w input width, s filters,
N blocks. Padding is zero and masked everywhere (BatchNorm statistics over real positions only, -inf in softmax and
max-pooling, zero before every convolution): appending padding does not change a distance (tests/rerank/test_mrnn.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pipeline.errors import ConfigError
from pipeline.rerank.layers import masked_softmax
from pipeline.rerank.losses import hardest_triplets, softmax_over_negatives
from pipeline.rerank.memo import TextMemo
from pipeline.rerank.model import Batch, Loss, RerankModel
from pipeline.rerank.models.mrnn.config import CONTEXTUAL, MRNNConfig
from pipeline.rerank.models.mrnn.inputs import MRNNInputs
from pipeline.rerank.text import Vocabulary

IDENTITY_SHARPNESS = 9.0   # init=identity: the attention FC of eq. (6) starts as this x I (eval/MRNN.md section 2.7)

# -- multi-resolution feature maps, eq. (1): (B, L, w) + (B, L) mask -> G (B, N, L, s) ---------------------------------
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

    def __init__(self, width: int, c: MRNNConfig):
        super().__init__()
        self.blocks = nn.ModuleList(NgramBlock(width if n == 1 else (n - 1) * c.filters, c.filters,
                                               1 if n == 1 else c.window, c.pooling) for n in range(1, c.blocks + 1))

    @torch.no_grad()
    def start_as_identity(self, gain: float = 1.0) -> None:
        """G_1 = gain P E with P (s, w) orthonormal rows scaled by sqrt(w / s) (s >= w: the identity on the first w
        features), so distances between inputs are kept (exactly, or in expectation); G_n = 0 for n > 1 (sc_n = 0:
        their gradient reaches sc_n first)."""
        first = self.blocks[0]
        filters, width = first.conv.weight.shape[:2]
        if filters >= width:
            projection = torch.eye(filters, width)
        else:
            projection = torch.linalg.qr(torch.randn(width, filters))[0].T * (width / filters) ** 0.5
        first.conv.weight.copy_(gain * projection[..., None])
        first.conv.bias.zero_()
        for block in self.blocks:
            block.act.weight.fill_(1.0)
        for block in self.blocks[1:]:
            block.scale.zero_()

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        maps = [self.blocks[0](x * mask[..., None], mask)]                # G_1 (B, L, s)
        for block in self.blocks[1:]:
            maps.append(block(torch.cat(maps, -1), mask))                  # G_n from UB_n (B, L, (n-1)s)
        return torch.stack(maps, 1)                                        # G (B, N, L, s)


# -- the duplex attention, eqs. (2)-(8) --------------------------------------------------------------------------------
class MultiResolutionAttention(nn.Module):
    """Eqs. (2)-(4): per position, a softmax over the N resolutions of their feature sums; shared by Q and D."""

    def __init__(self, c: MRNNConfig):
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

    def __init__(self, c: MRNNConfig):
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


@dataclass
class MRNNOutput:
    """The forward pass: each pair's distance, and what the loss needs to compare every query with every document."""

    distance: torch.Tensor     # (B,)  dist(q_b, d_b), eq. (8)
    queries: torch.Tensor      # (U, n, s) MRA of the batch's distinct queries
    query_mask: torch.Tensor   # (U, n)  w_i of eq. (8) on real positions, 0 elsewhere
    docs: torch.Tensor         # (B, m, s) MRA of each pair's document
    doc_mask: torch.Tensor     # (B, m)
    query_index: torch.Tensor  # (B,) row of `queries` of each pair


# -- the model ---------------------------------------------------------------------------------------------------------
class MRNN(MRNNInputs, RerankModel):
    name = "mrnn"
    config_class = MRNNConfig
    # lr 1e-2 [R] (paper 1e-4): Adam moves a parameter by ~lr a step, and at 27-33 steps an epoch (WikiQA) 1e-4 held
    # sc_n, BN, PReLU and the attention FC within +-0.003 an epoch. Best WikiQA dev AP (summary=mean, own negatives,
    # s = 128, seed 0): lr 1e-4 0.571 (epoch 1 of 3), 1e-3 0.624 (3 of 8), 3e-3 0.662 (5 of 8), 1e-2 0.666 (6 of 6)
    training_defaults = {"optimizer": "adam", "lr": 1e-2, "weight_decay": 1e-3, "schedule": "constant",
                         "train_batch_size": 32, "negatives_per_positive": 8, "epochs": 10, "max_grad_norm": None,
                         "measure": "AP"}

    def __init__(self, config: MRNNConfig, vocab: Vocabulary | None = None, embeddings: np.ndarray | None = None,
                 bert=None, tokenizer=None):
        super().__init__(config)
        c = config
        c.check()
        self.vocab, self.bert, self.tokenizer = vocab, bert, tokenizer
        if c.embeddings == CONTEXTUAL:                                     # E: frozen BERT features (inputs.py)
            width = self.attach_frozen_bert()
        else:                                                              # E: a static word table (vocab, w)
            width = embeddings.shape[1] if embeddings is not None else c.embedding_dim
            if vocab is None or not width:
                raise ConfigError("mrnn: build the model with MRNN.from_training_data (vocabulary, embeddings)")
            self.embedding = nn.Embedding(len(vocab), width, padding_idx=0)
            if embeddings is not None:
                self.embedding.weight.data.copy_(torch.from_numpy(embeddings))
            self.embedding.weight.requires_grad_(not c.freeze_embeddings)
        if c.keeps_idf():                                                  # weights of the input ids (state_dict)
            self.register_buffer("input_idf", torch.ones(len(self.tokenizer) if self.bert is not None else len(vocab)))
        self._mra = TextMemo()                                            # id row -> MRA (L, s), evaluation only
        self.feature_maps = DenselyConnectedBlocks(width, c)              # (1)      G (K, N, L, s)
        self.resolution_attention = MultiResolutionAttention(c)            # (2)-(4)  MRA (K, L, s)
        self.query_attention = DocumentAwareQueryAttention(c)              # (5)-(8)  dist (B,)
        if c.init == "identity":
            self.start_as_identity()

    @torch.no_grad()
    def start_as_identity(self) -> None:
        """init=identity: MRA_i = P e_i (G_1 = N P e_i under a uniform conductor, the other blocks off) and the
        attention of eq. (6) sharpened to IDENTITY_SHARPNESS x eq. (5)'s logits with its PReLU linear, so that
        -dist ~ -sum_i min_j ||P e_q,i - P e_d,j||: the ranking of the inputs' own nearest-word distance."""
        self.feature_maps.start_as_identity(gain=self.config.blocks)
        conductor, conductor_act = self.resolution_attention.conductor
        conductor.weight.zero_()
        conductor.bias.zero_()
        conductor_act.weight.fill_(1.0)
        self.query_attention.fc.weight.mul_(IDENTITY_SHARPNESS)
        self.query_attention.act.weight.fill_(1.0)

    # -- building, saving, inputs and memories: MRNNInputs (inputs.py) -------------------------------------------
    # from_training_data, save_assets, load_assets, train (forgets the memory of MRAs), prepare, plan_batches,
    # token_features (frozen BERT, once per text), remembered (a text's MRA in evaluation, once per text)

    # -- the network ---------------------------------------------------------------------------------------------------
    def embed(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L) ids -> E (B, L, w) and the mask of real positions (B, L) (contextual: [CLS]/[SEP] masked out)."""
        mask = self.real_positions(ids)
        x = self.embedding(ids) if self.bert is None else self.token_features(ids) * mask[..., None]
        return (x * self.input_idf[ids][..., None] if self.config.idf_inputs else x), mask

    def multi_resolution(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(K, L) ids -> MRA (K, L, s) and the mask of real positions (K, L): eqs. (1)-(4)."""
        x, mask = self.embed(ids)                                          # E (K, L, w)
        mra, _ = self.resolution_attention(self.feature_maps(x, mask))    # G (K, N, L, s) -> MRA (K, L, s)
        return mra, mask

    def represent(self, query_ids: torch.Tensor, doc_ids: torch.Tensor):
        """(U, n) query and (B, m) document ids -> MRA (U, n, s), (B, m, s) and their masks: eqs. (1)-(4); the query's
        mask holds the weights w_i of eq. (8) (1 on real positions unless query_weights=idf).
        One pass over queries and documents together: BatchNorm's batch statistics (training) are those of both
        texts, as its running statistics (evaluation) are."""
        (n, m), width = (query_ids.size(1), doc_ids.size(1)), max(query_ids.size(1), doc_ids.size(1))
        pad = self.pad_id()
        ids = torch.cat([F.pad(query_ids, (0, width - n), value=pad), F.pad(doc_ids, (0, width - m), value=pad)])
        evaluating = not self.training and not torch.is_grad_enabled()
        mra, mask = (self.remembered if evaluating else self.multi_resolution)(ids)            # (U + B, L, s)
        queries, docs = mra.split([len(query_ids), len(doc_ids)])
        query_mask, doc_mask = mask.split([len(query_ids), len(doc_ids)])
        query_mask = query_mask[:, :n]
        if self.config.query_weights == "idf":                             # w_i of eq. (8): 0 on padding
            query_mask = query_mask * self.input_idf[query_ids]                # (U, n)
        return queries[:, :n], query_mask, docs[:, :m], doc_mask[:, :m]

    def forward(self, query_ids: torch.Tensor, doc_ids: torch.Tensor, query_index: torch.Tensor) -> MRNNOutput:
        """(U, n) distinct queries, (B, m) documents, (B,) query row of each pair -> distances and representations."""
        queries, query_mask, docs, doc_mask = self.represent(query_ids, doc_ids)   # (U, n, s), (B, m, s) + masks
        distance, _ = self.query_attention(queries[query_index], query_mask[query_index], docs, doc_mask)  # (B,)
        return MRNNOutput(distance, queries, query_mask, docs, doc_mask, query_index)

    @classmethod
    def start_parameters(cls, config: MRNNConfig) -> tuple[str, ...]:
        """init=identity: block 1's projection and the sharpened attention make the start's distance."""
        return ("feature_maps.blocks.0.", "query_attention.") if config.init == "identity" else ()

    def score(self, output: MRNNOutput) -> torch.Tensor:
        return -output.distance

    # -- training: batch-hard triplets ---------------------------------------------------------------------------------
    def batch_sampling(self) -> str:
        """Own negatives: whole questions (positives + sampled negatives); else one positive per row."""
        return "queries" if self.config.own_negatives else "positives"

    def all_distances(self, output: MRNNOutput, columns: torch.Tensor | None = None) -> torch.Tensor:
        """(U, B): every distinct query of the batch against every document of the batch (or (U, C): against the
        documents `columns` (C,) only)."""
        docs, doc_mask = (output.docs, output.doc_mask) if columns is None else \
            (output.docs[columns], output.doc_mask[columns])
        distances, _ = self.query_attention(output.queries.unsqueeze(1), output.query_mask.unsqueeze(1),
                                            docs.unsqueeze(0), doc_mask.unsqueeze(0))
        return distances

    def triplet_masks(self, output: MRNNOutput, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(U, B) masks of each distinct query's positives and negatives among the batch's documents."""
        owner = output.query_index.unsqueeze(0) == torch.arange(len(output.queries), device=batch.labels.device)[:, None]
        relevant = (batch.labels > 0).unsqueeze(0)                        # (1, B)
        docids = [p.docid for p in batch.pairs]
        own_docids = [set() for _ in range(len(output.queries))]
        for row, docid in zip(output.query_index.tolist(), docids):
            own_docids[row].add(docid)
        also_own = torch.tensor([[d in mine for d in docids] for mine in own_docids], device=owner.device)  # (U, B)
        positive = owner & relevant                                        # (U, B)
        negative = ~owner & ~also_own & relevant                           # other questions' positives
        if self.config.own_negatives:
            negative |= owner & ~relevant                                  # the question's own labelled negatives
        return positive, negative

    def loss(self, output: MRNNOutput, batch: Batch) -> Loss:
        """Batch-hard triplet loss: per query, hardest positive against hardest negative (see the docstring); or
        (loss=listwise) each positive's softmax against all the query's negatives."""
        positive, negative = self.triplet_masks(output, batch)                # (U, B)
        mined = (positive | negative).any(0).nonzero().flatten()           # (C,) documents some query mines: the
        # rest (a dev query's unlabelled candidates) would cost U x B attentions for nothing
        distances = self.all_distances(output, mined)                       # (U, C)
        if self.config.loss == "listwise":
            listwise = softmax_over_negatives(-distances, positive[:, mined], negative[:, mined])
            return Loss(listwise, {"listwise": listwise})
        triplet = hardest_triplets(distances, positive[:, mined], negative[:, mined], self.config.margin)
        return Loss(triplet, {"triplet": triplet})

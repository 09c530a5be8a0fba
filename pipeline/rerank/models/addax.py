"""ADDAX: adaptive feature discrimination and denoising for late-interaction reranking (Li, Li & Guo, COLING 2022),
as docs/models.md §3 reads the paper ([R] marks our resolutions; no public code exists).

Encoder. One shared BERT encodes "[CLS] q [SEP]" and "[CLS] d [SEP]" apart; every non-padding word piece is kept
(the specials too [R]): U_Q (l, d) and V_D (t, d), l <= L_Q, t <= L_D. The document side never sees the query, so
V_D is what `irpipe encode` stores; only the per-pair head below runs at rerank time.

MAGS, matching-adapted gating cells (query side; the document side is the same with S' = S^T, its own parameters):
    (1)  S = U_Q V_D^T                        (l, t)   padded columns masked (-inf in the softmax, 0 elsewhere)
    (2)  R_Q = softmax_row(S) V_D             (l, d)   attention reference;  D_Q = U_Q - R_Q  divergence
    (3)  E = sigma(S W1 + b1)                 (l, d)   W1 in R^{L_D x d}: S zero-padded to the fixed L_D columns
    (4)  F_r = R_Q * E;  F_d = D_Q * (1 - E)  (l, d)   element gates
    (5)  p_i = sigma(S_i w1 + b1')            (l,)     row gate, w1 in R^{L_D}
    (6)  F_i = [p_i F_r,i ; (1 - p_i) F_d,i]  (l, 2d)
    (7)  highway: p~ = ReLU(W3 F + b3), g = sigma(W4 F + b4), x = (1 - g) * F + g * p~;  h = W5 x + b5  (l, d)
Hashing denoiser (document side):
    (8)  B = tanh(W_c ReLU(W_b tanh(W_a H_D)))   (t, h)  d -> 512 -> 512 -> h;  codes B_D = tanh(alpha B)
    (9)  L1 = ||B_D - sgn(B)||_F^2;  H_D^r = decoder(B_D) (mirror, untied, last layer linear);  L2 = ||H_D^r - H_D||_F^2
    (10) query side: H_Q <- tanh(W_q H_Q + b_q)  (l, h)
Score (ColBERT MaxSim):
    (11) f(Q, D) = sum_{i real} max_{j real} cos(h^Q_i, b^D_j)  in [-l, l];  codes tanh(alpha B) or sgn(B) (`codes`)
Loss, per triplet (Q, D+, D-): [1 - f(Q, D+) + f(Q, D-)]_+ + delta (L1(D+) + L1(D-)) + gamma (L2(D+) + L2(D-)).

Ablations (`ablation`): no_mags (h = U_Q, V_D), no_highway (h = W5 F + b5), no_denoiser (no codes, no query
projection, MaxSim on the MAGS outputs), attention_only_mags (the gates (3)-(5) removed: F_i = [R_Q,i ; D_Q,i] [R]).
Default BERT: all-MiniLM-L6-v2 (a siamese sentence encoder: the right start); any local BERT folder by path.

The start and the pull of L2 [R] (the paper says neither), both the defaults. `init=identity` starts MAGS as the
identity (h = U_Q, V_D) and the denoiser as a sign projection shared with the query side (codes ~ sgn(G V_D), query
tanh(G U_Q)), so the untrained head ranks as MaxSim over the encoder's own token vectors (DL19: nDCG@10 0.65 against
0.17 for a random head; bench/addax_start.py). `reconstruction=detached` stops L2's gradient at its
target H_D: otherwise the summed ||H_D^r - H_D||^2 over the real BERT vectors that identity passes through outweighs
the hinge about 25 to 1 in the encoder's gradient and training spends itself on making H_D easy to rebuild. Trained,
the two together: WikiQA test AP 0.8138 +- 0.0103 against 0.7394 +- 0.0236 for the paper's reading, and above the
zero-shot biencoder on TREC DL both ways (eval/wikiqa-addax-identity.yaml, dl20-addax.yaml, dl19-addax.yaml).
The paper's reading (docs/models.md §3) is one option away: `init=random, reconstruction=live` (also the values
that checkpoints saved before these fields read as: pipeline/rerank/migrations.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pad_sequence

from pipeline.errors import ConfigError
from pipeline.rerank.bert import DEFAULT_BERT, BertBackbone, last_layer, single_inputs, single_lengths
from pipeline.declared import check_declared, option
from pipeline.rerank.model import Batch, LateInteraction, Loss, Pair, RerankModel
from pipeline.rerank.losses import pairwise_hinge

ABLATIONS = ("none", "no_mags", "no_highway", "no_denoiser", "attention_only_mags")


@dataclass
class ADDAXConfig:
    bert: str = option(DEFAULT_BERT, "a local BERT checkpoint folder, or all-MiniLM-L6-v2 (the package's folder)")
    max_query_length: int = option(32, 'L_Q: word pieces of "[CLS] q [SEP]"; W1\' has L_Q rows', at_least=3,
                                   integer=True)
    max_doc_length: int = option(128, 'L_D: word pieces of "[CLS] d [SEP]"; W1 has L_D rows (180 for MS MARCO)',
                                 at_least=3, integer=True)
    hash_bits: int = option(300, "h, code length", at_least=1, integer=True)
    hash_hidden: int = option(512, "the denoiser's hidden width", at_least=1, integer=True)
    code_sharpness: float = option(5.0, "alpha of the codes tanh(alpha B), eq. (8) (was `alpha`: migrations.RENAMED)",
                                   at_least=0)
    delta: float = option(1e-6, "weight of the sign loss L1", at_least=0)
    gamma: float = option(0.003, "weight of the reconstruction loss L2", at_least=0)
    margin: float = option(1.0, "triplet hinge margin", at_least=0)
    scaled: bool = option(False, "S / sqrt(d) [R]")
    dropout: float = option(0.1, "on the MAGS outputs h", at_least=0, below=1)
    codes: str = option("tanh", "scoring codes: tanh(alpha B) or sgn(B)", choices=("tanh", "sign"))
    ablation: str = option("none", "the paper's ablations", choices=ABLATIONS)
    reconstruction: str = option("detached", "L2's target H_D: detached [R] | live (the paper: gradients reach MAGS, "
                                 "BERT)", choices=("live", "detached"))
    init: str = option("identity", "new layers: identity [R] (start_as_identity) | random (the paper: PyTorch)",
                       choices=("random", "identity"))

    def check(self) -> None:
        check_declared("addax", self)


class MAGS(nn.Module):
    """Matching-adapted gating cells of one side, equations (1)-(7): own tokens X (n, l, d) against the other side's
    Y (n, t, d) with their masks; `other_length` = the fixed padded length of Y (L_D for the query side)."""

    def __init__(self, dims: int, other_length: int, gates: bool = True, highway: bool = True):
        super().__init__()
        self.gates, self.highway = gates, highway
        if gates:
            self.element_gate = nn.Linear(other_length, dims)        # (3) W1 (L_D x d), b1 (d,)
            self.row_gate = nn.Linear(other_length, 1)               # (5) w1 (L_D,), b1'
        if highway:
            self.transform = nn.Linear(2 * dims, 2 * dims)           # (7) W3, b3
            self.carry = nn.Linear(2 * dims, 2 * dims)               # (7) W4, b4
        self.out = nn.Linear(2 * dims, dims)                         # (7) W5, b5

    def forward(self, x, x_mask, y, y_mask, similarity):
        """x (n, l, d), y (n, t, d), masks (n, l) / (n, t) bool, similarity S (n, l, t) -> h (n, l, d), zeros at
        padded rows. After the attention, only the r real rows of x are computed on (padding costs nothing)."""
        attention = similarity.masked_fill(~y_mask.unsqueeze(1), float("-inf")).softmax(-1)   # (2) softmax_row(S)
        reference = (attention @ y)[x_mask]                                                  # (2) R (r, d)
        divergence = x[x_mask] - reference                                                   # (2) D (r, d)
        if self.gates:
            s = similarity.masked_fill(~y_mask.unsqueeze(1), 0.0)[x_mask]                    # (r, t) zeros at padding
            t = s.shape[-1]   # S zero-padded to the fixed length: S W1 = S[:, :t] W1[:t]
            gate = torch.sigmoid(F.linear(s, self.element_gate.weight[:, :t], self.element_gate.bias))  # (3) E (r, d)
            p = torch.sigmoid(F.linear(s, self.row_gate.weight[:, :t], self.row_gate.bias))             # (5) (r, 1)
            features = torch.cat([p * reference * gate, (1 - p) * divergence * (1 - gate)], -1)      # (4),(6) (r, 2d)
        else:
            features = torch.cat([reference, divergence], -1)                                      # attention only
        return scatter_rows(self._compose(features), x_mask)                                       # (7) (n, l, d)

    def _compose(self, f):
        """(7) on the real rows: F (r, 2d) -> h (r, d), the highway, then W5."""
        if self.highway:
            g = torch.sigmoid(self.carry(f))
            f = (1 - g) * f + g * torch.relu(self.transform(f))
        return self.out(f)

    @torch.no_grad()
    def start_as_identity(self, carry_bias: float = -4.0) -> None:
        """h = X at the start [R]: W1, w1 and their biases 0, so E = p = 1/2 and F = [R/4 ; D/4] ([R ; D] without
        gates); the highway carries F (W4 = 0, b4 = -4: g = sigma(-4) = 0.018); W5 = c [I I], b5 = 0 sums the halves:
        R + D = X. Every gate still gets a gradient (sigma'(0) = 1/4), so training moves away from the identity."""
        dims = self.out.out_features
        if self.gates:
            for layer in (self.element_gate, self.row_gate):
                layer.weight.zero_()
                layer.bias.zero_()
        if self.highway:
            self.carry.weight.zero_()
            self.carry.bias.fill_(carry_bias)
        eye = torch.eye(dims)
        self.out.weight.copy_((4.0 if self.gates else 1.0) * torch.cat([eye, eye], 1))
        self.out.bias.zero_()


class HashingDenoiser(nn.Module):
    """The locality-constrained hashing denoiser, equations (8)-(9): codes of the document's token vectors."""

    def __init__(self, dims: int, hidden: int, bits: int):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dims, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.ReLU(),
                                     nn.Linear(hidden, bits), nn.Tanh())              # (8) B (r, h)
        self.decoder = nn.Sequential(nn.Linear(bits, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.ReLU(),
                                     nn.Linear(hidden, dims))                         # (9) mirror, last layer linear

    @torch.no_grad()
    def start_as_sign_projection(self, query_projection: nn.Linear) -> None:
        """Codes that are signs of random projections (SimHash) at the start [R], the query side the same projection:
        with A (k, d) orthonormal rows, k = min(hidden/2, d), and P (h, k) Gaussian / sqrt(k),
            W_a = [A ; -A] (hidden, d)  -> tanh -> [t ; -t],  t = tanh(A x)
            W_b = I (hidden, hidden)    -> ReLU -> [relu(t) ; relu(-t)]
            W_c = [P, -P] (h, hidden)   -> tanh -> B = tanh(P t),  codes tanh(alpha B) ~ sgn(P A x)
            query side W_q = P A (h, d)        -> tanh(P A u)
        (biases 0; t ~ A x where the entries of A x are small, ~0.3 for MiniLM). E[(g.u) sgn(g.v)] grows with
        cos(u, v) for Gaussian g, so cos(query, code) keeps the order of the backbone's token similarities."""
        first, second, third = self.encoder[0], self.encoder[2], self.encoder[4]
        hidden, dims = first.weight.shape
        k = min(hidden // 2, dims)
        a = torch.linalg.qr(torch.randn(dims, k))[0].T                                  # (k, d) orthonormal rows
        p = torch.randn(third.weight.shape[0], k) / k ** 0.5                            # (h, k)
        for layer in (first, second, third, query_projection):
            layer.weight.zero_()
            layer.bias.zero_()
        first.weight[:k], first.weight[k:2 * k] = a, -a
        second.weight.copy_(torch.eye(hidden))
        third.weight[:, :k], third.weight[:, k:2 * k] = p, -p
        query_projection.weight.copy_(p @ a)


def scatter_rows(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The r real rows (r, k) back in place: (n, l, k), zeros at the padded rows of `mask` (n, l)."""
    return values.new_zeros(*mask.shape, values.shape[-1]).index_put_((mask,), values)


def on_rows(function, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`function` applied to the real rows of x (n, l, k) only (padding costs nothing); zeros at padding."""
    return scatter_rows(function(x[mask]), mask)


class ADDAX(LateInteraction, BertBackbone, RerankModel):
    name = "addax"
    config_class = ADDAXConfig
    sampling = "pairs"   # a positive and a negative of its query: one triplet
    training_defaults = {"optimizer": "adam", "lr": 1e-5, "weight_decay": 0.0, "train_batch_size": 32,
                         "schedule": "linear", "warmup": 0.1, "max_grad_norm": 1.0, "negatives_per_positive": 1}
    length_fields = ("max_query_length", "max_doc_length")   # word pieces, checked against the BERT's positions

    def __init__(self, config: ADDAXConfig, bert: nn.Module | None = None, tokenizer=None):
        super().__init__(config)
        self.attach_bert(bert, tokenizer)  # the config's BERT, pretrained, unless a checkpoint's is given
        d, ablation = self.bert.config.hidden_size, config.ablation
        if ablation != "no_mags":
            gates, highway = ablation != "attention_only_mags", ablation != "no_highway"
            self.query_mags = MAGS(d, config.max_doc_length, gates, highway)   # W1 in R^{L_D x d}
            self.doc_mags = MAGS(d, config.max_query_length, gates, highway)   # W1' in R^{L_Q x d}
        if ablation != "no_denoiser":
            self.denoiser = HashingDenoiser(d, config.hash_hidden, config.hash_bits)
            self.query_projection = nn.Linear(d, config.hash_bits)            # (10)
        self.dropout = nn.Dropout(config.dropout)
        if config.init == "identity":   # the new layers start as the backbone's own token matching [R]
            for mags in (getattr(self, "query_mags", None), getattr(self, "doc_mags", None)):
                if mags is not None:
                    mags.start_as_identity()
            if hasattr(self, "denoiser"):
                self.denoiser.start_as_sign_projection(self.query_projection)

    # -- inputs ------------------------------------------------------------------------------------------------
    def prepare(self, pairs: list[Pair]) -> Batch:
        """"[CLS] q [SEP]" cut to L_Q and "[CLS] d [SEP]" cut to L_D pieces, apart: (B, L) ids and masks."""
        q_ids, q_mask, q_cut = single_inputs(self.tokenizer, [p.query for p in pairs], self.config.max_query_length)
        d_ids, d_mask, d_cut = single_inputs(self.tokenizer, [p.text for p in pairs], self.config.max_doc_length)
        return Batch({"query_ids": q_ids, "query_mask": q_mask, "doc_ids": d_ids, "doc_mask": d_mask},
                     q_cut + d_cut, pairs)

    def input_lengths(self, pairs: list[Pair]) -> list[int]:
        queries, docs = ([p.query for p in pairs], [p.text for p in pairs])
        return [q + d for q, d in zip(self.text_lengths(queries, "query"), self.text_lengths(docs, "document"))]

    # -- the model -----------------------------------------------------------------------------------------------
    def encode(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, L) -> (B, L, d) BERT's last layer; the siamese encoder of both sides."""
        return last_layer(self.bert, ids, mask)

    def forward(self, query_ids, query_mask, doc_ids, doc_mask) -> dict[str, torch.Tensor]:
        return self.interact(self.encode(query_ids, query_mask), query_mask.bool(),
                             self.encode(doc_ids, doc_mask), doc_mask.bool(), losses=True)

    def interact(self, u, u_mask, v, v_mask, losses: bool = False) -> dict[str, torch.Tensor]:
        """The per-pair head: U_Q (n, l, d), V_D (n, t, d), masks (n, l) / (n, t) bool -> {"score": (n,)} and, with
        `losses`, the per-pair sign and reconstruction losses (n,) of the document."""
        if v.shape[1] > self.config.max_doc_length or u.shape[1] > self.config.max_query_length:
            raise ConfigError(f"addax: encodings of {u.shape[1]} query / {v.shape[1]} document rows exceed "
                              f"max_query_length={self.config.max_query_length} / max_doc_length="
                              f"{self.config.max_doc_length} (a store made with other lengths?)")
        u, v = u.float(), v.float()
        if self.config.ablation == "no_mags":
            h_q, h_d = u, v
        else:
            s = u @ v.transpose(1, 2)                                                    # (1) S (n, l, t)
            if self.config.scaled:
                s = s / u.shape[-1] ** 0.5
            h_q = self.query_mags(u, u_mask, v, v_mask, s)                               # (n, l, d)
            h_d = self.doc_mags(v, v_mask, u, u_mask, s.transpose(1, 2))                 # S' = S^T (n, t, d)
        h_q, h_d = self.dropout(h_q), self.dropout(h_d)
        out = {}
        if self.config.ablation == "no_denoiser":
            query, doc = h_q, h_d
        else:
            b = on_rows(self.denoiser.encoder, h_d, v_mask)                              # (8) B (n, t, h)
            codes = torch.tanh(self.config.code_sharpness * b)                                     # B_D
            query = torch.tanh(self.query_projection(h_q))                               # (10) (n, l, h)
            doc = codes if self.config.codes == "tanh" else torch.sign(b)
            if losses:
                rows = v_mask.unsqueeze(-1)
                out["sign_loss"] = ((codes - torch.sign(b)) ** 2 * rows).sum((1, 2))      # (9) L1 (n,)
                rebuilt = on_rows(self.denoiser.decoder, codes, v_mask)                   # H_D^r (n, t, d)
                target = h_d.detach() if self.config.reconstruction == "detached" else h_d
                out["reconstruction_loss"] = ((rebuilt - target) ** 2 * rows).sum((1, 2))  # (9) L2 (n,)
        out["score"] = maxsim(query, u_mask, doc, v_mask)                                 # (11)
        return out

    def score(self, output: dict[str, torch.Tensor]) -> torch.Tensor:
        return output["score"]

    def loss(self, output: dict[str, torch.Tensor], batch: Batch) -> Loss:
        hinge = pairwise_hinge(output["score"], batch.labels, batch.groups, self.config.margin)
        parts = {"hinge": hinge}
        if "sign_loss" in output:
            triplets = max(1, int(batch.groups.unique().numel()))  # both documents of a triplet count, per triplet
            parts["sign"] = self.config.delta * output["sign_loss"].sum() / triplets
            parts["reconstruction"] = self.config.gamma * output["reconstruction_loss"].sum() / triplets
        return Loss(sum(parts.values()), parts)

    # -- late interaction: the BERT pass of a document is stored; the head runs per pair --------------------------
    def encode_documents(self, texts: list[str]) -> list[torch.Tensor]:
        """Each text's V_D: (t_i, d), its real word pieces (what the store keeps)."""
        return self.encode_prepared(self.prepare_texts(texts, "document"), "document")

    def encode_queries(self, texts: list[str]) -> list[torch.Tensor]:
        return self.encode_prepared(self.prepare_texts(texts, "query"), "query")

    def _side_length(self, side: str) -> int:
        return self.config.max_query_length if side == "query" else self.config.max_doc_length

    def text_lengths(self, texts: list[str], side: str) -> list[int]:
        return single_lengths(self.tokenizer, texts, self._side_length(side))

    def prepare_texts(self, texts: list[str], side: str) -> tuple[torch.Tensor, torch.Tensor]:
        ids, mask, _ = single_inputs(self.tokenizer, texts, self._side_length(side))
        return ids, mask                                                                  # (B, L) each

    def encode_prepared(self, prepared: tuple[torch.Tensor, torch.Tensor], side: str) -> list[torch.Tensor]:
        ids, mask = prepared
        rows = mask.sum(1).tolist()                                                       # on the host: no sync
        device = next(self.parameters()).device
        hidden = self.encode(ids.to(device, non_blocking=True), mask.to(device, non_blocking=True))  # (B, L, d)
        return [h[:n] for h, n in zip(hidden, rows)]

    def score_encoded(self, query: torch.Tensor, documents: list[torch.Tensor]) -> torch.Tensor:
        """One query's U_Q (l, d) against n stored V_D (t_i, d): the head batched over all n candidates -> (n,)."""
        lengths = torch.tensor([len(d) for d in documents], device=query.device)
        v = pad_sequence(documents, batch_first=True)                                     # (n, t, d)
        v_mask = torch.arange(v.shape[1], device=query.device) < lengths.unsqueeze(1)     # (n, t)
        u = query.unsqueeze(0).expand(len(documents), -1, -1)                            # (n, l, d), no copy
        u_mask = torch.ones(u.shape[:2], dtype=torch.bool, device=query.device)
        return self.interact(u, u_mask, v, v_mask)["score"]


def maxsim(query: torch.Tensor, query_mask: torch.Tensor, doc: torch.Tensor, doc_mask: torch.Tensor) -> torch.Tensor:
    """(11) sum over real query rows of the max cosine over real document rows: (n, l, k), (n, t, k) -> (n,)."""
    cos = F.normalize(query, dim=-1) @ F.normalize(doc, dim=-1).transpose(1, 2)         # (n, l, t)
    best = cos.masked_fill(~doc_mask.unsqueeze(1), float("-inf")).amax(-1)             # (n, l) padding never wins
    return (best * query_mask).sum(-1)                                                  # (n,)

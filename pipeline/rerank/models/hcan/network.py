"""HCAN: Hybrid Co-Attention Network (Rao, Liu, Tay, Yang, Shi & Lin, EMNLP 2019), as read in docs/models.md §1.

Query and candidate share a word embedding and an encoder of levels 0..N (level l covers (l+1)-grams). Per level:
relevance matching (RM, no parameters) and, for l >= 1, semantic matching (SM); all features feed an MLP.

Shapes: B pairs, n query tokens, m candidate tokens, T either, E embedding width, F filters, d = sm_hidden,
L = max_query_length. Padding (id 0) is masked in every softmax (-inf), pooling and LSTM (packed sequences):
appending padding to a query or candidate does not change its score (tests/rerank/test_hcan.py).

The network is all in this file (its config in config.py, its inputs from texts in inputs.py), in this order; the equation numbers are those of docs/models.md §1, and the
comments beside the code cite them:

    U^l = Dropout(ReLU(Conv1d(U^{l-1})))               (B, T, F)   (1) level l of the deep encoder, U^0 = E (B, T, E)
    S = U_q U_cᵀ, softmax over the query axis          (B, n, m)   (2) RM similarity (rm_softmax, rm_similarity)
    RM = [max_m S ⊙ idf; mean_m S ⊙ idf]               (B, 2L)     (3) zero-padded to L = max_query_length
    A = REP(U_q w_q) + REP(U_c w_c) + U_q W_b U_cᵀ     (B, n, m)   (4) SM co-attention, softmax over the query axis
    Ũ_q = Aᵀ U_q;  Ũ_c = REP(softmax_m(max_n A) U_c)   (B, m, F)   (5)
    H = [U_c; Ũ_q; U_c ⊙ Ũ_q; Ũ_c ⊙ Ũ_q]               (B, m, 4F)  (6)
    SM = BiLSTM(H): last real state of each direction  (B, d)      (7)
    log p = log_softmax(MLP([RM^0..N; SM^1..N]))       (B, 2)      (8) MLP 150-50-2, P(relevant) the score
    z_1 += w rm0,  rm0 = Σ_i idf_i max_j S^0_ij / Σ idf (B,)        (8') start=rm0 only: a residual start [R]

Constants of the authors' code (jinfengr/hcan) that were options here until 2026-11-27 (pipeline/rerank/migrations.py
RETIRED): conv kernel 2 (`KERNEL`), and the trigram inputs' `TRIGRAM_DIM` / `TRIGRAM_KERNEL` here and lengths in
inputs.py. The code's variants rm_mode=code (max pooling only), sm_mode=code (ReLU(H), max + mean over the
BiLSTM's outputs) and idf_stat=cf (collection-frequency IDF) went with them: no experiment used them.

Options of the authors' code, off by default as there:
- `external_features=True` is the code's `--ext`: four word-overlap features of the pair
  (pipeline/rerank/overlap.py) join the MLP input.
- `char_trigrams` / `with_url` are the code's tweet-search inputs: relevance matching of the query's character
  trigrams against the candidate's text and its URL (TrigramMatching here).
How texts become these inputs is in inputs.py beside this file.

Relevance-matching variants (the defaults are those of docs/models.md §1):
- `rm_softmax="padded"` is the authors' code, which masks nothing: a short query's padded rows take part in the
  query-axis softmax with logit ~0, so a candidate word near no query word weighs little everywhere. The masked
  softmax of docs/models.md §1 only says which query word a candidate word is nearest, however far.
- `rm_softmax="raw", rm_similarity="cosine"` drops the softmax and compares L2-normalised rows, so level 0 is the
  exact-match signal (an exact match scores 1 whatever training does to the embeddings).
On tweet search (2-4 word queries) the first is much better than the default and the second better still
(eval/microblog-*.yaml).

`start="rm0"` [R] (not in paper or code) makes the untrained model exactly the parameter-free level-0 RM score of
bench/hcan_inputs_probe.py (with rm_softmax=raw, rm_similarity=cosine: each query word's best cosine against the
candidate's words, IDF-weighted): the relevance logit gets w x rm0 (w a parameter, 1 at the start) and the MLP's last
layer starts at zero, so training learns a correction to a start that already ranks, instead of a random MLP that
must find that feature again from 93 questions.

Resolutions beyond docs/models.md §1:
- RM features are computed at the batch's query length and zero-padded to max_query_length (padding weighs 0
  anyway);
- an empty text reads as one unknown word;
- the code's embedding dropout and its IDF weighting of levels 0-1 only are not reproduced;
- the vocabulary, IDF collection and embedding choices are in pipeline/rerank/text.py and HCANConfig;
- `embeddings="contextual"` (not in the paper, whose inputs are static word2vec): E is the frozen BERT's last-layer
  states of each sentence (the packaged all-MiniLM-L6-v2 unless `bert` names one), a word the mean of its pieces'
  states (inputs.py WordPieces), computed once per sentence by the code of MRNN's contextual features
  (pipeline/rerank/memo.py frozen_token_features). The BERT is no table of this model: `freeze_embeddings`,
  `pretrained_vocab` and `embedding_dim` do not apply, and the checkpoint keeps its weights and bert/ folder."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from pipeline.errors import ConfigError
from pipeline.rerank.layers import masked_softmax
from pipeline.rerank.losses import grouped_softmax, pairwise_hinge
from pipeline.rerank.model import Batch, Loss, Pair, RerankModel
from pipeline.rerank.bert import DEFAULT_BERT, bert_from_assets, load_bert, save_bert_assets
from pipeline.rerank.memo import TextMemo, frozen_token_features
from pipeline.rerank.models.hcan.config import CONTEXTUAL, KERNEL, TRIGRAM_DIM, TRIGRAM_KERNEL, HCANConfig
from pipeline.rerank.models.hcan.inputs import (MAX_QUERY_TRIGRAMS, WordPieces, load_inputs, pair_batch, save_inputs,
                                              training_inputs)
from pipeline.rerank.text import IdfTable, Vocabulary

# -- helpers ----------------------------------------------------------------------------------------------------------
def run_lstm(lstm: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor):
    """A batch-first (Bi)LSTM over the real steps only: (B, T, 2h) outputs, zero at padding, and h_n."""
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, (h_n, _) = lstm(packed)
    return pad_packed_sequence(out, batch_first=True, total_length=x.size(1))[0], h_n  # h_n in input order


# -- encoders: (B, T, E) embeddings + (B, T) mask -> [level 0 (B, T, E), level 1..N (B, T, F)] ------------------------
class DeepEncoder(nn.Module):
    """Level l = Dropout(ReLU(Conv1d(level l-1, F, k))), 'same' padding 0 left / k-1 right: (l+1)-grams for k=2
    (KERNEL; the trigram branches' TRIGRAM_KERNEL)."""

    def __init__(self, c: HCANConfig, dim: int, kernel: int = KERNEL):
        super().__init__()
        self.stacked, self.pads = True, [kernel - 1] * c.levels
        self.convs = nn.ModuleList(nn.Conv1d(dim if l == 0 else c.filters, c.filters, kernel)
                                   for l in range(c.levels))
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> list[torch.Tensor]:
        levels, keep = [x], mask.unsqueeze(-1)                              # keep (B, T, 1)
        for pad, conv in zip(self.pads, self.convs):
            below = levels[-1] if self.stacked else x                       # deep: level l-1; wide: E
            h = conv(F.pad(below.transpose(1, 2), (0, pad)))                # (B, F, T)  0 left, `pad` right
            level = self.dropout(F.relu(h)).transpose(1, 2)                 # (B, T, F)  U^l, (1)
            levels.append(level * keep)                                     # padding back to zero
        return levels


class WideEncoder(DeepEncoder):
    """Level l = one conv on the embeddings with kernel k+l-1 (2, 3, 4, 5): also (l+1)-grams for k=2."""

    def __init__(self, c: HCANConfig, dim: int, kernel: int = KERNEL):
        super().__init__(c, dim, kernel)  # (the deep convs it replaces are drawn first: the same initial weights)
        self.stacked, self.pads = False, [kernel + l - 2 for l in range(1, c.levels + 1)]
        self.convs = nn.ModuleList(nn.Conv1d(dim, c.filters, kernel + l - 1) for l in range(1, c.levels + 1))


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


ENCODERS = {"deep": DeepEncoder, "wide": WideEncoder, "bilstm": ContextualEncoder}  # bilstm: the paper's contextual


# -- relevance matching (no parameters) -------------------------------------------------------------------------------
def padded_query_softmax(s: torch.Tensor, rows: torch.Tensor, length: int) -> torch.Tensor:
    """Softmax of (B, n, m) S over the query axis as if each query had `length` rows, the missing ones with logit 0
    (the code's unmasked padding): a candidate word near no query word then weighs little on every query row."""
    top = s.masked_fill(~rows, float("-inf")).amax(1, keepdim=True).clamp(min=0)  # (B, 1, m)  for stability
    e = torch.exp(s - top) * rows                                           # (B, n, m)  real rows only
    missing = (length - rows.sum(1, keepdim=True)).clamp(min=0)            # (B, 1, 1)  zero-logit rows
    return e / (e.sum(1, keepdim=True) + missing * torch.exp(-top))


def relevance_matching(uq, uc, qmask, cmask, weights, c: HCANConfig, length: int | None = None) -> torch.Tensor:
    """(B, n, *) x (B, m, *) -> (B, 2L) [max; mean] over the candidate axis times the query positions' `weights`
    (B, n) (IDF), each zero-padded to L = `length` (default max_query_length)."""
    length = length or c.max_query_length
    if c.rm_similarity == "cosine":
        uq, uc = F.normalize(uq, dim=-1), F.normalize(uc, dim=-1)
    s = uq @ uc.transpose(1, 2)                                            # (B, n, m)  S = U_q U_c^T, (2)
    rows, cols = qmask.unsqueeze(2), cmask.unsqueeze(1)                    # (B, n, 1), (B, 1, m)
    if c.rm_softmax == "query":                                            # (2): over the query axis, masked
        s = masked_softmax(s, rows, 1)
    elif c.rm_softmax == "context":                                        # over the candidate axis
        s = masked_softmax(s, cols, 2)
    elif c.rm_softmax == "padded":                                         # the code's: padded rows take part
        s = padded_query_softmax(s, rows, length)
    # (rm_softmax="raw": S as it is)

    features = [s.masked_fill(~cols, float("-inf")).amax(2) * weights,   # (B, n)  Max, times the weights (3)
                (s * cols).sum(2) / cols.sum(2) * weights]                 # (B, n)  Mean over real columns (3)
    padded = [F.pad(f, (0, length - f.size(1))) for f in features]         # (B, L) each: a fixed width
    return torch.cat(padded, 1)                                            # (B, 2L)


# -- semantic matching ------------------------------------------------------------------------------------------------
class CoAttention(nn.Module):
    """A = REP(U_q w_q) + REP(U_c w_c) + U_q W_b U_c^T; Ũ_q = A^T U_q; Ũ_c BiDAF-style; H (B, m, 4F)."""

    def __init__(self, f: int):
        super().__init__()
        self.w_q = nn.Linear(f, 1, bias=False)
        self.w_c = nn.Linear(f, 1, bias=False)
        self.w_b = nn.Parameter(nn.init.xavier_uniform_(torch.empty(f, f)))

    def forward(self, uq, uc, qmask, cmask) -> torch.Tensor:
        """U_q (B, n, F), U_c (B, m, F) and their masks -> H (B, m, 4F): eqs. (4)-(6)."""
        a_raw = self.w_q(uq) + self.w_c(uc).transpose(1, 2) + uq @ self.w_b @ uc.transpose(1, 2)  # (B, n, m)  (4)
        rows = qmask.unsqueeze(2)                                          # (B, n, 1)
        a = masked_softmax(a_raw, rows, 1)                                 # (B, n, m)  softmax over the query axis

        # (5) Ũ_q: each candidate word's attention-weighted query words; a true transpose (the code's reshape is not)
        uq_att = a.transpose(1, 2) @ uq                                    # (B, m, F)  Ũ_q = A^T U_q
        # (5) Ũ_c, BiDAF's query-to-context attention: one summary of the candidate, repeated at every position
        best = a_raw.masked_fill(~rows, float("-inf")).amax(1)             # (B, m)     max_n A
        b = masked_softmax(best, cmask, 1)                                 # (B, m)     softmax_m
        uc_att = (b.unsqueeze(1) @ uc).expand_as(uc)                       # (B, m, F)  Ũ_c = REP(b U_c)

        return torch.cat([uc, uq_att, uc * uq_att, uc_att * uq_att], 2)   # (B, m, 4F)  H (6)


class SemanticMatching(nn.Module):
    """O_SM = BiLSTM(H): the last real hidden state of each direction (B, d)."""

    def __init__(self, c: HCANConfig):
        super().__init__()
        self.coattention = CoAttention(c.filters)
        self.lstm = nn.LSTM(4 * c.filters, c.sm_hidden // 2, batch_first=True, bidirectional=True)

    def forward(self, uq, uc, qmask, cmask, lengths) -> torch.Tensor:
        h = self.coattention(uq, uc, qmask, cmask)                         # (B, m, 4F)  H, (4)-(6)
        h_n = run_lstm(self.lstm, h, lengths)[1]                           # h_n (2, B, d/2)
        return torch.cat([h_n[0], h_n[1]], 1)                              # (B, d)  (7) forward end, backward start


# -- character-trigram branches (the trigrams as text: inputs.py) -----------------------------------------------
class TrigramMatching(nn.Module):
    """One branch: the query's trigrams against a sequence's (the text's or the URL's), on levels 0..N of an
    encoder of its own (kernel TRIGRAM_KERNEL); embedded (B, n3, D), (B, s3, D) + masks -> (B, (N+1) x 2 x L_3)
    features, L_3 = MAX_QUERY_TRIGRAMS. D = TRIGRAM_DIM; the table is the model's, shared by the branches."""

    def __init__(self, c: HCANConfig):
        super().__init__()
        self.config = c
        encoder = WideEncoder if c.encoder == "wide" else DeepEncoder      # bilstm: deep, as in the code
        self.encoder = encoder(c, TRIGRAM_DIM, TRIGRAM_KERNEL)

    def forward(self, query: torch.Tensor, qmask: torch.Tensor, seq: torch.Tensor, smask: torch.Tensor) -> torch.Tensor:
        c = self.config
        uqs = self.encoder(query, qmask, qmask.sum(1).cpu())               # N+1 x (B, n3, D|F)
        uss = self.encoder(seq, smask, smask.sum(1).cpu())                 # N+1 x (B, s3, D|F)
        weights = qmask.float()                                             # (B, n3)  no IDF: 1 at real positions
        return torch.cat([relevance_matching(uq, us, qmask, smask, weights, c, MAX_QUERY_TRIGRAMS)
                          for uq, us in zip(uqs, uss)], 1)


def trigram_embedding(size: int, dim: int) -> nn.Embedding:
    """The trigram table: U(-0.05, 0.05) as the code's, padding row 0 zero and never updated."""
    embedding = nn.Embedding(size, dim, padding_idx=0)
    with torch.no_grad():
        embedding.weight.uniform_(-0.05, 0.05)
        embedding.weight[0].zero_()
    return embedding


# -- the model --------------------------------------------------------------------------------------------------------
class HCAN(RerankModel):
    name = "hcan"
    config_class = HCANConfig
    # the authors' code: SGD + Nesterov, batch 256, <= 20 epochs, early stop on dev loss (patience 4), LR x0.5 on a
    # dev plateau (patience 2); no weight decay and no gradient clipping
    training_defaults = {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": True, "train_batch_size": 256,
                         "epochs": 20, "measure": "loss", "patience": 4, "schedule": "plateau", "plateau_factor": 0.5,
                         "plateau_patience": 2, "weight_decay": 0.0, "max_grad_norm": None, "eval_batch_size": 256}

    def __init__(self, config: HCANConfig, vocab: Vocabulary, idf: IdfTable, embeddings: np.ndarray | None = None,
                 trigrams: Vocabulary | None = None, bert=None, tokenizer=None):
        super().__init__(config)
        c = config
        c.check()
        dim = embeddings.shape[1] if embeddings is not None else c.embedding_dim
        self.bert = self.tokenizer = self.pieces = None                     # contextual inputs only
        if c.embeddings == CONTEXTUAL:                                     # a checkpoint's BERT, or the config's
            self.bert, self.tokenizer = (bert, tokenizer) if bert is not None else load_bert(c.bert or DEFAULT_BERT)
            self.bert.requires_grad_(False).eval()                         # frozen, as MRNN's contextual features
            self.pieces = WordPieces(self.tokenizer, self.bert.config.max_position_embeddings)
            self._features = TextMemo()                                    # word-piece row -> (pieces, H)
            dim = self.bert.config.hidden_size
        if not dim or idf.max_order < self.idf_order(c) or (c.trigrams and trigrams is None):
            raise ConfigError("hcan: build the model with HCAN.from_training_data (vocabularies, IDF, embeddings)")
        self.vocab, self.idf, self.trigram_vocab = vocab, idf, trigrams
        self.embedding = None if self.bert is not None else nn.Embedding(len(vocab), dim, padding_idx=0)  # row 0 zero
        if embeddings is not None:
            self.embedding.weight.data.copy_(torch.from_numpy(embeddings))
        if self.embedding is not None:
            self.embedding.weight.requires_grad_(not c.freeze_embeddings)
        self.encoder = ENCODERS[c.encoder](c, dim)
        self.sm = nn.ModuleList([] if c.rm_only else [SemanticMatching(c) for _ in range(c.levels)])
        # character trigrams: one table, a branch per sequence the query's trigrams are matched against
        self.trigram_embedding = trigram_embedding(len(trigrams), TRIGRAM_DIM) if c.trigrams else None
        self.text_trigrams = TrigramMatching(c) if c.char_trigrams else None
        self.url_trigrams = TrigramMatching(c) if c.with_url else None

        # the MLP of (8) reads every feature: its input width, part by part
        width = 0 if c.sm_only else (c.levels + 1) * c.max_query_length * 2                  # RM: max + mean, 0..N
        width += (c.char_trigrams + c.with_url) * (c.levels + 1) * MAX_QUERY_TRIGRAMS * 2  # trigram branches
        width += 0 if c.rm_only else c.levels * c.sm_hidden                                 # SM, levels 1..N
        width += 4 if c.external_features else 0                                            # overlap features
        self.classifier = nn.Sequential(nn.Linear(width, 150), nn.ReLU(), nn.Linear(150, 50), nn.ReLU(),
                                        nn.Linear(50, 2))
        self.rm0_weight = None
        if c.start == "rm0":                                               # (8'): the start is rm0, exactly
            self.rm0_weight = nn.Parameter(torch.ones(()))                 # w
            nn.init.zeros_(self.classifier[-1].weight)                     # the MLP's correction starts at 0
            nn.init.zeros_(self.classifier[-1].bias)

    @staticmethod
    def idf_order(c: HCANConfig) -> int:
        return 1 if c.encoder == "bilstm" else c.levels + 1  # bilstm: unigram IDF at every level

    # -- building, saving, inputs: from texts (inputs.py) -------------------------------------------------------
    @classmethod
    def from_training_data(cls, config: HCANConfig, queries: list[str], docs: list[str],
                           doc_fields: list = ()) -> "HCAN":
        """Vocabulary, IDF tables (over the distinct training texts) and initial embeddings, then the net; with
        trigram inputs, the trigram vocabulary of the training queries, texts and URLs (`doc_fields`)."""
        config.check()
        return cls(*training_inputs(config, queries, docs, doc_fields, cls.idf_order(config)))

    def save_assets(self, directory: Path) -> None:
        save_inputs(directory, self.vocab, self.idf, self.trigram_vocab)
        if self.bert is not None:                                          # its config and tokenizer (weights: ours)
            save_bert_assets(self.bert, self.tokenizer, directory)

    @classmethod
    def load_assets(cls, config: HCANConfig, directory: Path) -> "HCAN":
        vocab, idf, trigrams = load_inputs(config, directory, cls.idf_order(config))
        bert = bert_from_assets(directory) if config.embeddings == CONTEXTUAL else (None, None)
        return cls(config, vocab, idf, None, trigrams, *bert)

    def train(self, mode: bool = True):
        super().train(mode)
        if self.bert is not None:
            self.bert.eval()                                               # frozen: no dropout either
        return self

    @classmethod
    def start_parameters(cls, config: HCANConfig) -> tuple[str, ...]:
        """start=rm0: the weight w of the parameter-free feature (the MLP, zero at the start, is the correction)."""
        return ("rm0_weight",) if config.start == "rm0" else ()

    def batch_sampling(self) -> str:
        return {"hinge": "pairs", "listwise": "queries"}.get(self.config.loss, "pointwise")

    def prepare(self, pairs: list[Pair]) -> Batch:
        """Token ids padded to the batch's longest (<= max lengths), per-level IDF weights of query positions, the
        overlap features and the trigram ids of the branches turned on (inputs.pair_batch)."""
        return pair_batch(pairs, self.vocab, self.idf, self.trigram_vocab, self.config, self.pieces)

    # -- the network --------------------------------------------------------------------------------------------------
    def embed(self, ids: torch.Tensor, pieces: torch.Tensor | None, piece_word: torch.Tensor | None) -> torch.Tensor:
        """(B, n) word ids -> E (B, n, E): the table's rows, or (contextual) each word's mean over its pieces of the
        frozen BERT's last-layer states of the whole sentence, pieces (B, P) of `piece_word` (B, P) (-1: none)."""
        if self.bert is None:
            return self.embedding(ids)
        states = frozen_token_features(self.bert, self.tokenizer.pad_token_id, self._features, pieces)  # (B, P, H)
        of_word = (piece_word.unsqueeze(2) == torch.arange(ids.size(1), device=ids.device)).float()  # (B, P, n)
        return of_word.transpose(1, 2) @ states / of_word.sum(1).clamp(min=1).unsqueeze(2)          # (B, n, H)

    def forward(self, query_ids: torch.Tensor, doc_ids: torch.Tensor, query_idf: torch.Tensor,
                overlap: torch.Tensor | None = None, query_trigrams: torch.Tensor | None = None,
                doc_trigrams: torch.Tensor | None = None, url_trigrams: torch.Tensor | None = None,
                query_pieces: torch.Tensor | None = None, query_piece_word: torch.Tensor | None = None,
                doc_pieces: torch.Tensor | None = None, doc_piece_word: torch.Tensor | None = None) -> torch.Tensor:
        """(B, n), (B, m), (B, N+1, n) [, (B, 4) overlap features] [, (B, n3) query, (B, m3) text, (B, u3) URL
        trigrams] [, contextual: (B, P_q) query and (B, P_m) candidate word pieces, each piece's word] -> (B, 2)
        log-probabilities of (non-relevant, relevant)."""
        c = self.config
        qmask, cmask = query_ids != 0, doc_ids != 0                         # (B, n), (B, m)
        qlen, clen = qmask.sum(1).cpu(), cmask.sum(1).cpu()
        eq = self.embed(query_ids, query_pieces, query_piece_word)          # (B, n, E)
        ec = self.embed(doc_ids, doc_pieces, doc_piece_word)                # (B, m, E)
        uqs = self.encoder(eq, qmask, qlen)                                 # N+1 x (B, n, E|F)  U_q^0..N, (1)
        ucs = self.encoder(ec, cmask, clen)                                 # N+1 x (B, m, E|F)  U_c^0..N, (1)

        features = []
        if not c.sm_only:                                                  # RM^0..N, (2)-(3): (B, 2L) each
            features += [relevance_matching(uqs[l], ucs[l], qmask, cmask, query_idf[:, l], c)
                         for l in range(c.levels + 1)]
        for branch, seq_ids in ((self.text_trigrams, doc_trigrams), (self.url_trigrams, url_trigrams)):
            if branch is not None:                                         # (B, (N+1) x 2 x L_3) each
                features.append(branch(self.trigram_embedding(query_trigrams), query_trigrams != 0,
                                       self.trigram_embedding(seq_ids), seq_ids != 0))
        if not c.rm_only:                                                  # SM^1..N, (4)-(7): (B, d) each
            features += [sm(uqs[l], ucs[l], qmask, cmask, clen) for l, sm in enumerate(self.sm, 1)]
        if c.external_features:
            features.append(overlap)                                       # (B, 4)

        logits = self.classifier(torch.cat(features, 1))                   # (B, 2)  (8)
        if self.rm0_weight is not None:                                    # (8'): z_1 += w rm0
            rm0 = features[0][:, :c.max_query_length].sum(1) / query_idf[:, 0].sum(1).clamp(min=1e-9)   # (B,)
            logits = logits + torch.stack([torch.zeros_like(rm0), self.rm0_weight * rm0], 1)
        return F.log_softmax(logits, 1)                                    # (B, 2)

    def state_dict(self, *args, **kwargs):
        """On CUDA, cuDNN keeps each LSTM's weights as views of one flat buffer, which safetensors refuses to save
        (shared storage): CUDA tensors are handed out as copies. On the CPU these are the tensors themselves."""
        state = super().state_dict(*args, **kwargs)
        return type(state)((k, v.clone() if v.is_cuda else v) for k, v in state.items())

    def score(self, output: torch.Tensor) -> torch.Tensor:
        return output[:, 1].double().exp()  # P(relevant); float64 keeps near-1 probabilities apart

    def loss(self, output: torch.Tensor, batch: Batch) -> Loss:
        if self.config.loss == "hinge":  # on the logit z_1 - z_0, within each positive's group
            hinge = pairwise_hinge(output[:, 1] - output[:, 0], batch.labels, batch.groups, self.config.margin)
            return Loss(hinge, {"hinge": hinge})
        if self.config.loss == "listwise":  # a question's positives, each against its negatives: the logit's softmax
            listwise = grouped_softmax(output[:, 1] - output[:, 0], batch.labels, batch.groups)
            return Loss(listwise, {"listwise": listwise})
        nll = F.nll_loss(output, (batch.labels > 0).long())
        return Loss(nll, {"nll": nll})

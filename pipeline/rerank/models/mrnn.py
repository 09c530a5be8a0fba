"""MRNN: Multi-Resolution Neural Network with duplex attention (Cakaloglu & Xu), as read in MODELS.md §2.

No public code exists; [R] marks our resolutions (MODELS.md §2). Query and document share every layer (the layers:
pipeline/rerank/models/_mrnn_layers.py):

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
    qe_i = ‖sae_i − mra_q,i‖₂,  dist = Σ_{i real} qe_i          (8) ranking score = −dist

Training: triplet margin loss with batch-hard mining [dist(Q, D+) − dist(Q, D−) + m]₊: for each question of the
batch its hardest positive (largest distance) against its hardest negative (smallest), where the negatives are the
other questions' positives in the batch and, with `own_negatives=True` [R], the question's own labelled negatives.
Adam lr 1e-2 [R] (paper 1e-4; see training_defaults), weight decay 1e-3 (as L2). Resolutions beyond MODELS.md:
queries and documents of a batch pass the feature maps together (one set of BatchNorm statistics, as at evaluation);
inputs optionally IDF-scaled (idf_inputs); frozen BERT token features are computed once per distinct text; in
evaluation each distinct text's MRA is computed once (`remembered`: it depends on that text alone), so reranking
a query's top 100 costs the pair attention of eqs. (5)-(8), not 100 passes of the feature maps; under `predict` it
is kept only until the last batch that needs it (`plan_batches`), so memory does not grow with the run.
Two defaults depart from the paper because they stopped training (measured by pipeline/benchmarks/mrnn_dynamics.py):
the feature sum T of eq. (2) is ~0.3 s after BN + PReLU, so eq. (3) is one-hot from the start and its FC gets no
gradient (summary=mean keeps it soft); and Adam at lr 1e-4 moves no parameter by more than 1e-4 a step.

Shapes: B pairs, U distinct queries of the batch, n query / m document positions, w input width, s filters,
N blocks. Padding is zero and masked everywhere (BatchNorm statistics over real positions only, -inf in softmax and
max-pooling, zero before every convolution): appending padding does not change a distance (tests/rerank/test_mrnn.py).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pipeline.errors import ConfigError
from pipeline.log import logger
from pipeline.rerank.bert import (DEFAULT_BERT, bert_from_assets, check_positions, last_layer, load_bert, pad_rows,
                                  save_bert_assets, single_inputs)
from pipeline.validate import at_least, choice
from pipeline.rerank.memo import TextMemo
from pipeline.rerank.model import Batch, Loss, Pair, RerankModel
from pipeline.rerank.models import register_model
from pipeline.rerank.models._mrnn_layers import (DenselyConnectedBlocks, DocumentAwareQueryAttention,
                                                 MultiResolutionAttention)
from pipeline.rerank.text import SOURCES, IdfTable, Vocabulary, embedding_matrix, tokenize, word_table
from pipeline.rerank.losses import hardest_triplets

CONTEXTUAL = "contextual"  # frozen BERT token features: the closest thing here to the paper's BERT/ELMo features
_CHOICES = {"embeddings": (*SOURCES, CONTEXTUAL), "pooling": ("identity", "max"), "summary": ("sum", "mean"),
            "doc_attention": ("fixed", "length_free"), "attention_init": ("identity", "random"),
            "attention_logits": ("dot", "scaled", "distance")}


@dataclass
class MRNNConfig:
    embeddings: str = "glove"       # glove | bert | word2vec | random (static word tables, pipeline/rerank/text.py)
                                    # | contextual (frozen BERT last-layer word-piece features)
    bert: str = DEFAULT_BERT        # embeddings=bert|contextual: a local BERT folder, or the packaged all-MiniLM-L6-v2
    embedding_dim: int = 0          # 0 = the table's width (word2vec/random: 300), fixed when the vocabulary is built
    pretrained_vocab: int = 100_000  # static tables: also admit the table's first N words (unseen test words)
    freeze_embeddings: bool = True  # the paper's inputs are pretrained features [R]; padding row stays zero either way
    idf_inputs: bool = False        # scale each input vector by its word's (word piece's) normalised IDF over the
                                    # training texts [R]: the most common word weighs 0, unseen words 1
    blocks: int = 4                 # N (6 for SQuAD)
    filters: int = 256              # s (1024 in the paper; 128-256 on a CPU)
    window: int = 3                 # ws: kernel of blocks 2..N (odd: "same" padding)
    pooling: str = "identity"       # POOL after PReLU: identity [R] | max (stride 1, window ws)
    summary: str = "mean"           # T: mean over features [R] | sum (paper): after BN + PReLU the sum is ~0.3 s,
                                    # which saturates the softmax of eq. (3) (one-hot aw, no gradient)
    doc_attention: str = "fixed"    # fixed: FC over the document axis padded to max_doc_length (paper) [R]
                                    # | length_free: a per-position scalar affine map [R]
    attention_init: str = "identity"  # the FC of eq. (6) starts as the identity (dot-product attention) [R] | random
    attention_logits: str = "distance"  # e of eq. (5): distance [R]: (‖q_i‖² - ‖q_i - d_j‖²) / sqrt(s), attention
                                    # on the positions nearest in eq. (8) | scaled (dot / sqrt(s)) | dot (paper: its
                                    # one-hot attention lands on loud, unrelated positions; eval/MRNN.md)
    max_query_length: int = 40      # words kept (contextual: positions, [CLS] and [SEP] included)
    max_doc_length: int = 100       # L_d of the fixed-length document attention (as max_query_length)
    margin: float = 0.5             # triplet margin: 0.5 WikiQA/TrecQA, 0.8 QUASAR-T, 1 SQuAD
    own_negatives: bool = False     # also mine the question's own labelled negatives [R] (else other questions' only)
    seed: int = 0                   # unknown-word rows and word2vec (`mrnn(seed=N)` also seeds the training run)

    def check(self) -> None:
        for name, allowed in _CHOICES.items():
            choice("mrnn", name, getattr(self, name), allowed)
        for name in ("blocks", "filters", "window"):
            at_least("mrnn", name, getattr(self, name), 1)
        for name in ("max_query_length", "max_doc_length"):                # contextual: [CLS] + a piece + [SEP]
            at_least("mrnn", name, getattr(self, name), 3 if self.embeddings == CONTEXTUAL else 1)
        at_least("mrnn", "margin", self.margin, 0)
        if self.window % 2 == 0:
            raise ConfigError(f"mrnn: window={self.window}; it must be odd (same-length convolution)", field="window")


@dataclass
class MRNNOutput:
    """The forward pass: each pair's distance, and what the loss needs to compare every query with every document."""

    distance: torch.Tensor     # (B,)  dist(q_b, d_b), eq. (8)
    queries: torch.Tensor      # (U, n, s) MRA of the batch's distinct queries
    query_mask: torch.Tensor   # (U, n)
    docs: torch.Tensor         # (B, m, s) MRA of each pair's document
    doc_mask: torch.Tensor     # (B, m)
    query_index: torch.Tensor  # (B,) row of `queries` of each pair


def input_idf(token_lists: list[list[str]], ids: dict[str, int], size: int) -> torch.Tensor:
    """(size,) normalised IDF of each input id over the training texts (pipeline/rerank/text.py IdfTable); 1 else."""
    weights = torch.ones(size)
    for word, weight in IdfTable.build(token_lists, 1).tables[0].items():
        if word in ids:
            weights[ids[word]] = weight
    return weights


# -- the model ---------------------------------------------------------------------------------------------------
@register_model
class MRNN(RerankModel):
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
        if c.embeddings == CONTEXTUAL:
            if bert is None:
                self.bert, self.tokenizer = load_bert(c.bert)
            check_positions("mrnn", c, self.bert, ("max_query_length", "max_doc_length"))
            self.bert.requires_grad_(False).eval()                         # frozen token features
            self._features = TextMemo()                                    # word-piece row -> (pieces, H)
            width = self.bert.config.hidden_size
        else:
            width = embeddings.shape[1] if embeddings is not None else c.embedding_dim
            if vocab is None or not width:
                raise ConfigError("mrnn: build the model with MRNN.from_training_data (vocabulary, embeddings)")
            self.embedding = nn.Embedding(len(vocab), width, padding_idx=0)
            if embeddings is not None:
                self.embedding.weight.data.copy_(torch.from_numpy(embeddings))
            self.embedding.weight.requires_grad_(not c.freeze_embeddings)
        if c.idf_inputs:                                                   # weights of the input ids (state_dict)
            self.register_buffer("input_idf", torch.ones(len(self.tokenizer) if self.bert is not None else len(vocab)))
        self._mra = TextMemo()                                            # id row -> MRA (L, s), evaluation only
        self.feature_maps = DenselyConnectedBlocks(width, c)
        self.resolution_attention = MultiResolutionAttention(c)
        self.query_attention = DocumentAwareQueryAttention(c)

    def train(self, mode: bool = True) -> "MRNN":
        super().train(mode)
        self._mra.clear()                                                  # eval() too: predict() starts afresh
        if self.bert is not None:
            self.bert.eval()                                               # frozen: no dropout either
        return self

    # -- building -----------------------------------------------------------------------------------------------
    @classmethod
    def from_training_data(cls, config: MRNNConfig, queries: list[str], docs: list[str], doc_fields=()) -> "MRNN":
        """Static tables: the vocabulary of the training texts (+ the table's first words) and its embeddings."""
        config.check()
        texts = list(dict.fromkeys([*queries, *docs]))
        if config.embeddings == CONTEXTUAL:
            model = cls(config)
            if config.idf_inputs:
                pieces = [model.tokenizer.tokenize(t) for t in texts]
                model.input_idf.copy_(input_idf(pieces, model.tokenizer.get_vocab(), len(model.tokenizer)))
            return model
        token_lists = [tokenize(t) for t in texts]
        dim = config.embedding_dim or 300
        table = word_table(config.embeddings, config.bert, token_lists, dim, config.seed)
        vocab = Vocabulary.build(token_lists, 1, table.words[:config.pretrained_vocab] if table is not None else [])
        matrix, found = embedding_matrix(vocab, table, dim, np.random.default_rng(config.seed))
        logger.info("mrnn: %d training texts, vocabulary %d words (%d from %s), embeddings %d-d", len(token_lists),
                    len(vocab), found, config.embeddings, matrix.shape[1])
        model = cls(dataclasses.replace(config, embedding_dim=matrix.shape[1]), vocab, matrix)
        if config.idf_inputs:
            model.input_idf.copy_(input_idf(token_lists, vocab.ids, len(vocab)))
        return model

    def save_assets(self, directory: Path) -> None:
        if self.bert is not None:
            save_bert_assets(self.bert, self.tokenizer, directory)
        else:
            self.vocab.save(Path(directory) / "vocab.txt")

    @classmethod
    def load_assets(cls, config: MRNNConfig, directory: Path) -> "MRNN":
        from pipeline.rerank.checkpoint import CheckpointError

        if config.embeddings == CONTEXTUAL:
            return cls(config, None, None, *bert_from_assets(directory))
        path = Path(directory) / "vocab.txt"
        if not path.is_file():
            raise CheckpointError(path, "missing: MRNN's vocabulary")
        return cls(config, Vocabulary.load(path))

    # -- inputs -------------------------------------------------------------------------------------------------
    def batch_sampling(self) -> str:
        """Own negatives: whole questions (positives + sampled negatives); else one positive per row."""
        return "queries" if self.config.own_negatives else "positives"

    def _ids(self, texts: list[str], limit: int) -> tuple[torch.Tensor, int]:
        """(B, L) ids padded with 0, cut to `limit` words (or "[CLS] pieces [SEP]", L <= limit: the fixed document
        attention spans max_doc_length positions); how many texts were cut."""
        if self.bert is not None:                                          # an empty text reads as one [UNK]
            ids, _, cut = single_inputs(self.tokenizer, texts, limit, unk_if_empty=True)
            return ids, cut
        words = [tokenize(t) or [Vocabulary.UNK] for t in texts]          # an empty text reads as one unknown word
        return pad_rows([self.vocab.encode(w[:limit]) for w in words], 0)[0], sum(len(w) > limit for w in words)

    def prepare(self, pairs: list[Pair]) -> Batch:
        """Distinct queries (by qid) once, each pair's document, and which query each pair has."""
        c = self.config
        rows = {p.qid: p.query for p in pairs}
        query_ids, query_cut = self._ids(list(rows.values()), c.max_query_length)
        doc_ids, doc_cut = self._ids([p.text for p in pairs], c.max_doc_length)
        index = {qid: i for i, qid in enumerate(rows)}
        query_index = torch.tensor([index[p.qid] for p in pairs], dtype=torch.long)
        return Batch({"query_ids": query_ids, "doc_ids": doc_ids, "query_index": query_index}, query_cut + doc_cut,
                     pairs)

    # -- the network ----------------------------------------------------------------------------------------------
    def embed(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L) ids -> E (B, L, w) and the mask of real positions (B, L) (contextual: [CLS]/[SEP] masked out)."""
        mask = self.real_positions(ids)
        x = self.embedding(ids) if self.bert is None else self.token_features(ids) * mask[..., None]
        return (x * self.input_idf[ids][..., None] if self.config.idf_inputs else x), mask

    def pad_id(self) -> int:
        return self.tokenizer.pad_token_id if self.bert is not None else 0

    def real_positions(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, L) mask of the words (contextual: word pieces; [CLS], [SEP] and padding are not real)."""
        if self.bert is None:
            return ids != 0
        tok = self.tokenizer
        return (ids != tok.pad_token_id) & (ids != tok.cls_token_id) & (ids != tok.sep_token_id)

    def token_features(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, L) word-piece rows -> (B, L, H) frozen BERT last-layer features, computed once per distinct text:
        the BERT never changes, so each epoch after the first reads them from memory."""
        pad = self.tokenizer.pad_token_id
        rows = self.text_rows(ids)

        def bert_features(missing: list[tuple[int, ...]]):
            for start in range(0, len(missing), 256):
                chunk = missing[start:start + 256]
                piece_ids, attention = pad_rows([list(row) for row in chunk], pad)
                with torch.no_grad():
                    hidden = last_layer(self.bert, piece_ids.to(ids.device), attention.to(ids.device))  # (K, L, H)
                yield from (hidden[k, :len(row)].float().cpu() for k, row in enumerate(chunk))

        features = torch.zeros(*ids.shape, self.bert.config.hidden_size)
        for b, (row, value) in enumerate(zip(rows, self._features.lookup(rows, bert_features))):
            features[b, :len(row)] = value                                                    # (L_b, H)
        return features.to(ids.device)

    def represent(self, query_ids: torch.Tensor, doc_ids: torch.Tensor):
        """(U, n) query and (B, m) document ids -> MRA (U, n, s), (B, m, s) and their masks: eqs. (1)-(4).
        One pass over queries and documents together: BatchNorm's batch statistics (training) are those of both
        texts, as its running statistics (evaluation) are."""
        (n, m), width = (query_ids.size(1), doc_ids.size(1)), max(query_ids.size(1), doc_ids.size(1))
        pad = self.pad_id()
        ids = torch.cat([F.pad(query_ids, (0, width - n), value=pad), F.pad(doc_ids, (0, width - m), value=pad)])
        evaluating = not self.training and not torch.is_grad_enabled()
        mra, mask = (self.remembered if evaluating else self.multi_resolution)(ids)            # (U + B, L, s)
        queries, docs = mra.split([len(query_ids), len(doc_ids)])
        query_mask, doc_mask = mask.split([len(query_ids), len(doc_ids)])
        return queries[:, :n], query_mask[:, :n], docs[:, :m], doc_mask[:, :m]

    def multi_resolution(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(K, L) ids -> MRA (K, L, s) and the mask of real positions (K, L): eqs. (1)-(4)."""
        x, mask = self.embed(ids)
        mra, _ = self.resolution_attention(self.feature_maps(x, mask))
        return mra, mask

    def text_rows(self, ids: torch.Tensor) -> list[tuple[int, ...]]:
        """(K, L) padded ids -> each text's ids, padding dropped: the key of its remembered tensors."""
        pad = self.pad_id()
        return [tuple(row[row != pad].tolist()) for row in ids.cpu()]

    def plan_batches(self, batches) -> None:
        """`predict`'s batches, as `remembered` will look their texts up: a text's maps are kept until its last
        batch and a text of one batch not at all (pipeline/rerank/memo.py), so the memory holds the queries and
        passages still to be reused, not every text of the run (eval/MRNN.md §3). The same scores: a kept text
        is one that would be looked up again."""
        prepared = (self.prepare(pairs).tensors for pairs in batches)
        self._mra.expect(self.text_rows(t["query_ids"]) + self.text_rows(t["doc_ids"]) for t in prepared)

    def remembered(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`multi_resolution` in evaluation, once per distinct text: with BatchNorm's running statistics and the
        padding masked, a text's MRA depends on that text alone. Kept until the next train()/eval() call (the
        weights change only in between; `predict` calls eval() first), at most 1 GiB of it (pipeline/rerank/memo.py);
        under `predict` (`plan_batches`) only until the text's last batch."""
        pad = self.pad_id()
        rows = self.text_rows(ids)

        def maps(missing: list[tuple[int, ...]]):
            fresh, _ = self.multi_resolution(pad_rows([list(row) for row in missing], pad)[0].to(ids.device))
            return [fresh[k, :len(row)] for k, row in enumerate(missing)]                   # (L_k, s) each

        mra = torch.zeros(*ids.shape, self.config.filters, device=ids.device)
        for b, (row, value) in enumerate(zip(rows, self._mra.lookup(rows, maps))):
            mra[b, :len(row)] = value
        return mra, self.real_positions(ids)

    def forward(self, query_ids: torch.Tensor, doc_ids: torch.Tensor, query_index: torch.Tensor) -> MRNNOutput:
        """(U, n) distinct queries, (B, m) documents, (B,) query row of each pair -> distances and representations."""
        queries, query_mask, docs, doc_mask = self.represent(query_ids, doc_ids)   # (U, n, s), (B, m, s) + masks
        distance, _ = self.query_attention(queries[query_index], query_mask[query_index], docs, doc_mask)  # (B,)
        return MRNNOutput(distance, queries, query_mask, docs, doc_mask, query_index)

    def score(self, output: MRNNOutput) -> torch.Tensor:
        return -output.distance

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
        """Batch-hard triplet loss: per query, hardest positive against hardest negative (see the docstring)."""
        positive, negative = self.triplet_masks(output, batch)                # (U, B)
        mined = (positive | negative).any(0).nonzero().flatten()           # (C,) documents some query mines: the
        # rest (a dev query's unlabelled candidates) would cost U x B attentions for nothing
        triplet = hardest_triplets(self.all_distances(output, mined), positive[:, mined], negative[:, mined],
                                   self.config.margin)
        return Loss(triplet, {"triplet": triplet})

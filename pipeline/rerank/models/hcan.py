"""HCAN: Hybrid Co-Attention Network (Rao, Liu, Tay, Yang, Shi & Lin, EMNLP 2019), as read in MODELS.md §1.

Query and candidate share a word embedding and an encoder that yields levels 0..N (level 0 = the embeddings,
level l covers (l+1)-grams). Per level: relevance matching (RM, no parameters: similarity matrix, softmax,
max/mean pooling, IDF weights) and, for l >= 1, semantic matching (SM: BiDAF-style co-attention + BiLSTM).
All features -> MLP 150-50-2 -> log-softmax; NLL loss; ranking score = P(relevant).
`external_features=True` is the authors' code option `--ext` (off by default, as there): four word-overlap
features of the pair join the MLP input (see `overlap_features`). `char_trigrams` / `with_url` are the authors'
tweet-search inputs (off by default): relevance matching of the query's character trigrams against the
candidate's text and URL (pipeline/rerank/hcan_trigrams.py); the config is pipeline/rerank/hcan_config.py, the
layers pipeline/rerank/hcan_layers.py.

Shapes: B pairs, n query tokens, m candidate tokens, E embedding width, F filters, L = max_query_length.
Padding (id 0) is masked in every softmax (-inf), pooling and LSTM (packed sequences): appending padding to a
query or candidate does not change its score (tests/rerank/test_hcan.py).

Relevance-matching variants (defaults as MODELS.md): `rm_softmax="padded"` is the authors' code, which masks
nothing, so a short query's padded rows take part in the query-axis softmax with logit ~0 and a candidate word
near no query word weighs little everywhere (the masked softmax of MODELS.md only says which query word a
candidate word is nearest, however far); `rm_softmax="raw", rm_similarity="cosine"` drops the softmax and
compares L2-normalised rows, so level 0 is the exact-match signal (an exact match scores 1 whatever training
does to the embeddings). On tweet search (2-4 word queries) the first is much better than the default and the
second better still (eval/microblog-*.yaml).

Resolutions beyond MODELS.md: RM features are computed at the batch's query length and zero-padded to
max_query_length (padding weighs 0 anyway); an empty text reads as one unknown word; sm_mode="code" also applies
the code's ReLU to H; the code's embedding dropout and its IDF weighting of levels 0-1 only are not reproduced;
the vocabulary, IDF collection and embedding choices are in pipeline/rerank/text.py and HCANConfig.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pipeline.errors import ConfigError
from pipeline.log import logger
from pipeline.rerank.hcan_config import HCANConfig
from pipeline.rerank.hcan_layers import ENCODERS, SemanticMatching, relevance_matching
from pipeline.rerank.hcan_trigrams import TrigramMatching, trigram_embedding, trigram_tensors, training_trigrams
from pipeline.rerank.model import Batch, Loss, Pair, RerankModel
from pipeline.rerank.models import register_model
from pipeline.rerank.overlap import OVERLAP_FEATURES
from pipeline.rerank.text import IdfTable, Vocabulary, embedding_matrix, tokenize, word_table
from pipeline.training.losses import pairwise_hinge

# -- the model ---------------------------------------------------------------------------------------------------
@register_model
class HCAN(RerankModel):
    name = "hcan"
    config_class = HCANConfig
    # the authors' code: SGD + Nesterov, batch 256, <= 20 epochs, early stop on dev loss (patience 4), LR x0.5 on a
    # dev plateau (patience 2); no weight decay and no gradient clipping
    training_defaults = {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": True, "train_batch_size": 256,
                         "epochs": 20, "measure": "loss", "patience": 4, "schedule": "plateau", "plateau_factor": 0.5,
                         "plateau_patience": 2, "weight_decay": 0.0, "max_grad_norm": None, "eval_batch_size": 256}

    def __init__(self, config: HCANConfig, vocab: Vocabulary, idf: IdfTable, embeddings: np.ndarray | None = None,
                 trigrams: Vocabulary | None = None):
        super().__init__(config)
        c = config
        c.check()
        dim = embeddings.shape[1] if embeddings is not None else c.embedding_dim
        if not dim or idf.max_order < self.idf_order(c) or (c.trigrams and trigrams is None):
            raise ConfigError("hcan: build the model with HCAN.from_training_data (vocabularies, IDF, embeddings)")
        self.vocab, self.idf, self.trigram_vocab = vocab, idf, trigrams
        self.embedding = nn.Embedding(len(vocab), dim, padding_idx=0)  # padding row zero, never updated
        if embeddings is not None:
            self.embedding.weight.data.copy_(torch.from_numpy(embeddings))
        self.embedding.weight.requires_grad_(not c.freeze_embeddings)
        self.encoder = ENCODERS[c.encoder](c, dim)
        self.sm = nn.ModuleList([] if c.rm_only else [SemanticMatching(c) for _ in range(c.levels)])
        # character trigrams: one table, a branch per sequence the query's trigrams are matched against
        self.trigram_embedding = trigram_embedding(len(trigrams), c.trigram_dim) if c.trigrams else None
        self.text_trigrams = TrigramMatching(c) if c.char_trigrams else None
        self.url_trigrams = TrigramMatching(c) if c.with_url else None
        pools = 2 if c.rm_mode == "paper" else 1
        width = 0 if c.sm_only else (c.levels + 1) * c.max_query_length * pools
        width += (c.char_trigrams + c.with_url) * (c.levels + 1) * c.max_query_trigrams * pools
        width += 0 if c.rm_only else c.levels * c.sm_hidden * (2 if c.sm_mode == "code" else 1)
        width += 4 if c.external_features else 0
        self.classifier = nn.Sequential(nn.Linear(width, 150), nn.ReLU(), nn.Linear(150, 50), nn.ReLU(),
                                        nn.Linear(50, 2))

    @staticmethod
    def idf_order(c: HCANConfig) -> int:
        return 1 if c.encoder == "contextual" else c.levels + 1  # contextual: unigram IDF at every level

    # -- building -----------------------------------------------------------------------------------------------
    @classmethod
    def from_training_data(cls, config: HCANConfig, queries: list[str], docs: list[str],
                           doc_fields: list = ()) -> "HCAN":
        """Vocabulary, IDF tables (over the distinct training texts) and initial embeddings, then the net; with
        trigram inputs, the trigram vocabulary of the training queries, texts and URLs (`doc_fields`)."""
        config.check()
        token_lists = [tokenize(t) for t in dict.fromkeys([*queries, *docs])]
        dim = config.embedding_dim or 300
        table = word_table(config.embeddings, config.bert_path or None, token_lists, dim, config.seed)
        extra = table.words[:config.pretrained_vocab] if table is not None else []
        vocab = Vocabulary.build(token_lists, config.min_count, extra)
        matrix, found = embedding_matrix(vocab, table, dim, np.random.default_rng(config.seed))
        idf = IdfTable.build(token_lists, cls.idf_order(config), config.idf_stat)
        logger.info("hcan: %d training texts, vocabulary %d words (%d from %s), embeddings %d-d", len(token_lists),
                    len(vocab), found, config.embeddings, matrix.shape[1])
        trigrams = Vocabulary.build(training_trigrams(queries, docs, doc_fields)) if config.trigrams else None
        if trigrams is not None:
            logger.info("hcan: %d character trigrams", len(trigrams))
        return cls(dataclasses.replace(config, embedding_dim=matrix.shape[1]), vocab, idf, matrix, trigrams)

    def save_assets(self, directory: Path) -> None:
        self.vocab.save(Path(directory) / "vocab.txt")
        self.idf.save(Path(directory) / "idf.tsv")
        if self.trigram_vocab is not None:
            self.trigram_vocab.save(Path(directory) / "trigrams.txt")

    @classmethod
    def load_assets(cls, config: HCANConfig, directory: Path) -> "HCAN":
        from pipeline.rerank.checkpoint import CheckpointError

        paths = [Path(directory) / name for name in ("vocab.txt", "idf.tsv", "trigrams.txt")[:2 + config.trigrams]]
        for path in paths:
            if not path.is_file():
                raise CheckpointError(path, "missing: HCAN's vocabulary (vocab.txt), IDF table (idf.tsv) and, with "
                                      "char_trigrams or with_url, trigram vocabulary (trigrams.txt)")
        idf = IdfTable.load(paths[1])
        if idf.max_order < cls.idf_order(config):
            raise CheckpointError(paths[1], f"IDF up to {idf.max_order}-grams; levels={config.levels} needs "
                                  f"{cls.idf_order(config)}")
        trigrams = Vocabulary.load(paths[2]) if config.trigrams else None
        return cls(config, Vocabulary.load(paths[0]), idf, trigrams=trigrams)

    # -- inputs ---------------------------------------------------------------------------------------------------
    def batch_sampling(self) -> str:
        return "pairs" if self.config.loss == "hinge" else "pointwise"

    def prepare(self, pairs: list[Pair]) -> Batch:
        """Token ids padded to the batch's longest (<= max lengths), per-level IDF weights of query positions, and
        the trigram ids of the branches turned on (hcan_trigrams.trigram_tensors)."""
        c, memo = self.config, {}
        queries, docs = [p.query for p in pairs], [p.text for p in pairs]

        def tokens(text: str, limit: int) -> tuple[list[str], bool]:
            if (text, limit) not in memo:
                words = tokenize(text) or [Vocabulary.UNK]  # an empty text reads as one unknown word
                memo[text, limit] = (words[:limit], len(words) > limit)
            return memo[text, limit]

        qs, ds = [tokens(q, c.max_query_length) for q in queries], [tokens(d, c.max_doc_length) for d in docs]
        n, m = max((len(q) for q, _ in qs), default=1), max((len(d) for d, _ in ds), default=1)
        query_ids = torch.zeros(len(qs), n, dtype=torch.long)
        doc_ids = torch.zeros(len(ds), m, dtype=torch.long)
        query_idf = torch.zeros(len(qs), c.levels + 1, n)
        overlap = torch.zeros(len(qs), 4)
        weights: dict[tuple, list[list[float]]] = {}
        tensors, cut = trigram_tensors(pairs, self.trigram_vocab, c) if c.trigrams else ({}, [False] * len(pairs))
        for i, ((q, q_cut), (d, d_cut)) in enumerate(zip(qs, ds)):
            cut[i] = cut[i] or q_cut or d_cut
            query_ids[i, :len(q)] = torch.tensor(self.vocab.encode(q))
            doc_ids[i, :len(d)] = torch.tensor(self.vocab.encode(d))
            key = tuple(q)
            if key not in weights:
                weights[key] = [self.idf.positions(q, 0 if c.encoder == "contextual" else l) for l in range(c.levels + 1)]
            query_idf[i, :, :len(q)] = torch.tensor(weights[key])
            if c.external_features:
                overlap[i] = torch.tensor(OVERLAP_FEATURES[c.overlap_mode](q, d, self.idf, self.vocab))
        tensors |= {"query_ids": query_ids, "doc_ids": doc_ids, "query_idf": query_idf}
        return Batch(tensors | ({"overlap": overlap} if c.external_features else {}), sum(cut), pairs)

    # -- the network ----------------------------------------------------------------------------------------------
    def forward(self, query_ids: torch.Tensor, doc_ids: torch.Tensor, query_idf: torch.Tensor,
                overlap: torch.Tensor | None = None, query_trigrams: torch.Tensor | None = None,
                doc_trigrams: torch.Tensor | None = None, url_trigrams: torch.Tensor | None = None) -> torch.Tensor:
        """(B, n), (B, m), (B, N+1, n) [, (B, 4) overlap features] [, (B, n3) query, (B, m3) text, (B, u3) URL
        trigrams] -> (B, 2) log-probabilities of (non-relevant, relevant)."""
        c = self.config
        qmask, cmask = query_ids != 0, doc_ids != 0                         # (B, n), (B, m)
        qlen, clen = qmask.sum(1).cpu(), cmask.sum(1).cpu()
        uqs = self.encoder(self.embedding(query_ids), qmask, qlen)          # N+1 x (B, n, E|F)
        ucs = self.encoder(self.embedding(doc_ids), cmask, clen)            # N+1 x (B, m, E|F)
        features = []
        if not c.sm_only:
            features += [relevance_matching(uqs[l], ucs[l], qmask, cmask, query_idf[:, l], c) for l in range(c.levels + 1)]
        for branch, seq_ids in ((self.text_trigrams, doc_trigrams), (self.url_trigrams, url_trigrams)):
            if branch is not None:                                         # (B, (N+1) x 2 x L_3) each
                features.append(branch(self.trigram_embedding(query_trigrams), query_trigrams != 0,
                                       self.trigram_embedding(seq_ids), seq_ids != 0))
        if not c.rm_only:
            features += [sm(uqs[l], ucs[l], qmask, cmask, clen) for l, sm in enumerate(self.sm, 1)]
        if c.external_features:
            features.append(overlap)                                       # (B, 4)
        return F.log_softmax(self.classifier(torch.cat(features, 1)), 1)   # (B, 2)

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
        nll = F.nll_loss(output, (batch.labels > 0).long())
        return Loss(nll, {"nll": nll})

"""MRNN's inputs and caches, beside the network (network.py: the layers and the
equations, docs/models.md §2). `MRNNInputs` is a mixin of the model: everything here reads or fills the model's
own state (its vocabulary or tokenizer, its frozen BERT, its two memories) but computes none of the equations.

- Building: the vocabulary of the training texts (+ the table's first words) and its embedding matrix, or, for
  contextual features, a frozen BERT; the optional IDF weight of each input id (`idf_inputs`). Saved beside the
  weights (vocab.txt, or the BERT's folder).
- Pairs -> ids: each distinct query of a batch once (by qid), each pair's document, and which query each pair has.
  Words are cut to max_query_length / max_doc_length (contextual: "[CLS] pieces [SEP]" within the same limits);
  an empty text reads as one unknown word ([UNK]).
- Two memories (pipeline/rerank/memo.py), keyed by a text's ids with the padding dropped:
  `_features`: the frozen BERT's last-layer features of each distinct text, computed once for the whole run (the
  BERT never changes, so each epoch after the first reads them from memory);
  `_mra`: in evaluation, each distinct text's MRA (eqs. (1)-(4)), computed once: with BatchNorm's running
  statistics and the padding masked, it depends on that text alone, so reranking a query's top 100 costs the
  pair attention of eqs. (5)-(8), not 100 passes of the feature maps. It is forgotten at every train()/eval()
  (the weights change only in between) and, under `predict`, kept only until the last batch that needs it
  (`plan_batches`), so memory does not grow with the run.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch

from pipeline.log import logger
from pipeline.rerank.bert import (bert_from_assets, check_positions, load_bert, pad_rows, save_bert_assets,
                                  single_inputs)
from pipeline.rerank.memo import TextMemo, frozen_token_features
from pipeline.rerank.model import Batch, Pair
from pipeline.rerank.models.mrnn.config import CONTEXTUAL, MRNNConfig
from pipeline.rerank.text import IdfTable, Vocabulary, embedding_matrix, tokenize, word_table



def input_idf(token_lists: list[list[str]], ids: dict[str, int], size: int) -> torch.Tensor:
    """(size,) normalised IDF of each input id over the training texts (pipeline/rerank/text.py IdfTable); 1 else."""
    weights = torch.ones(size)
    for word, weight in IdfTable.build(token_lists, 1).tables[0].items():
        if word in ids:
            weights[ids[word]] = weight
    return weights


class MRNNInputs:
    """The MRNN model's building, saving, input ids and memories (see the module docstring). It expects of the
    model: `config`, `vocab`, `bert`, `tokenizer`, `_mra` and `multi_resolution(ids)` (eqs. (1)-(4))."""

    # -- building and saving -------------------------------------------------------------------------------------------
    @classmethod
    def from_training_data(cls, config: MRNNConfig, queries: list[str], docs: list[str], doc_fields=()):
        """Static tables: the vocabulary of the training texts (+ the table's first words) and its embeddings."""
        config.check()
        texts = list(dict.fromkeys([*queries, *docs]))
        if config.embeddings == CONTEXTUAL:
            model = cls(config)
            if config.keeps_idf():
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
        if config.keeps_idf():
            model.input_idf.copy_(input_idf(token_lists, vocab.ids, len(vocab)))
        return model

    def attach_frozen_bert(self) -> int:
        """Contextual inputs: the model's BERT (a checkpoint's) or else the config's, frozen, and the memory of its
        features; returns their width H."""
        if self.bert is None:
            self.bert, self.tokenizer = load_bert(self.config.bert)
        check_positions("mrnn", self.config, self.bert, ("max_query_length", "max_doc_length"))
        self.bert.requires_grad_(False).eval()                             # frozen token features
        self._features = TextMemo()                                        # word-piece row -> (pieces, H)
        return self.bert.config.hidden_size

    def save_assets(self, directory: Path) -> None:
        if self.bert is not None:
            save_bert_assets(self.bert, self.tokenizer, directory)
        else:
            self.vocab.save(Path(directory) / "vocab.txt")

    @classmethod
    def load_assets(cls, config: MRNNConfig, directory: Path):
        from pipeline.errors import CheckpointError

        if config.embeddings == CONTEXTUAL:
            return cls(config, None, None, *bert_from_assets(directory))
        path = Path(directory) / "vocab.txt"
        if not path.is_file():
            raise CheckpointError(path, "missing: MRNN's vocabulary")
        return cls(config, Vocabulary.load(path))

    def train(self, mode: bool = True):
        super().train(mode)
        self._mra.clear()                                                  # eval() too: predict() starts afresh
        if self.bert is not None:
            self.bert.eval()                                               # frozen: no dropout either
        return self

    # -- pairs -> ids --------------------------------------------------------------------------------------------------
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

    def pad_id(self) -> int:
        return self.tokenizer.pad_token_id if self.bert is not None else 0

    def real_positions(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, L) mask of the words (contextual: word pieces; [CLS], [SEP] and padding are not real)."""
        if self.bert is None:
            return ids != 0
        tok = self.tokenizer
        return (ids != tok.pad_token_id) & (ids != tok.cls_token_id) & (ids != tok.sep_token_id)

    def text_rows(self, ids: torch.Tensor) -> list[tuple[int, ...]]:
        """(K, L) padded ids -> each text's ids, padding dropped: the key of its remembered tensors."""
        pad = self.pad_id()
        return [tuple(row[row != pad].tolist()) for row in ids.cpu()]

    # -- the memories --------------------------------------------------------------------------------------------------
    def token_features(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, L) word-piece rows -> (B, L, H) frozen BERT last-layer features, computed once per distinct text
        (pipeline/rerank/memo.py frozen_token_features, shared with HCAN's contextual inputs)."""
        return frozen_token_features(self.bert, self.tokenizer.pad_token_id, self._features, ids)

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

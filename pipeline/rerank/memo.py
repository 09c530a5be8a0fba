"""A bounded memory of per-text tensors, for models that compute something once per distinct text at inference.

MRNN keeps each text's multi-resolution maps (and, with contextual inputs, its frozen BERT features): a top-100
rerank sees each passage many times. Unbounded, that memory grows with the collection (~265 MB for SQuAD dev's
2,067 paragraphs and 4,874 questions at s = 128); here the least recently used texts are dropped beyond
`max_bytes`, so a larger rerank recomputes instead of running out of memory, with the same scores.

A plan (`expect`: the rows of every lookup to come, in order, as `predict`'s batches will look them up) keeps a
text only until its last planned lookup, and a text looked up once not at all: the memory then holds the texts
still to be reused (a query whose candidates are still to come, a passage shared by queries), not every text
scored (eval/MRNN.md §3: without a plan, the texts of a 1M-candidate rerank would fill the whole bound). The plan
holds one 8-byte hash per planned lookup while it is counted, then the counts of the texts looked up more than
once; it lasts until `clear`.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Hashable, Iterable, Sequence

import numpy as np
import torch

DEFAULT_MAX_BYTES = 1 << 30  # 1 GiB: SQuAD dev's whole collection fits; MS MARCO-sized reranks stay bounded


class TextMemo:
    """Tensors keyed by a text's id row, least recently used first out beyond `max_bytes`."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES):
        self.max_bytes = max_bytes
        self._items: OrderedDict[Hashable, torch.Tensor] = OrderedDict()
        self._bytes = 0
        self._uses: dict[int, int] | None = None  # a plan: hash(row) -> lookups still to come (rows used twice or more)

    def expect(self, lookups: Iterable[Sequence[Hashable]]) -> None:
        """Plan the lookups to come (each one's rows, in order): a row is kept until its last one (see the module
        docstring)."""
        keys = np.fromiter((hash(row) for rows in lookups for row in dict.fromkeys(rows)), dtype=np.int64)
        unique, counts = np.unique(keys, return_counts=True)
        again = counts > 1
        self._uses = dict(zip(unique[again].tolist(), counts[again].tolist()))

    def lookup(self, rows: Sequence[Hashable],
               compute: Callable[[list[Hashable]], Iterable[torch.Tensor]]) -> list[torch.Tensor]:
        """The tensor of each row, `compute([row])` called for each row not remembered, one row at a time: a text
        computed in a padded batch of other texts gets other last bits (the kernels a batch's shape picks), so a
        remembered tensor would depend on which texts were missing with it, and a score on its neighbours."""
        found: dict[Hashable, torch.Tensor] = {}
        distinct = list(dict.fromkeys(rows))
        for row in distinct:
            if row in self._items:
                self._items.move_to_end(row)
                found[row] = self._items[row]
        for row in distinct:
            if row not in found:  # alone: its tensor is the text's, whichever texts are missing beside it
                (value,) = compute([row])
                found[row] = value.clone()  # its own storage: a view would keep a padded batch alive
                self._remember(row, found[row])
        if self._uses is not None:
            for row in distinct:
                self._used(row)
        return [found[row] for row in rows]

    def _used(self, row: Hashable) -> None:
        """Planned: one lookup of `row` done; after its last one it is forgotten."""
        key = hash(row)
        left = self._uses.get(key, 1) - 1
        if left > 0:
            self._uses[key] = left
            return
        self._uses.pop(key, None)
        if row in self._items:
            dropped = self._items.pop(row)
            self._bytes -= dropped.numel() * dropped.element_size()

    def _remember(self, row: Hashable, value: torch.Tensor) -> None:
        if self._uses is not None and self._uses.get(hash(row), 0) < 2:  # planned, and not looked up again
            return
        self._items[row] = value
        self._bytes += value.numel() * value.element_size()
        while self._bytes > self.max_bytes and len(self._items) > 1:
            _, dropped = self._items.popitem(last=False)
            self._bytes -= dropped.numel() * dropped.element_size()

    def clear(self) -> None:
        """Forget every text, and the plan."""
        self._items.clear()
        self._bytes = 0
        self._uses = None

    def items(self):
        return self._items.items()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def nbytes(self) -> int:
        return self._bytes


def frozen_token_features(bert, pad_id: int, memo: TextMemo, ids: torch.Tensor) -> torch.Tensor:
    """(B, L) word-piece rows ("[CLS] pieces [SEP]", padded with `pad_id`) -> (B, L, H) a frozen BERT's last-layer
    token states, computed once per distinct text (keyed by its ids without the padding) and kept in `memo`: the
    BERT never changes, so each epoch after the first reads them from memory. MRNN's and HCAN's contextual inputs."""
    from pipeline.rerank.bert import last_layer, pad_rows

    rows = [tuple(row[row != pad_id].tolist()) for row in ids.cpu()]

    def bert_features(missing: list[tuple[int, ...]]):  # one text at a time (TextMemo.lookup)
        piece_ids, attention = pad_rows([list(row) for row in missing], pad_id)
        with torch.no_grad():
            hidden = last_layer(bert, piece_ids.to(ids.device), attention.to(ids.device))  # (K, L, H)
        return [hidden[k, :len(row)].float().cpu() for k, row in enumerate(missing)]

    features = torch.zeros(*ids.shape, bert.config.hidden_size)
    for b, (row, value) in enumerate(zip(rows, memo.lookup(rows, bert_features))):
        features[b, :len(row)] = value                                                    # (L_b, H)
    return features.to(ids.device)

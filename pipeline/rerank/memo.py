"""A bounded memory of per-text tensors, for models that compute something once per distinct text at inference.

MRNN keeps each text's multi-resolution maps (and, with contextual inputs, its frozen BERT features): a top-100
rerank sees each passage many times. Unbounded, that memory grows with the collection (~265 MB for SQuAD dev's
2,067 paragraphs and 4,874 questions at s = 128); here the least recently used texts are dropped beyond
`max_bytes`, so a larger rerank recomputes instead of running out of memory, with the same scores.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Hashable, Iterable, Sequence

import torch

DEFAULT_MAX_BYTES = 1 << 30  # 1 GiB: SQuAD dev's whole collection fits; MS MARCO-sized reranks stay bounded


class TextMemo:
    """Tensors keyed by a text's id row, least recently used first out beyond `max_bytes`."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES):
        self.max_bytes = max_bytes
        self._items: OrderedDict[Hashable, torch.Tensor] = OrderedDict()
        self._bytes = 0

    def lookup(self, rows: Sequence[Hashable],
               compute: Callable[[list[Hashable]], Iterable[torch.Tensor]]) -> list[torch.Tensor]:
        """The tensor of each row, `compute(missing rows)` called once for the rows not remembered (in order)."""
        found: dict[Hashable, torch.Tensor] = {}
        for row in dict.fromkeys(rows):
            if row in self._items:
                self._items.move_to_end(row)
                found[row] = self._items[row]
        missing = [row for row in dict.fromkeys(rows) if row not in found]
        if missing:
            for row, value in zip(missing, compute(missing), strict=True):
                found[row] = value.clone()  # its own storage: a view would keep the whole padded batch alive
                self._remember(row, found[row])
        return [found[row] for row in rows]

    def _remember(self, row: Hashable, value: torch.Tensor) -> None:
        self._items[row] = value
        self._bytes += value.numel() * value.element_size()
        while self._bytes > self.max_bytes and len(self._items) > 1:
            _, dropped = self._items.popitem(last=False)
            self._bytes -= dropped.numel() * dropped.element_size()

    def clear(self) -> None:
        self._items.clear()
        self._bytes = 0

    def items(self):
        return self._items.items()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def nbytes(self) -> int:
        return self._bytes

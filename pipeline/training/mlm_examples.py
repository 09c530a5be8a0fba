"""The examples of `irpipe pretrain-mlm` (method: pipeline/training/mlm.py's docstring): masking by tokens or whole
jieba words, and `MaskedBatches`, which turns texts into seeded batches of masked sentences, or with `pairs` of
[CLS] A [SEP] B [SEP] pairs (B a noisy copy of A, `noisy_copy`, or another text, `SharedWords`). The loop that
trains on them: pipeline/training/pretrain.py.
"""
from __future__ import annotations

import torch

from pipeline.rerank.bert import pad_rows
from pipeline.training.mlm import SPECIALS, MLMOptions


def jieba_words(text: str) -> list[str]:
    from pipeline.retrieve.segment import default_segmenter

    return list(default_segmenter().cut(text))  # normalised text: NFKC keeps CJK positions


def token_words(offsets: list[tuple[int, int]], words: list[str]) -> list[int]:
    """The index in `words` (a text cut into words) of each token, by the token's first character (-1 past the end)."""
    owner = [index for index, word in enumerate(words) for _ in word]
    return [owner[s] if s < len(owner) else -1 for s, _ in offsets]


def word_groups(words: list[int]) -> dict[int, list[int]]:
    """Each word's token positions, in order, the words in order of first appearance."""
    groups: dict[int, list[int]] = {}
    for position, word in enumerate(words):
        groups.setdefault(word, []).append(position)
    return groups


def mask_tokens(ids: list[int], words: list[int], rate: float, vocab_size: int, mask_id: int, first_normal: int,
                generator: torch.Generator) -> tuple[list[int], list[int]]:
    """(inputs, labels) of one sentence's token ids: round(rate x tokens) tokens chosen by whole words in a random
    order (a word that would overshoot is skipped); labels are the original ids there and -100 elsewhere."""
    budget = max(1, round(rate * len(ids)))
    groups = word_groups(words)
    order = torch.randperm(len(groups), generator=generator).tolist()
    chosen: list[int] = []
    for key in (list(groups)[i] for i in order):
        if len(chosen) + len(groups[key]) <= budget:
            chosen += groups[key]
    inputs, labels = list(ids), [-100] * len(ids)
    for position in chosen:
        labels[position] = ids[position]
        draw = torch.rand(1, generator=generator).item()
        if draw < 0.8:
            inputs[position] = mask_id
        elif draw < 0.9:
            inputs[position] = int(torch.randint(first_normal, vocab_size, (1,), generator=generator))
    return inputs, labels


class MaskedBatches:
    """Token ids and word ids of every text (tokenized once); batches with fresh masks (and, for `pairs`, partners)
    from a seeded generator."""

    def __init__(self, texts: list[str], tokenizer, options: MLMOptions):
        encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, truncation=True,
                            max_length=options.max_length - 2)
        self.ids, offsets = encoded["input_ids"], encoded["offset_mapping"]
        cuts = [jieba_words(text) for text in texts] if options.whole_words or options.pairs else None
        self.words = ([token_words(o, cut) for o, cut in zip(offsets, cuts)] if options.whole_words
                      else [list(range(len(o))) for o in offsets])
        self.tokenizer, self.options = tokenizer, options
        self.keep = [i for i, ids in enumerate(self.ids) if ids]
        self.sharing = self.segments = None
        if options.pairs:  # a noisy copy drops and swaps jieba words, whatever the masking's unit
            self.segments = (self.words if options.whole_words
                             else [token_words(o, cut) for o, cut in zip(offsets, cuts)])
            self.sharing = SharedWords(cuts, self.keep)

    def batch(self, rows: list[int], generator: torch.Generator) -> dict[str, torch.Tensor]:
        if self.options.pairs:
            return self._pair_batch(rows, generator)
        inputs, labels = [], []
        for row in rows:
            masked, target = self._masked(self.ids[row], self.words[row], generator)
            inputs.append([self.tokenizer.cls_token_id, *masked, self.tokenizer.sep_token_id])
            labels.append([-100, *target, -100])
        ids, mask = pad_rows(inputs, self.tokenizer.pad_token_id)                          # (B, L) each
        return {"input_ids": ids, "labels": pad_rows(labels, -100)[0], "attention_mask": mask}

    def _masked(self, ids: list[int], words: list[int], generator: torch.Generator):
        tok = self.tokenizer
        return mask_tokens(ids, words, self.options.mask_rate, tok.vocab_size, tok.mask_token_id, len(SPECIALS),
                           generator)

    def _pair_batch(self, rows: list[int], generator: torch.Generator) -> dict[str, torch.Tensor]:
        """[CLS] A [SEP] B [SEP], both sides masked; pair_labels 1 where B is A's noisy copy, else 0."""
        tok, side = self.tokenizer, (self.options.max_length - 3) // 2
        inputs, labels, types, copies = [], [], [], []
        for row in rows:
            a, a_words = self.ids[row][:side], self.words[row][:side]
            draw = torch.rand(1, generator=generator).item()
            if draw < 0.5:
                order = noisy_copy(self.segments[row][:side], generator)
                b, b_words = [a[p] for p in order], [a_words[p] for p in order]
            else:
                other = self.sharing.partner(row, generator) if draw < 0.75 else None
                if other is None:
                    other = self.keep[int(torch.randint(len(self.keep), (1,), generator=generator))]
                b, b_words = self.ids[other][:side], self.words[other][:side]
            (masked_a, target_a), (masked_b, target_b) = self._masked(a, a_words, generator), self._masked(b, b_words, generator)
            inputs.append([tok.cls_token_id, *masked_a, tok.sep_token_id, *masked_b, tok.sep_token_id])
            labels.append([-100, *target_a, -100, *target_b, -100])
            types.append([0] * (len(a) + 2) + [1] * (len(b) + 1))
            copies.append(int(draw < 0.5))
        ids, mask = pad_rows(inputs, tok.pad_token_id)                                   # (B, L) each
        return {"input_ids": ids, "labels": pad_rows(labels, -100)[0], "attention_mask": mask,
                "token_type_ids": pad_rows(types, 0)[0], "pair_labels": torch.tensor(copies)}

    def epoch_order(self, epoch: int) -> list[int]:
        generator = torch.Generator().manual_seed(self.options.seed * 100003 + epoch)
        return [self.keep[i] for i in torch.randperm(len(self.keep), generator=generator).tolist()]


def noisy_copy(words: list[int], generator: torch.Generator, drop: float = 0.1, swap: float = 0.1) -> list[int]:
    """The positions of a noisy copy of a text whose tokens belong to `words`: each word dropped with probability
    `drop` (one at least kept), then each neighbouring pair of the kept words swapped with probability `swap`, left
    to right; a word's tokens stay together and in order."""
    groups = word_groups(words)
    kept = [key for key in groups if torch.rand(1, generator=generator).item() >= drop] or [next(iter(groups))]
    for i in range(len(kept) - 1):
        if torch.rand(1, generator=generator).item() < swap:
            kept[i], kept[i + 1] = kept[i + 1], kept[i]
    return [position for key in kept for position in groups[key]]


class SharedWords:
    """For each text (cut into jieba words), the other texts that share one of its words found in 2 to `most` texts:
    a partner that looks like A but is not A's copy."""

    def __init__(self, cuts: list[list[str]], rows: list[int], most: int = 2000):
        self.words = {row: sorted({w for w in cuts[row] if w.strip()}) for row in rows}
        postings: dict[str, list[int]] = {}
        for row in rows:
            for word in self.words[row]:
                postings.setdefault(word, []).append(row)
        self.postings = {w: r for w, r in postings.items() if 2 <= len(r) <= most}

    def partner(self, row: int, generator: torch.Generator) -> int | None:
        words = [w for w in self.words.get(row, ()) if w in self.postings]
        if not words:
            return None
        others = self.postings[words[int(torch.randint(len(words), (1,), generator=generator))]]
        pick = others[int(torch.randint(len(others) - 1, (1,), generator=generator))]
        return pick if pick != row else others[-1]

"""Keyword-attentive BERT's inputs, beside its network (network.py: the keyword
attention mask M of eq. (3) and the network, docs/models.md §4): from a pair's texts to "[CLS] A [SEP] B [SEP]" with
each word piece's side and keyword flag.

A text's keywords are the topic's (`Pair.query_fields["keywords"]`, from a `keywords()` stage before the reranker)
for A, else those of the model's diff-idf dictionary (`dict=NAME|FILE`, docs/models.md §4.1), else none. A word
piece is a keyword piece when it overlaps an occurrence of a keyword in its text: Chinese keywords are found as
substrings (NFKC, lower case), English ones as words whose analysed terms (Porter stems, as the dictionary holds
them) include the keyword. The side of a piece is SIDE_A or SIDE_B, OTHER for [CLS], [SEP] and padding.
"""
from __future__ import annotations

import functools
import re
import unicodedata

from pipeline.rerank.bert import pair_inputs, pair_lengths
from pipeline.rerank.model import Batch, Pair

OTHER, SIDE_A, SIDE_B = 0, 1, 2  # the `side` input: [CLS], [SEP] and padding, sentence A, sentence B


# -- keywords -> word pieces ------------------------------------------------------------------------------------------
def _fold(text: str) -> str:
    """NFKC and lower case, character by character (positions kept: a character that expands stays itself)."""
    return "".join(folded if len(folded := unicodedata.normalize("NFKC", c).lower()) == 1 else c for c in text)


@functools.lru_cache(maxsize=1 << 16)
def _english_terms(word: str) -> frozenset[str]:
    from pipeline.retrieve.keyword_dictionary import english_terms

    return frozenset(english_terms(word))


def keyword_spans(text: str, keywords: list[str], language: str) -> list[tuple[int, int]]:
    """Character spans of the keywords' occurrences in `text`: substrings (zh) or words with a keyword among their
    analysed terms (en)."""
    if not keywords:
        return []
    if language == "en":
        wanted = set(keywords)
        return [m.span() for m in re.finditer(r"\w+", text) if _english_terms(m.group()) & wanted]
    folded, spans = _fold(text), []
    for keyword in {_fold(k) for k in keywords if k}:
        spans += [(m.start(), m.start() + len(keyword)) for m in re.finditer(re.escape(keyword), folded)]
    return spans


def keyword_pieces(offsets: list[tuple[int, int]], spans: list[tuple[int, int]]) -> list[int]:
    """0/1 per word piece (its character `offsets`): 1 when it overlaps a keyword span."""
    return [int(any(start < end_k and start_k < end for start_k, end_k in spans)) for start, end in offsets]


# -- pairs -> the tensors of KeywordBERT.forward ----------------------------------------------------------------------
class KeywordInputs:
    """The keyword-BERT model's inputs: its keyword extractor (from `config.dict`, loaded on first use) and
    `prepare`. It expects of the model: `config`, `tokenizer` (a fast one: character offsets) and `_extractor`."""

    @property
    def language(self) -> str:
        if self.config.language:
            return self.config.language
        return self.extractor.dictionary.language if self.extractor else "zh"

    @property
    def extractor(self):
        if self._extractor is None and self.config.dict:
            from pipeline.retrieve.keywords import extractor_for

            self._extractor = extractor_for(self.config.dict)
        return self._extractor

    def keywords(self, text: str, given=None) -> list[str]:
        """A text's keywords: `given` (the topic's, from a keywords() stage), else the dictionary's, else none."""
        if given is not None:
            return list(given)
        return [k.word for k in self.extractor.keywords(text)] if self.extractor else []

    def _pieces(self, texts: list[str], keywords: list[list[str]]) -> tuple[list[list[int]], list[list[int]]]:
        """Word-piece ids of each text (no special tokens) and their 0/1 keyword flags."""
        encoded = self.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
        flags = [keyword_pieces(offsets, keyword_spans(text, words, self.language))
                 for text, words, offsets in zip(texts, keywords, encoded["offset_mapping"])]
        return encoded["input_ids"], flags

    def prepare(self, pairs: list[Pair]) -> Batch:
        """Ids, segments, mask, side (0 other, 1 A, 2 B) and keyword flags of "[CLS] A [SEP] B [SEP]", cut longest
        first to max_length and padded: (B, L) each."""
        a_ids, a_kw = self._pieces([p.query for p in pairs],
                                   [self.keywords(p.query, p.query_fields.get("keywords")) for p in pairs])
        b_ids, b_kw = self._pieces([p.text for p in pairs], [self.keywords(p.text) for p in pairs])
        sides = ([[SIDE_A] * len(a) for a in a_ids], [[SIDE_B] * len(b) for b in b_ids])   # OTHER (0) elsewhere
        tensors, truncated = pair_inputs(self.tokenizer, a_ids, b_ids, self.config.max_length, side=sides,
                                         keyword=(a_kw, b_kw))
        return Batch(tensors, truncated, pairs)

    def input_lengths(self, pairs: list[Pair]) -> list[int]:
        return pair_lengths(self.tokenizer, [p.query for p in pairs], [p.text for p in pairs], self.config.max_length)

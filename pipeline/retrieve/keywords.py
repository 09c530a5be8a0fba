"""Keyword extraction (keyword-BERT, Miao, Cao & Tam; docs/models.md §4.1) over the domain dictionaries of
pipeline/retrieve/keyword_dictionary.py: the keywords of a text, best first. The stages that use it,
`keywords(dict=...)` and keyword-augmented BM25 `bm25kw(dict=...)`, are in pipeline/stages/keywords.py.
"""

from __future__ import annotations

import functools

from pipeline.retrieve.keyword_dictionary import Keyword, KeywordDictionary, load_dictionary, word_splitter

# -- extraction -------------------------------------------------------------------------------------------------

class KeywordExtractor:
    """The keywords of any text: its words (jieba with the dictionary's words as units, or English terms) found
    in the dictionary, ranked by score. Results are memoised per text."""

    def __init__(self, dictionary: KeywordDictionary, max_keywords: int | None = None):
        self.dictionary, self.max_keywords = dictionary, max_keywords
        self.words = word_splitter(dictionary.language, (e.word for e in dictionary))
        self.keywords = functools.lru_cache(maxsize=1 << 16)(self._keywords)

    def _keywords(self, text: str) -> tuple[Keyword, ...]:
        return tuple(self.dictionary.lookup(self.words(text))[: self.max_keywords])

    def terms_keywords(self, terms: list[str]) -> tuple[Keyword, ...]:
        """Keywords among already analyzed terms (English: the index's own analysis of the query)."""
        return tuple(self.dictionary.lookup(terms)[: self.max_keywords])


def extractor_for(name_or_path: str, max_keywords: int | None = None) -> KeywordExtractor:
    """The extractor of a dictionary (preset or file), made once per loaded dictionary: a rewritten file gets a
    new one."""
    return _extractor(load_dictionary(name_or_path), max_keywords)


@functools.lru_cache(maxsize=16)
def _extractor(dictionary: KeywordDictionary, max_keywords: int | None) -> KeywordExtractor:
    return KeywordExtractor(dictionary, max_keywords)

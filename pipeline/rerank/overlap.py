"""Word-overlap scoring, the non-learned floor of answer selection (Yih et al. 2013's word count baselines).

score(q, d) = sum over distinct non-stopword query words w that occur in d of weight(w), where weight = 1
(`idf=false`, word overlap) or idf(w) = log(N / df(w)) over the N distinct candidate texts of the run being
reranked (`idf=true`, IDF-weighted overlap). Words: lower-cased \\w+ runs; stop words: Lucene's English set.
"""
from __future__ import annotations

import math
import re
from collections import Counter

from pipeline.errors import ConfigError
from pipeline.rerank.base import Reranker
from pipeline.rerank.pairs import Pair
from pipeline.stage import register

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET
STOP_WORDS = frozenset("a an and are as at be but by for if in into is it no not of on or such that the their then "
                       "there these they this to was will with".split())
_WORD = re.compile(r"\w+")


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS}


@register
class Overlap(Reranker):
    name = "overlap"

    def __init__(self, idf: bool = True, index: str | None = None):
        if not isinstance(idf, bool):
            raise ConfigError(f"overlap: idf={idf!r}; expected true or false", field="idf")
        self.idf, self.index = idf, index

    def config(self) -> dict:
        return {"idf": self.idf} | ({"index": self.index} if self.index else {})

    def score(self, pairs: list[Pair]) -> list[float]:
        queries, texts = [p.query for p in pairs], [p.text for p in pairs]
        document_words = {text: words(text) for text in texts}
        weight = lambda word: 1.0  # noqa: E731
        if self.idf:
            df = Counter(w for ws in document_words.values() for w in ws)
            total = len(document_words)
            weight = lambda word: math.log(total / df[word]) if df[word] else 0.0  # noqa: E731
        query_words = {query: words(query) for query in set(queries)}
        return [sum(weight(w) for w in query_words[q] & document_words[t]) for q, t in zip(queries, texts)]

"""The keyword stages (keyword-BERT, Miao, Cao & Tam; docs/models.md §4.2): `keywords(dict=...)` gives the stages after
it each query's keywords, and `bm25kw(dict=..., weight=w)` is keyword-augmented BM25.

Keyword-augmented retrieval: the query's terms plus its keywords appended (the paper's x1..xn, k1..km), so a
keyword counts once more -- or, weighted, w more: the BM25 query is the bag of index terms with weights
tf_query(t) + w * tf_keywords(t), searched in one Lucene call (LuceneIndex.search_terms). Keywords are analysed
by the index (a Chinese keyword becomes its CJK bigrams on a bigram index); English keywords are already index
terms. Both run on the ray engine as BM25 does (pipeline/stages/bm25.py).
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Callable

from pipeline.binding import Binding
from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.errors import ConfigError
from pipeline.log import progress
from pipeline.retrieve.keyword_dictionary import load_dictionary
from pipeline.retrieve.keywords import KeywordExtractor, extractor_for
from pipeline.stage import Stage
from pipeline.stages import register
from pipeline.stages.bm25 import BM25
from pipeline.validate import at_least


@register
class Keywords(Stage):
    """Attach each query's keywords (words, best first) to `topics.extra[qid]["keywords"]`, for the stages after
    it (e.g. a keyword-aware reranker). The one stage that writes to its input: Compose hands every stage the same
    Topics. The run passes through unchanged. To retrieve with keywords, use `bm25kw(dict=...)`."""

    name = "keywords"

    def __init__(self, dict: str, max_keywords: int | None = None):  # noqa: A002  (the spec's `dict=` name)
        at_least(self.name, "max_keywords", max_keywords, 1, integer=True, optional=True)
        self.dict, self.max_keywords = str(dict), max_keywords

    def config(self) -> dict:
        return {"dict": self.dict} | ({"max_keywords": self.max_keywords} if self.max_keywords else {})

    def resolve(self, binding: Binding) -> None:
        self._keywords = extractor_for(self.dict, self.max_keywords)  # the dictionary, read (or built) once

    def transform(self, topics: Topics, run: Run | None) -> Run:
        return run if run is not None else Run({}, tag=self.name)

    def annotate(self, topics: Topics) -> Topics:
        """New topics: each query's extra fields plus "keywords" (the given topics are left as they are)."""
        extra = {qid: {**topics.extra.get(qid, {}), "keywords": [k.word for k in self._keywords.keywords(text)]}
                 for qid, text in topics.items()}
        return Topics(dict(topics.queries), extra)


@register
class BM25KW(BM25):
    """Keyword-augmented BM25: each query is its index terms plus its keywords with weight `weight` (1: the
    keywords appended once, the paper's x1..xn, k1..km). Batched and multi-threaded like `bm25`; `max_keywords`
    appends only the best few."""

    name = "bm25kw"

    def __init__(self, dict: str, weight: float = 1.0, index: str | Path | None = None,  # noqa: A002
                 k1: float = 0.9, b: float = 0.4, hits: int = 1000, threads: int = 1, language: str | None = None,
                 segment: str | None = None, max_keywords: int | None = None):
        super().__init__(index, k1, b, hits, threads, language=language, segment=segment)
        at_least(self.name, "weight", weight, 0)
        at_least(self.name, "max_keywords", max_keywords, 1, integer=True, optional=True)
        self.dict, self.weight, self.max_keywords = str(dict), float(weight), max_keywords

    def config(self) -> dict:
        extra = {"max_keywords": self.max_keywords} if self.max_keywords else {}
        return {"dict": self.dict, "weight": self.weight, **extra, **super().config()}

    def fingerprint(self) -> str:
        return super().fingerprint() + "|" + load_dictionary(self.dict).digest()

    def _extractor(self, index) -> KeywordExtractor:
        extractor = extractor_for(self.dict, self.max_keywords)
        language = extractor.dictionary.language
        if (language == "en") != (index.language == "en") or (language == "en" and index.segmenter):
            raise ConfigError(f"the {self.dict} keyword dictionary is {language}, but the index {index.path} is "
                              f"{index.language}{' (' + index.segmenter + ')' if index.segmenter else ''}: "
                              "use a dictionary in the index's language")
        return extractor

    def weigher(self, index) -> Callable[[str], dict[str, float]]:
        """English: text -> {index term: tf in the query + weight * [term is a keyword]}. The keywords are the
        query's own analyzed terms found in the dictionary (Porter stems: they are not analyzed again)."""
        extractor, weight = self._extractor(index), self.weight
        # English analysis never joins across whitespace (StandardTokenizer; per-token filters), so the terms of
        # a text are those of its words one by one: memoised per word, most queries need no Java call.
        word_terms = index.analyze_cached

        def weigh(text: str) -> dict[str, float]:
            terms = [term for word in text.split() for term in word_terms(word)]
            weights: dict[str, float] = Counter(terms)
            for keyword in extractor.terms_keywords(terms):
                weights[keyword.word] += weight
            return weights

        return weigh

    def splitter(self, index) -> Callable[[str], list[tuple[str, float]]]:
        """Chinese: text -> [(text, 1), (its keywords, space-separated, weight)]; the index analyzes both (CJK
        bigrams, or jieba words), so each keyword adds `weight` to each of its index terms."""
        extractor, weight = self._extractor(index), self.weight

        def split(text: str) -> list[tuple[str, float]]:
            keywords = extractor.keywords(text)
            return [(text, 1.0), (" ".join(k.word for k in keywords), weight)] if keywords else [(text, 1.0)]

        return split

    def resolve(self, binding: Binding) -> None:
        super().resolve(binding)
        if self._lucene is not None:
            self._extractor(self._lucene)  # a dictionary in another language than the index's is refused here

    def run_tag(self) -> str:
        return "bm25kw"

    def rankings(self, index, topics: Topics) -> dict[str, list[tuple[str, float]]]:
        with progress(desc=self.name, total=len(topics), unit="q") as bar:
            if index.language == "en" and index.segmenter is None:
                return index.search_many_terms(topics.queries, self.weigher(index), self.hits, self.k1, self.b,
                                               self.threads, progress=bar)
            return index.search_many_texts(topics.queries, self.splitter(index), self.hits, self.k1, self.b,
                                           self.threads, progress=bar)

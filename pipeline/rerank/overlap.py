"""Word-overlap scoring, the non-learned floor of answer selection (Yih et al. 2013's word count baselines).

score(q, d) = sum over distinct non-stopword query words w that occur in d of weight(w), where weight = 1
(`idf=false`, word overlap) or idf(w) = log(N / df(w)) (`idf=true`, IDF-weighted overlap), a word the statistics
do not know (df 0) weighing 0. Words: lower-cased \\w+ runs; stop words: Lucene's English set.

N and df are the collection's, fixed when the stage is bound (`WordStatistics`), so that a pair's score depends on
the query, the candidate and the collection only -- never on which other queries are scored with it (before
2026-12-02 they were counted over the candidates of the batch given: CACM's README pipeline scored AP 0.2249 whole
and 0.2206 through pt.Experiment with batch_size=8). Which collection (pipeline/stages/rerank.py `Overlap`):
- an index (`overlap(index=DIR)`, or the dataset's own for a dataset that ships no candidates with texts, such as
  CACM): the index's N (documents) and df of the word's index term (the word analysed by the index's analyzer,
  Porter-stemmed on an English index; a word analysed into several terms takes the rarest one's df);
- a dataset that ships its candidates with texts (TrecQA, WikiQA, DL19/DL20's BM25 top-100): a table over the N
  distinct candidate texts of the whole dataset split, the pool that a run over all its queries had;
- neither (a stage called on a run without a dataset): a table over the distinct texts of the run it is bound to.
The stage's cache fingerprint names the source (`WordStatistics.source`). The stage is in pipeline/stages/rerank.py.
"""
from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from typing import Callable, Iterable


# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET
STOP_WORDS = frozenset("a an and are as at be but by for if in into is it no not of on or such that the their then "
                       "there these they this to was will with".split())
_WORD = re.compile(r"\w+")


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS}


class WordStatistics:
    """N and df(word) of a collection, fixed once: idf(w) = log(N / df(w)), 0 for a word of df 0. `source` names
    the collection (the stage cache's fingerprint); `frequency(word)` gives a word's df, asked once a word."""

    def __init__(self, documents: int, frequency: Callable[[str], int], source: str):
        self.documents, self.source = documents, source
        self._frequency, self._idf = frequency, {}

    @classmethod
    def of_texts(cls, texts: Iterable[str], name: str) -> "WordStatistics":
        """A table over the distinct `texts` (a dataset's candidates), by `words`; `name` says whose they are."""
        distinct = sorted(set(texts))
        df = Counter(w for text in distinct for w in words(text))
        digest = hashlib.sha1("\x1e".join(distinct).encode()).hexdigest()
        return cls(len(distinct), df.__getitem__, f"table over the {len(distinct)} distinct candidate texts of "
                                                  f"{name} (sha1 {digest})")

    @classmethod
    def of_index(cls, index, digest: str) -> "WordStatistics":
        """An opened Lucene index's (pipeline/retrieve/lucene.py `LuceneIndex`) N and df of each word's term;
        `digest` identifies the index (its content digest, pipeline/data/digests.py)."""
        def frequency(word: str) -> int:
            terms = index.analyze_cached(word)
            return min(index.doc_freq(term) for term in terms) if terms else 0

        return cls(index.num_docs, frequency, f"the df and N of the index {digest}")

    def idf(self, word: str) -> float:
        if word not in self._idf:
            df = self._frequency(word)
            self._idf[word] = math.log(self.documents / df) if df else 0.0
        return self._idf[word]


def overlap_scores(queries: list[str], texts: list[str], statistics: WordStatistics | None = None) -> list[float]:
    """The overlap score of each (query, text): IDF-weighted by `statistics` (the collection's), else 1 a word."""
    weight = statistics.idf if statistics is not None else (lambda word: 1.0)
    document_words = {text: words(text) for text in set(texts)}
    query_words = {query: words(query) for query in set(queries)}
    # fsum: a set's order follows the per-process string hash, and a plain float sum's last bit with it (ties)
    return [math.fsum(weight(w) for w in query_words[q] & document_words[t]) for q, t in zip(queries, texts)]


# -- the four overlap features of HCAN's `external_features` (the authors' code option --ext) --------------------

def code_overlap_features(query: list[str], doc: list[str], idf, vocab) -> list[float]:
    """The authors' compute_overlap_feat (jinfengr/hcan data_preprocess.py): over the query's positions, the share of
    in-vocabulary words found in the candidate, the same weighted by unigram IDF, the share of query bigrams found
    among the candidate's bigrams (over max(words - 1, 1)) and the same weighted by bigram IDF (over at least 0.01);
    an n-gram without an IDF weighs 1.0, as there. `idf`: the model's IdfTable, `vocab`: its Vocabulary."""
    words, bigrams = set(doc), set(zip(doc, doc[1:]))
    match = idf_match = bigram_match = bigram_idf_match = total_words = total_idf = total_bigram_idf = 0.0
    for j, word in enumerate(query):
        if j > 0:
            weight = idf.weight(f"{query[j - 1]} {word}", 2)
            total_bigram_idf += weight
            if (query[j - 1], word) in bigrams:
                bigram_match, bigram_idf_match = bigram_match + 1, bigram_idf_match + weight
        if word in vocab:  # the code skips unknown (OOV) query words
            weight = idf.weight(word, 1)
            total_words, total_idf = total_words + 1, total_idf + weight
            if word in words:
                match, idf_match = match + 1, idf_match + weight
    return [match / total_words if total_words else 0.0, idf_match / total_idf if total_idf else 0.0,
            bigram_match / max(total_words - 1, 1), bigram_idf_match / max(total_bigram_idf, 0.01)]


def stopword_overlap_features(query: list[str], doc: list[str], idf, vocab=None) -> list[float]:
    """Our earlier reading of --ext (Yu et al. 2014, Severyn & Moschitti 2015): the share of the query's distinct
    words, and of their unigram IDF mass, found in the candidate, over all words and over non-stop words."""
    found, features = set(doc), []
    for distinct in (set(query), set(query) - STOP_WORDS):
        for weight in ((lambda w: 1.0), (lambda w: idf.weight(w, 1))):
            total = math.fsum(weight(w) for w in distinct)                 # fsum: order-free, as above
            features.append(math.fsum(weight(w) for w in distinct & found) / total if total > 0 else 0.0)
    return features


OVERLAP_FEATURES = {"code": code_overlap_features, "stopwords": stopword_overlap_features}

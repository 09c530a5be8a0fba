"""Word-overlap scoring, the non-learned floor of answer selection (Yih et al. 2013's word count baselines).

score(q, d) = sum over distinct non-stopword query words w that occur in d of weight(w), where weight = 1
(`idf=false`, word overlap) or idf(w) = log(N / df(w)) over the N distinct candidate texts of the run being
reranked (`idf=true`, IDF-weighted overlap). Words: lower-cased \\w+ runs; stop words: Lucene's English set.
The stage `overlap(idf=...)` is in pipeline/stages/rerank.py.
"""
from __future__ import annotations

import math
import re
from collections import Counter


# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET
STOP_WORDS = frozenset("a an and are as at be but by for if in into is it no not of on or such that the their then "
                       "there these they this to was will with".split())
_WORD = re.compile(r"\w+")


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS}


def overlap_scores(queries: list[str], texts: list[str], idf: bool = True) -> list[float]:
    """The overlap score of each (query, text): IDF-weighted over the distinct `texts` given (`idf`), else 1 a word."""
    document_words = {text: words(text) for text in texts}
    weight = lambda word: 1.0  # noqa: E731
    if idf:
        df = Counter(w for ws in document_words.values() for w in ws)
        total = len(document_words)
        weight = lambda word: math.log(total / df[word]) if df[word] else 0.0  # noqa: E731
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

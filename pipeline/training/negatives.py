"""Sampled training negatives for any model (`negatives=keyword|random`; keyword-BERT's rule, docs/models.md §4.3).

The labelled positives of the training data are kept; each query's labelled negatives are replaced by
`per_positive` x (its positives) sampled ones from the pool of the data's texts (every query and candidate text):

- random: drawn uniformly from the pool (not the query's own text nor a positive's), the paper's comparison;
- keyword: the pool searched with the keyword-augmented query (its words, then its keywords once more: the
  paper's x1..xn, k1..km) by BM25 (k1 0.9, b 0.4, Lucene's idf) over the dictionary's words; candidate Q is a
  negative of q when both
      Sim(q, Q) / Sim(q, q) < α        Sim = that BM25 score; Sim(q, q) = q's score against itself as a document
      (|K_q ∪ K_Q| - |K_q ∩ K_Q|) / |K_q ∪ K_Q| > β   K = the texts' dictionary keywords (no keyword on either
                                                         side counts as no overlap: ratio 1)
  taken best BM25 score first among the top `depth` hits (hard negatives: close in words, apart in keywords);
- keyword replacement (either mode, `replace_ratio` of the queries that have a keyword): q with one of its
  keywords swapped for another keyword of the same dictionary domain is one more negative of q.

The pool is small (the training data's own texts), so BM25 runs here in memory rather than through a Lucene
index: the self-score Sim(q, q) needs a score of a text that need not be in any index.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import torch

from pipeline.errors import ConfigError
from pipeline.log import logger, progress
from pipeline.training.options import SAMPLED



@dataclass(frozen=True)
class NegativeSampling:
    mode: str                 # keyword | random
    per_positive: int = 1
    dictionary: str = ""      # keyword dictionary (preset or TSV): keyword mode and replacement
    alpha: float = 0.6
    beta: float = 0.2
    replace_ratio: float = 0.0
    depth: int = 100
    seed: int = 0

    @classmethod
    def of(cls, options) -> "NegativeSampling | None":
        """The sampling of TrainOptions (None for labelled / bm25 negatives)."""
        if options.negatives not in SAMPLED:
            return None
        if (options.negatives == "keyword" or options.replace_ratio > 0) and not options.negatives_dict:
            raise ConfigError(f"negatives={options.negatives} with keywords needs negatives_dict=NAME|FILE (a keyword "
                              "dictionary: thucnews, insuranceqa-zh, squad-dev or a .tsv)", field="negatives_dict")
        return cls(options.negatives, options.negatives_per_positive, options.negatives_dict, options.alpha,
                   options.beta, options.replace_ratio, options.depth, options.seed)


class PoolBM25:
    """BM25 over a small pool of word lists, scoring a weighted query against any word list (in the pool or not)."""

    def __init__(self, docs: list[list[str]], k1: float = 0.9, b: float = 0.4):
        self.k1, self.b = k1, b
        self.tf = [Counter(words) for words in docs]
        self.lengths = [len(words) for words in docs]
        self.average = sum(self.lengths) / max(1, len(docs))
        self.postings: dict[str, list[int]] = {}
        for index, tf in enumerate(self.tf):
            for term in tf:
                self.postings.setdefault(term, []).append(index)

    def idf(self, term: str) -> float:
        df, n = len(self.postings.get(term, ())), len(self.tf)
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def score(self, query: Counter, tf: Counter, length: int) -> float:
        norm = self.k1 * (1 - self.b + self.b * length / self.average)
        return sum(weight * self.idf(t) * tf[t] * (self.k1 + 1) / (tf[t] + norm) for t, weight in query.items() if t in tf)

    def search(self, query: Counter, depth: int) -> list[tuple[int, float]]:
        """The top `depth` pool documents (index, score), best first (ties: lower index first)."""
        hits = {i for term in query for i in self.postings.get(term, ())}
        scored = sorted(((i, self.score(query, self.tf[i], self.lengths[i])) for i in hits), key=lambda h: (-h[1], h[0]))
        return scored[:depth]


def non_overlap(a: set[str], b: set[str]) -> float:
    """(|A ∪ B| - |A ∩ B|) / |A ∪ B|; 1 when both are empty (nothing shared)."""
    union = a | b
    return (len(union) - len(a & b)) / len(union) if union else 1.0


def replace_keyword(text: str, keywords: list[str], domain_words: dict[str, list[str]], domains: dict[str, str],
                    generator: torch.Generator) -> str | None:
    """`text` with one of its keywords (drawn) replaced by another word of that keyword's domain (drawn), or None
    when no keyword occurs in the text as written or its domain has no other word."""
    present = [k for k in keywords if k in text]
    if not present:
        return None
    keyword = present[int(torch.randint(len(present), (1,), generator=generator))]
    others = [w for w in domain_words[domains[keyword]] if w != keyword and w not in text]
    if not others:
        return None
    return text.replace(keyword, others[int(torch.randint(len(others), (1,), generator=generator))], 1)


def sample_negatives(examples, sampling: NegativeSampling):
    """`examples` (pipeline/training/examples.py) with each query's negatives replaced by sampled ones."""
    generator = torch.Generator().manual_seed(sampling.seed)
    pool_ids: dict[str, str] = {}  # text -> docid
    for docid, text in examples.texts.items():
        pool_ids.setdefault(text, docid)
    for qid, text in examples.queries.items():
        pool_ids.setdefault(text, f"query:{qid}")
    pool = list(pool_ids)
    texts = {docid: text for text, docid in pool_ids.items()} | dict(examples.texts)
    extractor = words = index = None
    if sampling.dictionary:
        from pipeline.retrieve.keyword_dictionary import word_splitter
        from pipeline.retrieve.keywords import extractor_for

        extractor = extractor_for(sampling.dictionary)
        words = word_splitter(extractor.dictionary.language, (e.word for e in extractor.dictionary))
        keywords_of = lambda text: [k.word for k in extractor.keywords(text)]  # noqa: E731
        domains = {entry.word: entry.domain for entry in extractor.dictionary}
        domain_words: dict[str, list[str]] = {}
        for entry in extractor.dictionary:
            domain_words.setdefault(entry.domain, []).append(entry.word)
    if sampling.mode == "keyword":
        pool_words = [words(text) for text in progress(pool, desc="negatives: pool words", unit="text")]
        index = PoolBM25(pool_words)
    labels, made = {}, Counter()
    for qid, docs in progress(examples.labels.items(), desc=f"negatives: {sampling.mode}", unit="q"):
        positives = [d for d, label in docs.items() if label > 0]
        labels[qid] = {d: 1 for d in positives}
        if not positives:
            continue
        query, wanted = examples.queries[qid], sampling.per_positive * len(positives)
        excluded = {query} | {examples.texts[d] for d in positives}
        if sampling.mode == "random":
            chosen = []
            while len(chosen) < wanted and len(excluded) < len(pool):
                text = pool[int(torch.randint(len(pool), (1,), generator=generator))]
                if text not in excluded and text not in chosen:
                    chosen.append(text)
        else:
            own = words(query)
            augmented = Counter(own) + Counter(w for k in keywords_of(query) for w in words(k))
            self_score = index.score(augmented, Counter(own), len(own))
            mine, chosen = set(keywords_of(query)), []
            for i, score in index.search(augmented, sampling.depth) if self_score > 0 else ():
                text = pool[i]
                if len(chosen) == wanted:
                    break
                if (text not in excluded and score / self_score < sampling.alpha
                        and non_overlap(mine, set(keywords_of(text))) > sampling.beta):
                    chosen.append(text)
        labels[qid].update({pool_ids[text]: 0 for text in chosen})
        made[sampling.mode] += len(chosen)
        if extractor is not None and sampling.replace_ratio > 0 and keywords_of(query):
            if torch.rand(1, generator=generator).item() < sampling.replace_ratio:
                replaced = replace_keyword(query, keywords_of(query), domain_words, domains, generator)
                if replaced is not None:
                    texts[f"{qid}:replaced"] = replaced
                    labels[qid][f"{qid}:replaced"] = 0
                    made["replaced"] += 1
    logger.info("sampled negatives: %s", dict(made))
    labels = {qid: docs for qid, docs in labels.items() if docs}
    used = {d for docs in labels.values() for d in docs}
    return type(examples)(dict(examples.queries), {d: texts[d] for d in used}, labels, dict(examples.query_fields))


"""Searching a Lucene index exactly as Pyserini does, without paying a Python crossing per hit or per query.

Pyserini's `batch_search` returns one Java object per hit and reads each hit's stored document in Java and its
docid and score through JNI from Python (~20 us per hit: 52 queries/s at 1,000 hits on CACM). We run the same
Lucene search -- Anserini's `BagOfWordsQueryGenerator` query over the searcher's analyzer, BM25Similarity(k1, b),
sorted by score then by the `id` doc-values field (Anserini's BREAK_SCORE_TIES_BY_DOCID) -- for a whole batch of
queries in ONE call, on Java threads (pipeline/retrieve/java_batch.py): each query's hits come back as one string
of scores and docids, the docid being the sort field's bytes, so no stored field is read. Then we apply Anserini's
ScoreTiesAdjusterReranker (scores rounded to 1e-4, ties perturbed by 1e-6), which makes the run identical to
`python -m pyserini.search.lucene` with the same settings.

RM3 needs Anserini's feedback cascade: SimpleSearcher.search (what Pyserini's CLI calls per query) runs in the
same one-call batches.

Weighted queries (`search_terms`: term -> boost, e.g. a query with its keywords boosted) are built in Java too: the
terms, escaped, go to Lucene's classic QueryParser over a whitespace analyzer as `t1^w1 t2^w2 ...` -- which gives
the BooleanQuery of SHOULD BoostQuery(TermQuery) clauses that BagOfWordsQueryGenerator would build from counts --
and the search and read-back are the same as above. Indexes built from jieba-segmented text (metadata
`"segmenter": "jieba"`) are searched with queries segmented the same way (pipeline/retrieve/segment.py).
"""
from __future__ import annotations

import contextlib
import functools
import json
import re
import threading
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence, TypeVar

import numpy as np

from pipeline import java
from pipeline.retrieve import java_batch
from pipeline.data.files import INDEX_METADATA, read_index_metadata
from pipeline.errors import IrpipeError, MissingResourceError

_QUERY_SYNTAX = re.compile(r'([+\-!(){}\[\]^"~*?:\\/&|])')
_OPERATOR = re.compile(r"(?<!\S)(AND|OR|NOT)(?!\S)")  # QueryParser's operators; every analyzer lower-cases them
SEGMENTERS = ("jieba",)
HIT, FIELD = "\x1e", "\x1f"  # a query's hits come back as one string: score FIELD docid HIT score FIELD docid ...
HITS_PER_CALL = 1 << 18  # a batch's hits, rendered at ~80 characters each: ~20 MB of text per JNI call
T = TypeVar("T")


def escape_term(term: str) -> str:
    """`term` in classic QueryParser syntax (Lucene's QueryParser.escape): parses back to exactly that term."""
    return _QUERY_SYNTAX.sub(r"\\\1", term)


def boosted_texts_string(parts: Sequence[tuple[str, float]]) -> str:
    """`(text1) (text2)^0.5 ...` for QueryParser over the index's analyzer: texts escaped, operators lower-cased."""
    clauses = []
    for text, weight in parts:
        text = _OPERATOR.sub(lambda match: match.group().lower(), escape_term(text)).strip()
        if weight > 0 and text:
            clauses.append(f"({text})" if weight == 1 else f"({text})^{weight:.6f}")
    return " ".join(clauses)


@functools.lru_cache(maxsize=1 << 16)
def _clause(term: str, weight: float) -> str:
    if not term or any(c.isspace() for c in term):
        return ""
    return escape_term(term) if weight == 1 else f"{escape_term(term)}^{weight:.6f}"


def boosted_query_string(weights: Mapping[str, float]) -> str:
    """`t1 t2^0.5 ...` for QueryParser: terms with a positive weight, boosts to 1e-6 (1 is left implicit)."""
    return " ".join(filter(None, (_clause(term, weight) for term, weight in weights.items() if weight > 0)))


def adjust_score_ties(scores: np.ndarray, starts: Sequence[int] = ()) -> np.ndarray:
    """Anserini 1.7.1's ScoreTiesAdjusterReranker, with the Java original's exact arithmetic.

    Each score is rounded to 1e-4 in double precision (`(float) (Math.round((double) s * 1e4) / 1e4)`, read off
    the jar's bytecode); a score within 1e-4f of the previous one is a tie and is lowered by 1e-6f per tie in the
    streak (float32 arithmetic), so the printed order equals the sort order. `scores` may hold several queries'
    hits one after another, each query's first hit at an index in `starts`: a streak never crosses into a query.
    """
    scores = np.asarray(scores, dtype=np.float32).astype(np.float64)
    out = (np.floor(scores * 1e4 + 0.5) / 1e4).astype(np.float32)
    limit, step = np.float32(1e-4), np.float32(1e-6)
    first = np.zeros(len(out), dtype=bool)
    first[[start for start in starts if 0 < start < len(out)]] = True
    # A tie whatever the adjustment of the previous score (that only lowers it), never a query's first hit. A run
    # of consecutive ties is a streak whose j-th score is lowered by j * 1e-6; a lowered last score may make the
    # next score a tie too, which extends the streak (and may join it to the next one). Each pass lowers every
    # streak and adds the scores its lowering made ties; the last pass adds none.
    ties = np.flatnonzero((out[:-1] - out[1:] <= limit) & ~first[1:]) + 1
    while len(ties):
        position = np.arange(len(ties))
        starts_streak = np.ones(len(ties), dtype=bool)
        starts_streak[1:] = ties[1:] != ties[:-1] + 1
        streak = np.cumsum(starts_streak) - 1
        dup = (position - np.flatnonzero(starts_streak)[streak] + 1).astype(np.float32)
        lowered = out[ties] - step * dup
        last = np.flatnonzero(np.append(starts_streak[1:], True))  # each streak's last tie
        after = ties[last] + 1
        extends = after < len(out)
        last, after = last[extends], after[extends]
        extends = ~first[after] & (lowered[last] - out[after] <= limit)
        if not extends.any():
            out[ties] = lowered
            break
        ties = np.union1d(ties, after[extends])
    return out


def _hit_renderer(score, docid):
    """hit -> score FIELD docid (one string), from a handle for each part."""
    concat = java_batch.virtual("java.lang.String", "concat", "java.lang.String", "java.lang.String")
    return java_batch.both(concat, score, java_batch.then(docid, java_batch.bind(concat, 0, FIELD)))


_DAMAGED = "it is damaged or incomplete: rebuild it with `irpipe index ... --overwrite`"


def _open_reader(path: Path):
    """Lucene's DirectoryReader over the index folder `path` (inside `java.java_errors`)."""
    directory = java.autoclass("org.apache.lucene.store.FSDirectory").open(
        java.autoclass("java.nio.file.Paths").get(str(path)))
    return java.autoclass("org.apache.lucene.index.DirectoryReader").open(directory)


@contextlib.contextmanager
def held_documents(index_dir: str | Path) -> Iterator[tuple[int, Callable[[str], bool]]]:
    """(how many documents the index holds, holds(docid): whether it holds that id, one term lookup), the index
    closed after the block: for checking a build (pipeline/retrieve/index.py), not for search."""
    with java.java_errors(f"cannot open the Lucene index {index_dir}", _DAMAGED):
        reader = _open_reader(Path(index_dir).absolute())  # Java's own working folder may differ from Python's
    term = java.autoclass("org.apache.lucene.index.Term")
    try:
        yield reader.numDocs(), lambda docid: reader.docFreq(term("id", docid)) > 0
    finally:
        reader.close()


class LuceneIndex:
    """An opened Lucene index (Anserini layout): analyzer, reader and one IndexSearcher per (k1, b)."""

    def __init__(self, index_dir: str | Path, language: str | None = None):
        self.path = Path(index_dir)
        if not (self.path.is_dir() and any(self.path.glob("segments_*"))):
            raise MissingResourceError(
                f"no Lucene index at {self.path}: build one with `irpipe index --input CORPUS --output {self.path}` "
                "(or `irpipe index --dataset NAME --output DIR`)")
        self.metadata = read_index_metadata(self.path)
        self.language = language or self.metadata.get("language", "en")
        self._lock = threading.Lock()
        self._simple_searcher = None  # Anserini's SimpleSearcher, for stored documents and other languages only
        self._term = None  # Lucene's Term class, loaded on first use (doc_freq)
        with java.java_errors(f"cannot open the Lucene index {self.path}", _DAMAGED):
            # SimpleSearcher's analyzers, without SimpleSearcher: loading that class costs ~1.4 s and its
            # constructor ~0.5 s, more than a thousand 10-hit CACM queries (2026-11-27)
            if self.metadata.get("pretokenized"):
                self._analyzer = java.autoclass("org.apache.lucene.analysis.core.WhitespaceAnalyzer")()
            elif self.language == "en":
                self._analyzer = java.autoclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()
            else:
                self._simple.set_language(self.language)
                self._analyzer = self._simple.get_analyzer()
            self._query_generator = java.autoclass("io.anserini.search.query.BagOfWordsQueryGenerator")()
            self._analyze = java.autoclass("io.anserini.analysis.AnalyzerUtils").analyze
            self._list_to_string = java.autoclass("java.util.Objects").toString
            self._reader = _open_reader(self.path)
            sort_field = java.autoclass("org.apache.lucene.search.SortField")
            by_id = sort_field("id", java.autoclass("org.apache.lucene.search.SortField$Type").STRING_VAL)
            self._sort = java.autoclass("org.apache.lucene.search.Sort")(sort_field.FIELD_SCORE, by_id)
        self._searchers: dict[tuple[float, float], object] = {}
        self.segmenter = self.metadata.get("segmenter")  # "jieba": the stored text was segmented in Python
        if self.segmenter is not None and self.segmenter not in SEGMENTERS:
            raise MissingResourceError(f"{self.path}: unknown segmenter {self.segmenter!r} in {INDEX_METADATA}; "
                                       f"known: {', '.join(SEGMENTERS)}")
        self._batches: dict[tuple, java_batch.BatchFunction] = {}  # (kind, k, k1, b) -> its search, see `_batch`
        # `analyze` memoised: for words and short texts that repeat (keywords, English query words)
        self.analyze_cached = functools.lru_cache(maxsize=1 << 17)(self.analyze)

    @property
    def _simple(self):
        """Anserini's SimpleSearcher over this index, opened on first use."""
        with self._lock:
            if self._simple_searcher is None:
                self._simple_searcher = java.autoclass("io.anserini.search.SimpleSearcher")(str(self.path))
            return self._simple_searcher

    @property
    def num_docs(self) -> int:
        return self._reader.numDocs()

    def doc_freq(self, term: str) -> int:
        """How many documents hold the index term `term` (an analysed term, e.g. from `analyze`) in `contents`."""
        if self._term is None:
            self._term = java.autoclass("org.apache.lucene.index.Term")
        return self._reader.docFreq(self._term("contents", term))

    def _searcher(self, k1: float, b: float):
        with self._lock:
            key = (float(k1), float(b))
            if key not in self._searchers:
                searcher = java.autoclass("org.apache.lucene.search.IndexSearcher")(
                    self._reader, signature="(Lorg/apache/lucene/index/IndexReader;)V")
                searcher.setSimilarity(java.autoclass("org.apache.lucene.search.similarities.BM25Similarity")(*key))
                self._searchers[key] = searcher
            return self._searchers[key]

    def search(self, text: str, k: int, k1: float = 0.9, b: float = 0.4) -> list[tuple[str, float]]:
        """Top-k (docid, score) for one query, identical to Pyserini's LuceneSearcher.search."""
        return self.search_many({"": text}, k, k1, b)[""]

    def analyze(self, text: str) -> list[str]:
        """The index terms of `text`, in order: the index's Lucene analyzer (one crossing), or for a jieba index
        the jieba words of the text (as it was indexed)."""
        if self.segmenter == "jieba":
            from pipeline.retrieve.segment import default_segmenter

            return default_segmenter().words(text)
        # Worker threads call only static methods and methods of shared objects: pyjnius binds an instance method
        # to its object on the shared method descriptor, so calls on two objects of one class from two threads race.
        rendered = self._list_to_string(self._analyze(self._analyzer, text))  # "[t1, t2]"; terms hold no spaces
        return rendered[1:-1].split(", ") if len(rendered) > 2 else []

    def search_terms(self, weights: Mapping[str, float], k: int, k1: float = 0.9,
                     b: float = 0.4) -> list[tuple[str, float]]:
        """Top-k for a weighted bag of index terms (term -> boost; terms with weight <= 0 are left out):
        sum over terms of boost * BM25(term, doc). Counts as weights give the same query as `search`."""
        return self.search_many_terms({"": weights}, lambda query: query, k, k1, b)[""]

    def search_texts(self, parts: Sequence[tuple[str, float]], k: int, k1: float = 0.9,
                     b: float = 0.4) -> list[tuple[str, float]]:
        """Top-k for texts with boosts, each analyzed by the index (segmented first for a jieba index):
        sum over parts of boost * BM25(text); [(query, 1), (keywords, w)] appends the keywords boosted by w. The
        analysis happens inside the query parser, in Java (Chinese keywords re-analyze exactly; English stems do
        not: use search_terms for those)."""
        return self.search_many_texts({"": parts}, lambda query: query, k, k1, b)[""]

    def search_many(self, queries: Mapping[str, str], k: int, k1: float = 0.9, b: float = 0.4, threads: int = 1,
                    progress=None) -> dict[str, list[tuple[str, float]]]:
        """Search every query (on `threads` Java threads); results in the order of `queries`."""
        if self.segmenter is not None:
            queries = {qid: " ".join(self.analyze(text)) for qid, text in queries.items()}
        return self._search_batches(lambda: self._batch("words", k, k1, b), queries, k, threads, progress)

    def search_many_terms(self, queries: Mapping[str, T], weigh: Callable[[T], Mapping[str, float]], k: int,
                          k1: float = 0.9, b: float = 0.4, threads: int = 1,
                          progress=None) -> dict[str, list[tuple[str, float]]]:
        """`search_terms(weigh(query))` for every query: `weigh` (e.g. keyword extraction) runs here, the searches
        on `threads` Java threads."""
        strings = {qid: boosted_query_string(weigh(query)) for qid, query in queries.items()}
        return self._search_batches(lambda: self._batch("terms", k, k1, b), strings, k, threads, progress,
                                    skip_empty=True)

    def search_many_texts(self, queries: Mapping[str, T], split: Callable[[T], Sequence[tuple[str, float]]], k: int,
                          k1: float = 0.9, b: float = 0.4, threads: int = 1,
                          progress=None) -> dict[str, list[tuple[str, float]]]:
        """`search_texts(split(query))` for every query, the searches on `threads` Java threads."""
        strings = {}
        for qid, query in queries.items():
            parts = split(query)
            if self.segmenter is not None:
                parts = [(" ".join(self.analyze_cached(text)), weight) for text, weight in parts]
            strings[qid] = boosted_texts_string(parts)
        return self._search_batches(lambda: self._batch("texts", k, k1, b), strings, k, threads, progress,
                                    skip_empty=True)

    def _search_batches(self, make_batch: Callable[[], java_batch.BatchFunction], queries: Mapping[str, str], k: int,
                        threads: int, progress, skip_empty: bool = False,
                        adjust_ties: bool = True) -> dict[str, list[tuple[str, float]]]:
        """Each query string searched by `make_batch()` (see `_batch`, `_rm3_batch`), in batches of about
        HITS_PER_CALL hits, each batch in one JNI call. With `skip_empty`, an empty query string has no hits without
        a search (QueryParser refuses it)."""
        results: dict[str, list[tuple[str, float]]] = {qid: [] for qid in queries}
        todo = [(qid, text) for qid, text in queries.items() if text or not skip_empty]
        size = max(1, HITS_PER_CALL // max(1, k))
        with java.java_errors(f"searching the Lucene index {self.path}", _DAMAGED):
            batch = make_batch()
            for start in range(0, len(todo), size):
                part = todo[start:start + size]
                rendered = batch([text for _, text in part], threads)
                for (qid, _), hits in zip(part, self._read_hits(rendered, adjust_ties)):
                    results[qid] = hits
                if progress is not None:
                    progress.update(len(part))
        if progress is not None:
            progress.update(len(queries) - len(todo))
        return results

    def _cached_batch(self, key: tuple, build: Callable[[], java_batch.BatchFunction]) -> java_batch.BatchFunction:
        """The batch search of `key`, built by `build` on first use (under the index's lock)."""
        with self._lock:
            if key not in self._batches:
                self._batches[key] = build()
            return self._batches[key]

    def _batch(self, kind: str, k: int, k1: float, b: float) -> java_batch.BatchFunction:
        """query string -> Query -> top k (TopFieldDocs) -> its rendering, for many strings in one call. The kind of
        query string: "words" (Anserini's BagOfWordsQueryGenerator over the index's analyzer, as Pyserini),
        "terms" (`t1^w1 t2^w2` for QueryParser over a whitespace analyzer) or "texts" (QueryParser over the index's
        analyzer); a QueryParser is made per query (it is not thread-safe)."""
        searcher = self._searcher(k1, b)

        def build() -> java_batch.BatchFunction:
            query_class, string = "org.apache.lucene.search.Query", "java.lang.String"
            if kind == "words":
                to_query = java_batch.bind(java_batch.virtual(
                    "io.anserini.search.query.BagOfWordsQueryGenerator", "buildQuery", query_class, string,
                    "org.apache.lucene.analysis.Analyzer", string), 0, self._query_generator, "contents",
                    self._analyzer)
            else:
                analyzer = (java.autoclass("org.apache.lucene.analysis.core.WhitespaceAnalyzer")()
                            if kind == "terms" else self._analyzer)
                parser = "org.apache.lucene.queryparser.classic.QueryParser"
                to_query = java_batch.made_at(
                    java_batch.virtual(parser, "parse", query_class, string), 0,
                    java_batch.bind(java_batch.constructor(parser, string, "org.apache.lucene.analysis.Analyzer"),
                                    0, "contents", analyzer))
            # doDocScores=false: a hit's score is its first sort value (fields[0], what `hit` renders); true made
            # Lucene score every hit a second time (populateScores), ~40% of a 10-hit CACM query's time
            search = java_batch.bind(java_batch.virtual(
                "org.apache.lucene.search.IndexSearcher", "search", "org.apache.lucene.search.TopFieldDocs",
                query_class, "int", "org.apache.lucene.search.Sort", "boolean").bindTo(searcher), 1,
                java_batch.boxed(int(k)), self._sort, java_batch.boxed(False))
            fields = java_batch.getter("org.apache.lucene.search.FieldDoc", "fields", "java.lang.Object[]")
            hit = _hit_renderer(  # a hit's sort values: its score (a Float) and its id (a BytesRef)
                java_batch.then(fields, java_batch.element("java.lang.Object[]", 0),
                                java_batch.static(string, "valueOf", string, "java.lang.Object")),
                java_batch.then(fields, java_batch.element("java.lang.Object[]", 1),
                                java_batch.virtual("org.apache.lucene.util.BytesRef", "utf8ToString", string)))
            hits = java_batch.then(java_batch.getter("org.apache.lucene.search.TopDocs", "scoreDocs",
                                                     "org.apache.lucene.search.ScoreDoc[]"),
                                   java_batch.array_mapped_and_joined(hit, HIT))
            return java_batch.BatchFunction(java_batch.then(to_query, search, hits))

        return self._cached_batch((kind, int(k), float(k1), float(b)), build)

    def _read_hits(self, rendered: Sequence[str], adjust_ties: bool = True) -> list[list[tuple[str, float]]]:
        """(docid, score) of each query's hits as rendered by `_batch` / `_rm3_batch`, the ties adjusted as
        Anserini's ScoreTiesAdjusterReranker (all of a batch's scores in one pass) unless RM3's cascade did."""
        parts = [text.replace(HIT, FIELD).split(FIELD) if text else [] for text in rendered]  # score, docid, ...
        if any(text.count(FIELD) != text.count(HIT) + 1 for text in rendered if text):
            raise IrpipeError(f"{self.path}: a docid holds the control character \\x1e or \\x1f, which irpipe's "
                              "search uses as separators")
        starts = np.cumsum([0] + [len(one) // 2 for one in parts])
        scores = np.array([score for one in parts for score in one[0::2]], dtype=np.float32)
        scores = (adjust_score_ties(scores, starts[1:-1]) if adjust_ties else scores).tolist()
        return [list(zip(one[1::2], scores[start:start + len(one) // 2])) for one, start in zip(parts, starts)]

    def search_rm3(self, queries: Mapping[str, str], k: int, k1: float, b: float, threads: int, fb_terms: int = 10,
                   fb_docs: int = 10, original_query_weight: float = 0.5,
                   progress=None) -> dict[str, list[tuple[str, float]]]:
        """BM25 + RM3 through Anserini's own feedback cascade (`SimpleSearcher.search`, what Pyserini runs per query),
        many queries per JNI call on `threads` Java threads, each query's hits read back as one text."""
        if not self._reader.getTermVectors(0):
            raise MissingResourceError(f"RM3 needs document vectors: rebuild {self.path} without --no-docvectors")
        return self._search_batches(
            lambda: self._rm3_batch(k, k1, b, fb_terms, fb_docs, original_query_weight), queries, k, threads, progress,
            adjust_ties=False)  # RM3's cascade adjusted them

    def _rm3_batch(self, k: int, k1: float, b: float, fb_terms: int, fb_docs: int,
                   original_query_weight: float) -> java_batch.BatchFunction:
        """text -> SimpleSearcher.search(text, k) with RM3 -> its hits as text (see HIT), for many texts in one call."""
        def build() -> java_batch.BatchFunction:
            simple = java.autoclass("io.anserini.search.SimpleSearcher")(str(self.path))
            simple.set_analyzer(self._analyzer)
            simple.set_bm25(float(k1), float(b))
            simple.set_rm3(None, int(fb_terms), int(fb_docs), float(original_query_weight), False, True)
            scored, string = "io.anserini.search.ScoredDoc", "java.lang.String"
            hit = _hit_renderer(java_batch.then(java_batch.getter(scored, "score", "float"),
                                                java_batch.static(string, "valueOf", string, "float")),
                                java_batch.getter(scored, "docid", string))
            search = java_batch.bind(java_batch.virtual("io.anserini.search.SimpleSearcher", "search",
                                                        f"{scored}[]", string, "int").bindTo(simple),
                                     1, java_batch.boxed(int(k)))
            return java_batch.BatchFunction(java_batch.then(search, java_batch.array_mapped_and_joined(hit, HIT)))

        key = ("rm3", int(k), float(k1), float(b), int(fb_terms), int(fb_docs), float(original_query_weight))
        return self._cached_batch(key, build)

    def doc_text(self, docid: str) -> str | None:
        """A document's text for rerankers: the stored `contents`, else the `contents` of its stored raw JSON
        (our indexes store the raw {"id", "contents"} record, not a second copy of the contents)."""
        contents = self._simple.doc_contents(docid)
        if contents is not None:
            return contents
        raw = self._simple.doc_raw(docid)
        if raw is None:
            return None
        try:
            record = json.loads(raw)
            return record["text"] if self.segmenter is not None and "text" in record else record["contents"]
        except (ValueError, KeyError, TypeError):
            return raw

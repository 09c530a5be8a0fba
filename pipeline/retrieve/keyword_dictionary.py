"""Domain keyword dictionaries (diff-idf; keyword-BERT, Miao, Cao & Tam; docs/models.md §4.1): what a keyword is, how a
dictionary is built from a domain-labelled corpus, stored and loaded (presets built once and cached). Extracting
keywords: pipeline/retrieve/keywords.py; keyword-augmented BM25: pipeline/stages/keywords.py.
For a domain d of a domain-labelled corpus and its complement ¬d (all the other domains), with document
frequencies df and document counts N:

    diff_idf(w | d) = log(N_¬d / (df(w | ¬d) + λ)) - log(N_d / (df(w | d) + λ)),   λ = 1

i.e. the log-ratio of w's smoothed document frequency inside d to outside it: > 0 when w is typical of d, ≈ 0
when it is spread evenly over the domains. The words of each domain above a threshold (optionally its top k)
are merged into one dictionary, word -> (domain, score), keeping a word's best domain. Words are jieba words of
the normalised text for Chinese (pipeline/retrieve/segment.py) and the terms of the index's Lucene analyzer for
English (Anserini's DefaultEnglishAnalyzer: Porter stems); stop words, pure numbers, punctuation and words
shorter than `min_length` characters never become keywords. The keywords of a text are its words found in the
dictionary, ranked by score (Chinese text is cut with the dictionary's words added to jieba's user dictionary,
so they segment as units).

Dictionary files are TSV: `# irpipe-keywords {settings JSON}` on the first line, then the header
`word domain score df_domain docs_domain df_rest docs_rest`, then one row per word, best score first.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
from collections import Counter
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from pipeline.data.files import cache_root
from pipeline.data.files import atomic_write, json_lines, numbered_lines
from pipeline.errors import ConfigError, InputError, UnknownNameError
from pipeline.log import logger, progress

SMOOTHING = 1.0  # λ
LANGUAGES = ("zh", "en")
COLUMNS = ("word", "domain", "score", "df_domain", "docs_domain", "df_rest", "docs_rest")
MAGIC = "# irpipe-keywords "
BUILDER_VERSION = 1  # bump when the candidate words or the scoring change: preset dictionaries are rebuilt


def diff_idf(df_domain: int, docs_domain: int, df_rest: int, docs_rest: int, smoothing: float = SMOOTHING) -> float:
    """log(N_¬d / (df(w|¬d) + λ)) - log(N_d / (df(w|d) + λ))."""
    return math.log(docs_rest / (df_rest + smoothing)) - math.log(docs_domain / (df_domain + smoothing))


@dataclass(frozen=True)
class Keyword:
    """A dictionary entry: the word, its domain, its diff-idf there, and the document frequencies behind it."""

    word: str
    domain: str
    score: float
    df_domain: int
    docs_domain: int
    df_rest: int
    docs_rest: int


class KeywordDictionary:
    """Words -> Keyword, for one language; `settings` records how it was built."""

    def __init__(self, entries: Iterable[Keyword], language: str, settings: dict | None = None):
        if language not in LANGUAGES:
            raise ConfigError(f"keyword dictionary language must be one of {LANGUAGES}, got {language!r}")
        self.entries: dict[str, Keyword] = {}
        for entry in sorted(entries, key=lambda e: (-e.score, e.word)):
            self.entries.setdefault(entry.word, entry)
        self.language = language
        self.settings = dict(settings or {}, language=language)

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, word: str) -> bool:
        return word in self.entries

    def __iter__(self) -> Iterator[Keyword]:
        return iter(self.entries.values())

    def domains(self) -> list[str]:
        return sorted({entry.domain for entry in self})

    def lookup(self, words: Iterable[str]) -> list[Keyword]:
        """The distinct `words` found in the dictionary, best score first (ties: first occurrence)."""
        found = {}
        for word in words:
            if word in self.entries and word not in found:
                found[word] = self.entries[word]
        return sorted(found.values(), key=lambda entry: -entry.score)

    def digest(self) -> str:
        return hashlib.sha1(self.to_tsv().encode()).hexdigest()

    def to_tsv(self) -> str:
        lines = [MAGIC + json.dumps(self.settings, sort_keys=True, ensure_ascii=False), "\t".join(COLUMNS)]
        for entry in self:
            values = astuple(entry)
            lines.append("\t".join([values[0], values[1], f"{values[2]:.6f}", *map(str, values[3:])]))
        return "\n".join(lines) + "\n"

    def save(self, path: str | Path) -> Path:
        with atomic_write(path) as out:
            out.write(self.to_tsv())
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> "KeywordDictionary":
        entries, settings, header_seen = [], None, False
        for number, line in numbered_lines(path):
            if settings is None:
                if not line.startswith(MAGIC):
                    raise InputError(path, f"not a keyword dictionary: the first line must start with {MAGIC.strip()!r}",
                                     number, "header")
                try:
                    settings = json.loads(line[len(MAGIC):])
                except json.JSONDecodeError as error:
                    raise InputError(path, f"settings are not JSON: {error.msg}", number, "settings") from None
                continue
            fields = line.split("\t")
            if not header_seen:
                if tuple(fields) != COLUMNS:
                    raise InputError(path, f"expected the header {' '.join(COLUMNS)}", number, "header")
                header_seen = True
                continue
            if len(fields) != len(COLUMNS):
                raise InputError(path, f"expected {len(COLUMNS)} tab-separated columns, found {len(fields)}", number,
                                 "columns")
            try:
                score = float(fields[2])
            except ValueError:
                raise InputError(path, f"score {fields[2]!r} is not a number", number, "score") from None
            counts = []
            for name, value in zip(COLUMNS[3:], fields[3:]):
                if not value.isdigit():
                    raise InputError(path, f"{name} {value!r} is not a count", number, name)
                counts.append(int(value))
            entries.append(Keyword(fields[0], fields[1], score, *counts))
        if not header_seen:
            raise InputError(path, "no header line", field="header")
        language = settings.get("language")
        if language not in LANGUAGES:
            raise InputError(path, f"settings name language {language!r}, not one of {LANGUAGES}", 1, "language")
        return cls(entries, language, settings)


# -- words: what can be a keyword -------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def english_analyzer():
    """Anserini's DefaultEnglishAnalyzer (Porter, Lucene stop words): what `en` indexes are built with."""
    from pipeline import java

    return java.autoclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()


def english_terms(text: str) -> list[str]:
    """The analyzed terms of `text`, as an English index holds them."""
    from pipeline import java

    return list(java.autoclass("io.anserini.analysis.AnalyzerUtils").analyze(english_analyzer(), text).toArray())


@functools.lru_cache(maxsize=2)
def stop_words(language: str) -> frozenset[str]:
    """Stop words in the form words take after analysis (English: stemmed, as the analyzer leaves them)."""
    from pipeline.retrieve.segment import CHINESE_STOP_WORDS, ENGLISH_STOP_WORDS

    if language == "zh":
        return CHINESE_STOP_WORDS | ENGLISH_STOP_WORDS
    return ENGLISH_STOP_WORDS | {term for word in ENGLISH_STOP_WORDS for term in english_terms(word)}


def is_candidate(word: str, language: str, min_length: int = 2) -> bool:
    """Could `word` be a keyword: long enough, a word (not punctuation), not a number, not a stop word."""
    from pipeline.retrieve.segment import is_number, is_word

    return (len(word) >= min_length and is_word(word) and not is_number(word)
            and word not in stop_words(language))


def word_splitter(language: str, user_words: Iterable[str] = ()) -> Callable[[str], list[str]]:
    """text -> its words: jieba words (with `user_words` cut as units) for zh, analyzed terms for en."""
    if language == "zh":
        from pipeline.retrieve.segment import Segmenter

        return Segmenter(user_words).words
    if language == "en":
        return english_terms
    raise ConfigError(f"keyword language must be one of {LANGUAGES}, got {language!r}")


# -- building ---------------------------------------------------------------------------------------------------

def build_dictionary(documents: Iterable[tuple[str, str]], language: str, threshold: float = 1.0,
                     top_k: int | None = None, min_df: int = 2, min_length: int = 2,
                     settings: dict | None = None) -> KeywordDictionary:
    """diff-idf dictionary from (domain, text) documents: per domain, candidate words with df >= min_df and
    diff_idf > threshold (the top_k best, if given); domains merged keeping each word's best score."""
    split = word_splitter(language)
    df: dict[str, Counter] = {}
    docs: Counter = Counter()
    for domain, text in documents:
        words = {w for w in split(text) if is_candidate(w, language, min_length)}
        df.setdefault(domain, Counter()).update(words)
        docs[domain] += 1
    if len(docs) < 2:
        raise ConfigError(f"diff-idf needs at least two domains; the corpus has {len(docs)}: {sorted(docs)}")
    total_df: Counter = sum(df.values(), Counter())
    total_docs = sum(docs.values())
    entries = []
    for domain in sorted(df):
        rest = total_docs - docs[domain]
        scored = [Keyword(word, domain, diff_idf(count, docs[domain], total_df[word] - count, rest), count,
                          docs[domain], total_df[word] - count, rest)
                  for word, count in df[domain].items() if count >= min_df]
        kept = sorted((e for e in scored if e.score > threshold), key=lambda e: (-e.score, e.word))
        entries += kept[:top_k] if top_k is not None else kept
    settings = dict(settings or {}, threshold=threshold, top_k=top_k, min_df=min_df, min_length=min_length,
                    smoothing=SMOOTHING, domains=dict(sorted(docs.items())), builder_version=BUILDER_VERSION)
    return KeywordDictionary(entries, language, settings)


@dataclass(frozen=True)
class Corpus:
    """A shipped domain corpus: registered datasets, the part to read (records or docs) and the fields."""

    datasets: tuple[str, ...]
    part: str
    text_field: str
    domain_field: str
    language: str
    description: str


PRESETS = {
    "thucnews": Corpus(("thucnews/dev", "thucnews/test"), "records", "text", "domain", "zh",
                       "THUCNews headlines, 10 news domains (20,000 titles)"),
    "insuranceqa-zh": Corpus(("insuranceqa-zh/train", "insuranceqa-zh/valid", "insuranceqa-zh/test"), "records",
                             "text", "domain", "zh", "InsuranceQA-zh questions, insurance domains (16,889)"),
    "squad-dev": Corpus(("squad-v1.1/dev",), "docs", "contents", "title", "en",
                        "SQuAD v1.1 dev paragraphs, the article title as the domain (2,067 paragraphs, 48 articles)"),
}


def _dataset_documents(names: Iterable[str], part: str | None, text_field: str | None,
                       domain_field: str) -> Iterator[tuple[str, str]]:
    from pipeline.data.registry import get_dataset

    for name in names:
        dataset = get_dataset(name)
        use = part or ("records" if "records" in dataset.provides else "docs")
        text_key = text_field or ("text" if use == "records" else "contents")
        for number, item in enumerate(getattr(dataset, use)(), start=1):
            if domain_field not in item or text_key not in item:
                missing = domain_field if domain_field not in item else text_key
                raise ConfigError(f"{name} {use} item {number} has no field {missing!r}; it has {sorted(item)}: "
                                  "choose one with --domain-field / --text-field")
            yield str(item[domain_field]), item[text_key]


def _file_documents(path: Path, text_field: str, domain_field: str) -> Iterator[tuple[str, str]]:
    """(domain, text) from a JSONL file of objects with `text_field` and `domain_field`."""
    for number, record in json_lines(path):
        for field in (text_field, domain_field):
            if not isinstance(record.get(field), str):
                raise InputError(path, f"missing {field!r} string (choose the field with --text-field / "
                                       "--domain-field)", number, field)
        yield record[domain_field], record[text_field]


def corpus_documents(corpus: list[str], domain_field: str = "domain",
                     text_field: str | None = None) -> tuple[Iterator[tuple[str, str]], str | None]:
    """(domain, text) documents of a preset name, of registered dataset names, or of a JSONL file; and the
    language the corpus is in when it is known (None for a file)."""
    if len(corpus) == 1 and corpus[0] in PRESETS:
        preset = PRESETS[corpus[0]]
        return _dataset_documents(preset.datasets, preset.part, preset.text_field, preset.domain_field), preset.language
    if all(Path(c).is_file() for c in corpus):
        return (doc for c in corpus for doc in _file_documents(Path(c), text_field or "text", domain_field)), None
    from pipeline.data.registry import dataset_names, get_dataset

    for name in corpus:
        if name not in dataset_names():
            raise UnknownNameError("keyword corpus (preset, dataset or existing file)", name,
                                   [*PRESETS, *dataset_names()])
    languages = {get_dataset(name).language for name in corpus}
    return _dataset_documents(corpus, None, text_field, domain_field), languages.pop() if len(languages) == 1 else None


def build_preset(name: str, **options) -> KeywordDictionary:
    preset = PRESETS[name]
    documents, _ = corpus_documents([name])
    documents = progress(documents, desc=f"keywords: {name}", unit="doc")
    return build_dictionary(documents, preset.language, settings={"corpus": name}, **options)


def preset_path(name: str, **options) -> Path:
    """Where the preset dictionary `name` (with these build options) is cached."""
    key = json.dumps({"name": name, "options": options, "version": BUILDER_VERSION}, sort_keys=True)
    return cache_root() / "keywords" / f"{name}-{hashlib.sha1(key.encode()).hexdigest()[:10]}.tsv"


@functools.lru_cache(maxsize=16)
def _load_file(path: str, mtime_ns: int) -> KeywordDictionary:
    return KeywordDictionary.load(path)


def load_dictionary(name_or_path: str | Path) -> KeywordDictionary:
    """A dictionary file, or a preset by name (thucnews, insuranceqa-zh, squad-dev), built once and cached."""
    path = Path(name_or_path)
    if path.is_file():
        return _load_file(str(path.resolve()), path.stat().st_mtime_ns)
    name = str(name_or_path)
    if name not in PRESETS:
        raise UnknownNameError("keyword dictionary (preset name or existing .tsv file)", name, list(PRESETS))
    cached = preset_path(name)
    if not cached.is_file():
        logger.info("building the %s keyword dictionary at %s (first use)", name, cached)
        build_preset(name).save(cached)
    return _load_file(str(cached), cached.stat().st_mtime_ns)

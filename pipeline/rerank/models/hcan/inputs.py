"""HCAN's inputs, beside its network (network.py) and config (config.py): from the training texts to the
vocabularies, IDF tables and initial embeddings a model is built with (saved beside its weights), and from pairs
to the tensors of `HCAN.forward`: word ids, per-level IDF weights of query positions, the four overlap features of
external_features (pipeline/rerank/overlap.py) and the character trigrams of the authors' tweet-search setting.

Character trigrams (jinfengr/hcan, dataset "twitter"). Besides the word-level matching of docs/models.md §1, the
authors' code (model_option "complete", with_url for the twitter datasets) matches the query's character trigrams
against two more sequences, each a relevance-matching branch of its own (TrigramMatching in network.py):
- `char_trigrams`: the candidate's text as character trigrams;
- `with_url`: the candidate's URL (`Pair.doc_fields["url"]`) as character trigrams.
A text reads (`char_trigrams`, pipeline/rerank/text.py) as "#" + text + "#" (lower-cased, accents dropped to
ASCII, white space runs as one space) cut into every 3-character window: "#water shortages#" -> "#wa", "wat", ...,
"es#". One trigram table (50-d, U(-0.05, 0.05), trained) embeds query, text and URL; each branch has its own deep
encoder (conv kernel 4, F filters, N levels) shared by the query and its sequence, and relevance matching on levels
0..N without IDF weights (the code weighs trigrams by nothing): per branch (N+1) x L_3 features per pooling,
L_3 = MAX_QUERY_TRIGRAMS. Width, kernel and the lengths below are the code's constants (options until 2026-11-27:
pipeline/rerank/migrations.py RETIRED).

Resolutions [R]: a URL reads without its scheme and query string (the code drops the first 7 characters and
everything from the first "?" -- with no "?", the last character: not reproduced); several URLs of one tweet are
joined by a space; an empty URL or text reads as one unknown trigram (the code writes "http://www.abc.com" for a
missing URL); a URL longer than MAX_URL_TRIGRAMS keeps its end, as the code's padding does; text and query keep
their start. The relevance-matching options (rm_softmax, rm_similarity) are the word branch's; encoder
"contextual" uses the deep one here, as the code does. Padding is masked as everywhere else.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import torch

from pipeline.errors import ConfigError
from pipeline.log import logger
from pipeline.rerank.bert import pad_rows
from pipeline.rerank.model import Batch
from pipeline.rerank.models.hcan.config import CONTEXTUAL, HCANConfig
from pipeline.rerank.overlap import OVERLAP_FEATURES
from pipeline.rerank.pairs import Pair
from pipeline.rerank.text import (IdfTable, Vocabulary, char_trigrams, embedding_matrix, tokenize, url_text,
                                  word_table)

URL_FIELD = "url"
# the code's lengths, in trigrams
MAX_QUERY_TRIGRAMS = 100  # RM width per trigram level, as max_query_length (the code's: the longest training query,
                          # at most 200; microblog queries have <= 53 trigrams)
MAX_DOC_TRIGRAMS = 200    # the authors' code's MAX_3GRAM_LENGTH: a text keeps its first 200
MAX_URL_TRIGRAMS = 120    # the authors' code's MAX_URL_LENGTH: a URL keeps its last 120, as the code's padding does


def training_trigrams(queries: Iterable[str], docs: Iterable[str], doc_fields: Iterable[Mapping]) -> list[list[str]]:
    """The trigram lists a vocabulary is built from: the training queries, texts and URLs (as the code's is)."""
    urls = (url_text(fields.get(URL_FIELD, "")) for fields in doc_fields)
    return [char_trigrams(t) for t in dict.fromkeys([*queries, *docs, *urls])]


def trigram_tensors(pairs: list[Pair], vocab: Vocabulary, c: HCANConfig) -> tuple[dict[str, torch.Tensor], list[bool]]:
    """Padded trigram ids of the branches `c` turns on: query_trigrams (B, n3), doc_trigrams (B, m3) with
    char_trigrams, url_trigrams (B, u3) with with_url; and which pairs were truncated."""
    sequences = {"query_trigrams": ([p.query for p in pairs], MAX_QUERY_TRIGRAMS, False)}
    if c.char_trigrams:
        sequences["doc_trigrams"] = ([p.text for p in pairs], MAX_DOC_TRIGRAMS, False)
    if c.with_url:
        sequences["url_trigrams"] = ([url_text(url_of(p)) for p in pairs], MAX_URL_TRIGRAMS, True)
    tensors, cut = {}, [False] * len(pairs)
    for name, (texts, limit, keep_end) in sequences.items():
        memo: dict[str, list[int]] = {}
        rows = []
        for i, text in enumerate(texts):
            if text not in memo:
                grams = char_trigrams(text) or [Vocabulary.UNK]  # an empty text reads as one unknown trigram
                memo[text] = vocab.encode(grams[-limit:] if keep_end else grams[:limit]), len(grams) > limit
            ids, truncated = memo[text]
            rows.append(ids)
            cut[i] = cut[i] or truncated
        ids = torch.zeros(len(rows), max(map(len, rows), default=1), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, :len(row)] = torch.tensor(row)
        tensors[name] = ids
    return tensors, cut


def url_of(pair: Pair) -> str:
    if URL_FIELD not in pair.doc_fields:
        raise ConfigError(f"hcan: with_url=true needs each candidate's {URL_FIELD!r} field, and candidate "
                          f"{pair.docid!r} (query {pair.qid!r}) has none (its fields: "
                          f"{', '.join(pair.doc_fields) or 'none'}); use a dataset whose documents carry URLs "
                          "(microblog/*) or with_url=false", field="with_url")
    return pair.doc_fields[URL_FIELD]


# -- contextual inputs: the words of a sentence as the word pieces of a frozen BERT ---------------------------------
class WordPieces:
    """A sentence's words (pipeline/rerank/text.py tokenize, cut as above) -> "[CLS] pieces [SEP]" for the BERT, and
    for each piece the position of the word it belongs to (-1 for [CLS], [SEP] and padding): HCAN's word vector is
    the mean of its pieces' last-layer states [R]. A word the tokenizer turns into nothing reads as [UNK]; pieces
    beyond the BERT's positions are dropped (their words then get a zero vector; a 100-word sentence has ~130)."""

    def __init__(self, tokenizer, positions: int):
        self.tokenizer, self.room = tokenizer, positions - 2  # [CLS] and [SEP]
        self._words: dict[str, list[int]] = {}

    def word(self, word: str) -> list[int]:
        if word not in self._words:
            ids = self.tokenizer(word, add_special_tokens=False)["input_ids"]
            self._words[word] = ids or [self.tokenizer.unk_token_id]
        return self._words[word]

    def tensors(self, sentences: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """pieces (B, P) padded with the pad id, piece_word (B, P) with -1."""
        tok, rows, owners = self.tokenizer, [], []
        for words in sentences:
            row, owner = [], []
            for position, word in enumerate(words):
                ids = self.word(word)[:self.room - len(row)]
                row += ids
                owner += [position] * len(ids)
            rows.append([tok.cls_token_id, *row, tok.sep_token_id])
            owners.append([-1, *owner, -1])
        pieces = pad_rows(rows, tok.pad_token_id)[0]
        return pieces, pad_rows(owners, -1)[0]


# -- building: training texts -> vocabularies, IDF tables, embeddings (saved beside the weights) ---------------------
def training_inputs(config: HCANConfig, queries: list[str], docs: list[str], doc_fields: Iterable[Mapping],
                    idf_order: int) -> tuple[HCANConfig, Vocabulary, IdfTable, np.ndarray, Vocabulary | None]:
    """Vocabulary, IDF tables up to `idf_order`-grams (over the distinct training texts) and initial embeddings
    (the config gets their width); with trigram inputs, the trigram vocabulary of the training queries, texts and
    URLs (`doc_fields`)."""
    token_lists = [tokenize(t) for t in dict.fromkeys([*queries, *docs])]
    idf = IdfTable.build(token_lists, idf_order, "df")  # document frequencies
    if config.embeddings == CONTEXTUAL:  # no table: the frozen BERT's states of each sentence (the model loads it)
        vocab = Vocabulary.build(token_lists, 1)  # ids for the masks, IDF and overlap features only
        logger.info("hcan: %d training texts, vocabulary %d words, contextual inputs", len(token_lists), len(vocab))
        return config, vocab, idf, None, training_trigram_vocab(config, queries, docs, doc_fields)
    dim = config.embedding_dim or 300
    table = word_table(config.embeddings, config.bert or None, token_lists, dim, config.seed)
    extra = table.words[:config.pretrained_vocab] if table is not None else []
    vocab = Vocabulary.build(token_lists, 1, extra)  # every training word
    matrix, found = embedding_matrix(vocab, table, dim, np.random.default_rng(config.seed))
    logger.info("hcan: %d training texts, vocabulary %d words (%d from %s), embeddings %d-d", len(token_lists),
                len(vocab), found, config.embeddings, matrix.shape[1])
    trigrams = training_trigram_vocab(config, queries, docs, doc_fields)
    return dataclasses.replace(config, embedding_dim=matrix.shape[1]), vocab, idf, matrix, trigrams


def training_trigram_vocab(config: HCANConfig, queries, docs, doc_fields) -> Vocabulary | None:
    """With trigram inputs, the trigram vocabulary of the training queries, texts and URLs; else None."""
    trigrams = Vocabulary.build(training_trigrams(queries, docs, doc_fields)) if config.trigrams else None
    if trigrams is not None:
        logger.info("hcan: %d character trigrams", len(trigrams))
    return trigrams


def save_inputs(directory: Path, vocab: Vocabulary, idf: IdfTable, trigrams: Vocabulary | None) -> None:
    vocab.save(Path(directory) / "vocab.txt")
    idf.save(Path(directory) / "idf.tsv")
    if trigrams is not None:
        trigrams.save(Path(directory) / "trigrams.txt")


def load_inputs(config: HCANConfig, directory: Path, idf_order: int) -> tuple[Vocabulary, IdfTable, Vocabulary | None]:
    """What `save_inputs` wrote: the vocabulary, the IDF tables (up to `idf_order`-grams) and the trigrams."""
    from pipeline.errors import CheckpointError

    paths = [Path(directory) / name for name in ("vocab.txt", "idf.tsv", "trigrams.txt")[:2 + config.trigrams]]
    for path in paths:
        if not path.is_file():
            raise CheckpointError(path, "missing: HCAN's vocabulary (vocab.txt), IDF table (idf.tsv) and, with "
                                  "char_trigrams or with_url, trigram vocabulary (trigrams.txt)")
    idf = IdfTable.load(paths[1])
    if idf.max_order < idf_order:
        raise CheckpointError(paths[1], f"IDF up to {idf.max_order}-grams; levels={config.levels} needs {idf_order}")
    trigrams = Vocabulary.load(paths[2]) if config.trigrams else None
    return Vocabulary.load(paths[0]), idf, trigrams


# -- pairs -> the tensors of HCAN.forward ----------------------------------------------------------------------------
def pair_batch(pairs: list[Pair], vocab: Vocabulary, idf: IdfTable, trigram_vocab: Vocabulary | None,
               c: HCANConfig, pieces: WordPieces | None = None) -> Batch:
    """Token ids padded to the batch's longest (<= max lengths) query_ids (B, n), doc_ids (B, m); per-level IDF
    weights of query positions query_idf (B, N+1, n); overlap (B, 4) with external_features; the trigram ids of
    the branches turned on (`trigram_tensors`); with contextual inputs (`pieces`), query_pieces (B, P_q),
    query_piece_word (B, P_q), doc_pieces (B, P_m), doc_piece_word (B, P_m) (`WordPieces.tensors`)."""
    memo = {}
    queries, docs = [p.query for p in pairs], [p.text for p in pairs]

    def tokens(text: str, limit: int) -> tuple[list[str], bool]:
        if (text, limit) not in memo:
            words = tokenize(text) or [Vocabulary.UNK]  # an empty text reads as one unknown word
            memo[text, limit] = (words[:limit], len(words) > limit)
        return memo[text, limit]

    qs, ds = [tokens(q, c.max_query_length) for q in queries], [tokens(d, c.max_doc_length) for d in docs]
    n, m = max((len(q) for q, _ in qs), default=1), max((len(d) for d, _ in ds), default=1)
    query_ids = torch.zeros(len(qs), n, dtype=torch.long)
    doc_ids = torch.zeros(len(ds), m, dtype=torch.long)
    query_idf = torch.zeros(len(qs), c.levels + 1, n)
    overlap = torch.zeros(len(qs), 4)
    weights: dict[tuple, list[list[float]]] = {}
    tensors, cut = trigram_tensors(pairs, trigram_vocab, c) if c.trigrams else ({}, [False] * len(pairs))
    for i, ((q, q_cut), (d, d_cut)) in enumerate(zip(qs, ds)):
        cut[i] = cut[i] or q_cut or d_cut
        query_ids[i, :len(q)] = torch.tensor(vocab.encode(q))
        doc_ids[i, :len(d)] = torch.tensor(vocab.encode(d))
        key = tuple(q)
        if key not in weights:  # contextual encoder: unigram IDF at every level
            weights[key] = [idf.positions(q, 0 if c.encoder == "bilstm" else l) for l in range(c.levels + 1)]
        query_idf[i, :, :len(q)] = torch.tensor(weights[key])
        if c.external_features:
            overlap[i] = torch.tensor(OVERLAP_FEATURES[c.overlap_mode](q, d, idf, vocab))
    tensors |= {"query_ids": query_ids, "doc_ids": doc_ids, "query_idf": query_idf}
    if pieces is not None:  # contextual inputs: each sentence's word pieces and which word each piece is of
        for side, texts in (("query", qs), ("doc", ds)):
            tensors[f"{side}_pieces"], tensors[f"{side}_piece_word"] = pieces.tensors([words for words, _ in texts])
    return Batch(tensors | ({"overlap": overlap} if c.external_features else {}), sum(cut), pairs)

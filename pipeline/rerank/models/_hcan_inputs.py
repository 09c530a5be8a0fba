"""HCAN's character-trigram inputs: the authors' tweet-search setting (jinfengr/hcan, dataset "twitter").

Besides the word-level matching of MODELS.md §1, the authors' code (model_option "complete", with_url for the
twitter datasets) matches the query's character trigrams against two more sequences, each a relevance-matching
branch of its own:
- `char_trigrams`: the candidate's text as character trigrams;
- `with_url`: the candidate's URL (`Pair.doc_fields["url"]`) as character trigrams.
A text reads as "#" + text + "#" (lower-cased, accents dropped to ASCII, white space runs as one space) cut into
every 3-character window: "#water shortages#" -> "#wa", "wat", ..., "es#". One trigram table (50-d, U(-0.05,
0.05), trained) embeds query, text and URL; each branch has its own deep encoder (conv kernel 4, F filters, N
levels) shared by the query and its sequence, and relevance matching on levels 0..N without IDF weights (the
code weighs trigrams by nothing): per branch (N+1) x L_3 features per pooling, L_3 = max_query_trigrams.

Resolutions [R]: a URL reads without its scheme and query string (the code drops the first 7 characters and
everything from the first "?" -- with no "?", the last character: not reproduced); several URLs of one tweet are
joined by a space; an empty URL or text reads as one unknown trigram (the code writes "http://www.abc.com" for a
missing URL); a URL longer than max_url_trigrams keeps its end, as the code's padding does; text and query keep
their start. The relevance-matching options (rm_softmax, rm_similarity, rm_mode) are the word branch's; encoder
"contextual" uses the deep one here, as the code does. Padding is masked as everywhere else.
"""
from __future__ import annotations

import dataclasses
import re
import unicodedata
from typing import Iterable, Mapping

import torch
from torch import nn

from pipeline.errors import ConfigError
from pipeline.rerank.hcan_config import HCANConfig
from pipeline.rerank.hcan_layers import DeepEncoder, WideEncoder, relevance_matching
from pipeline.rerank.pairs import Pair
from pipeline.rerank.text import Vocabulary

URL_FIELD = "url"
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


def training_trigrams(queries: Iterable[str], docs: Iterable[str], doc_fields: Iterable[Mapping]) -> list[list[str]]:
    """The trigram lists a vocabulary is built from: the training queries, texts and URLs (as the code's is)."""
    urls = (url_text(fields.get(URL_FIELD, "")) for fields in doc_fields)
    return [char_trigrams(t) for t in dict.fromkeys([*queries, *docs, *urls])]


def trigram_tensors(pairs: list[Pair], vocab: Vocabulary, c: HCANConfig) -> tuple[dict[str, torch.Tensor], list[bool]]:
    """Padded trigram ids of the branches `c` turns on: query_trigrams (B, n3), doc_trigrams (B, m3) with
    char_trigrams, url_trigrams (B, u3) with with_url; and which pairs were truncated."""
    sequences = {"query_trigrams": ([p.query for p in pairs], c.max_query_trigrams, False)}
    if c.char_trigrams:
        sequences["doc_trigrams"] = ([p.text for p in pairs], c.max_doc_trigrams, False)
    if c.with_url:
        sequences["url_trigrams"] = ([url_text(url_of(p)) for p in pairs], c.max_url_trigrams, True)
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


class TrigramMatching(nn.Module):
    """One branch: the query's trigrams against a sequence's (the text's or the URL's), on levels 0..N of an
    encoder of its own; embedded (B, n3, D), (B, s3, D) + masks -> (B, (N+1) x 2 x L_3) features (code mode:
    (B, (N+1) x L_3)). D = trigram_dim; the table is the model's, shared by the branches."""

    def __init__(self, c: HCANConfig):
        super().__init__()
        self.config = c
        encoder = WideEncoder if c.encoder == "wide" else DeepEncoder      # contextual: deep, as in the code
        self.encoder = encoder(dataclasses.replace(c, kernel=c.trigram_kernel), c.trigram_dim)

    def forward(self, query: torch.Tensor, qmask: torch.Tensor, seq: torch.Tensor, smask: torch.Tensor) -> torch.Tensor:
        c = self.config
        uqs = self.encoder(query, qmask, qmask.sum(1).cpu())               # N+1 x (B, n3, D|F)
        uss = self.encoder(seq, smask, smask.sum(1).cpu())                 # N+1 x (B, s3, D|F)
        weights = qmask.float()                                             # (B, n3)  no IDF: 1 at real positions
        return torch.cat([relevance_matching(uq, us, qmask, smask, weights, c, c.max_query_trigrams)
                          for uq, us in zip(uqs, uss)], 1)


def trigram_embedding(size: int, dim: int) -> nn.Embedding:
    """The trigram table: U(-0.05, 0.05) as the code's, padding row 0 zero and never updated."""
    embedding = nn.Embedding(size, dim, padding_idx=0)
    with torch.no_grad():
        embedding.weight.uniform_(-0.05, 0.05)
        embedding.weight[0].zero_()
    return embedding

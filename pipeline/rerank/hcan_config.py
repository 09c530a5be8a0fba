"""HCAN's configuration (MODELS.md §1): one field per choice the paper, the authors' code or our resolution leaves
open; the model is pipeline/rerank/models/hcan.py, its layers pipeline/rerank/hcan_layers.py."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pipeline.errors import ConfigError
from pipeline.rerank.config import at_least, choice
from pipeline.rerank.text import SOURCES

_CHOICES = {"embeddings": SOURCES, "encoder": ("deep", "wide", "contextual"), "idf_stat": ("df", "cf"),
            "rm_softmax": ("query", "context", "padded", "raw"), "rm_similarity": ("dot", "cosine"),
            "rm_mode": ("paper", "code"), "sm_mode": ("paper", "code"), "loss": ("nll", "hinge")}


@dataclass
class HCANConfig:
    embeddings: str = "glove"        # glove | bert | word2vec | random (paper: 300-d word2vec; not available here)
    bert_path: str = ""              # embeddings="bert": a BERT checkpoint folder; "" = the packaged all-MiniLM-L6-v2
    embedding_dim: int = 0           # 0 = the table's width, fixed when the vocabulary is built (word2vec/random: 300)
    pretrained_vocab: int = 100_000  # also admit the table's first N words (GloVe: most frequent first): words of
                                     # the test set unseen in a small training set keep their own pretrained vector
    min_count: int = 1               # training words seen in fewer texts are unknown (unless the table has them)
    freeze_embeddings: bool = False  # the paper trains them; the padding row stays zero either way
    encoder: str = "deep"            # deep (all paper tables) | wide | contextual
    levels: int = 4                  # N conv levels used (the authors' code builds 5 and never uses the last)
    filters: int = 128               # F: the code's default (its README says 256)
    kernel: int = 2                  # level l covers (l+1)-grams and gets their IDF (other kernels keep that IDF)
    dropout: float = 0.3
    max_query_length: int = 100      # RM features are per query position: the classifier's width depends on it
    max_doc_length: int = 100
    idf_stat: str = "df"             # df | cf (the code's collection frequency)
    rm_softmax: str = "query"        # the code normalises over the query axis; one sentence of the paper row-wise;
                                     # padded: over the query axis with max_query_length - n zero logits (the code
                                     # masks nothing, so its padded query rows compete); raw: S itself
    rm_similarity: str = "dot"       # S = U_q U_c^T (paper); cosine: of L2-normalised rows (not in paper or code)
    rm_mode: str = "paper"           # paper: max + mean pooling; code: max only
    sm_mode: str = "paper"           # paper: last real BiLSTM states; code: ReLU(H), max + mean over time
    sm_hidden: int = 150             # d, both directions together
    rm_only: bool = False
    sm_only: bool = False
    external_features: bool = False  # the code's --ext: + 4 word-overlap features before the MLP
    overlap_mode: str = "code"       # code: the code's compute_overlap_feat (unigram, IDF unigram, bigram, IDF bigram
                                     # shares); stopwords: ours before (word / IDF shares, all and non-stop words)
    char_trigrams: bool = False      # + query vs candidate-text character trigrams (the code's model_option complete)
    with_url: bool = False           # + query vs candidate-URL trigrams (doc_fields["url"]; the code's twitter setting)
    trigram_dim: int = 50            # the code's trigram embedding width
    trigram_kernel: int = 4          # the code's conv kernel over trigrams
    max_query_trigrams: int = 100    # RM width per trigram level, as max_query_length (the code: the longest training
                                     # query, at most 200; microblog queries have <= 53 trigrams)
    max_doc_trigrams: int = 200      # the code's MAX_3GRAM_LENGTH
    max_url_trigrams: int = 120      # the code's MAX_URL_LENGTH (a longer URL keeps its end, as there)
    loss: str = "nll"                # nll: pointwise NLL of P(relevant) [C]; hinge: pairwise, on the logit z_1 - z_0
    margin: float = 1.0              # hinge margin
    seed: int = 0                    # unknown-word rows and word2vec (`hcan(seed=N)` also seeds the training run)

    # Fields added after the first HCAN checkpoints were saved, each with the value those checkpoints were trained
    # with (overlap features were ours, "stopwords", before the code's became the default), so that they still load
    LEGACY: ClassVar[dict] = {"external_features": False, "overlap_mode": "stopwords", "rm_similarity": "dot",
                              "loss": "nll", "margin": 1.0, "char_trigrams": False, "with_url": False,
                              "trigram_dim": 50, "trigram_kernel": 4, "max_query_trigrams": 100,
                              "max_doc_trigrams": 200, "max_url_trigrams": 120}

    def check(self) -> None:
        for name, allowed in _CHOICES.items():
            choice("hcan", name, getattr(self, name), allowed)
        if self.rm_only and self.sm_only:
            raise ConfigError("hcan: rm_only and sm_only exclude each other (that would leave no features)",
                              field="sm_only")
        if self.sm_only and self.trigrams:
            raise ConfigError("hcan: char_trigrams and with_url are relevance matching, which sm_only turns off",
                              field="sm_only")
        for name in ("levels", "filters", "kernel", "max_query_length", "max_doc_length", "sm_hidden", "trigram_dim",
                     "trigram_kernel", "max_query_trigrams", "max_doc_trigrams", "max_url_trigrams"):
            at_least("hcan", name, getattr(self, name), 1)
        at_least("hcan", "dropout", self.dropout, 0)
        at_least("hcan", "margin", self.margin, 0)
        if (self.encoder == "contextual" and self.filters % 2) or self.sm_hidden % 2:
            raise ConfigError("hcan: filters (contextual encoder) and sm_hidden must be even: F/2, d/2 per direction",
                              field="sm_hidden")

    @property
    def trigrams(self) -> bool:
        """Whether any character-trigram branch is on (the model then has a trigram vocabulary)."""
        return self.char_trigrams or self.with_url

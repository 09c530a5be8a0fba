"""HCAN's config: every option declared once (pipeline/declared.py), with the constants of the authors' code. The
network is in network.py, the inputs from texts in inputs.py (docs/models.md §1)."""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.declared import check_declared, field_is, option
from pipeline.errors import ConfigError
from pipeline.rerank.overlap import OVERLAP_FEATURES
from pipeline.rerank.text import SOURCES

CONTEXTUAL = "contextual"  # embeddings: the frozen BERT's token states of each sentence (as MRNN's contextual inputs)
# -- config -----------------------------------------------------------------------------------------------------------
# Constants of the authors' code (jinfengr/hcan), options until 2026-11-27 (migrations.RETIRED kernel, trigram_dim,
# trigram_kernel); the trigram lengths are in inputs.py
KERNEL = 2          # the code's conv kernel of the word encoder: level l of deep / wide covers (l+1)-grams
TRIGRAM_DIM = 50    # the code's trigram embedding width
TRIGRAM_KERNEL = 4  # the code's conv kernel over character trigrams


@dataclass
class HCANConfig:
    embeddings: str = option("glove", "word vectors (paper: 300-d word2vec; not available here); contextual: the "
                             "frozen BERT's last-layer states of each sentence (E = H)", choices=(*SOURCES, CONTEXTUAL))
    bert: str = option("", 'a BERT folder; "" = the packaged all-MiniLM-L6-v2',
                       when=field_is("embeddings", "bert", CONTEXTUAL))
    embedding_dim: int = option(0, "0 = the table's width, fixed when the vocabulary is built (word2vec/random: 300)",
                                at_least=0, integer=True)
    pretrained_vocab: int = option(100_000, "also admit the table's first N words (GloVe: most frequent first): words "
                                   "of the test set unseen in a small training set keep their own pretrained vector",
                                   at_least=0, integer=True)
    freeze_embeddings: bool = option(False, "the paper trains them; the padding row stays zero either way")
    encoder: str = option("deep", "deep (all paper tables) | wide | bilstm (the paper's contextual encoder: stacked "
                          "BiLSTMs; was encoder=contextual)", choices=("deep", "wide", "bilstm"))
    levels: int = option(4, "N conv levels used (the authors' code builds 5 and never uses the last)", at_least=1,
                         integer=True)
    filters: int = option(128, "F: the code's default (its README says 256)", at_least=1, integer=True)
    dropout: float = option(0.3, "", at_least=0, below=1)
    max_query_length: int = option(100, "RM features are per query position: the classifier's width depends on it",
                                   at_least=1, integer=True)
    max_doc_length: int = option(100, "", at_least=1, integer=True)
    rm_softmax: str = option("query", "the code normalises over the query axis; one sentence of the paper row-wise; "
                             "padded: over the query axis with max_query_length - n zero logits (the code masks "
                             "nothing, so its padded query rows compete); raw: S itself",
                             choices=("query", "context", "padded", "raw"))
    rm_similarity: str = option("dot", "S = U_q U_c^T (paper); cosine: of L2-normalised rows (not in paper or code)",
                                choices=("dot", "cosine"))
    sm_hidden: int = option(150, "d, both directions together", at_least=1, integer=True)
    rm_only: bool = False
    sm_only: bool = False
    external_features: bool = option(False, "the code's --ext: + 4 word-overlap features before the MLP")
    overlap_mode: str = option("code", "code: the code's compute_overlap_feat (unigram, IDF unigram, bigram, IDF "
                               "bigram shares); stopwords: ours before (word / IDF shares, all and non-stop words)",
                               choices=tuple(OVERLAP_FEATURES), when=field_is("external_features", True))
    char_trigrams: bool = option(False, "+ query vs candidate-text character trigrams (the code's model_option "
                                 "complete)")
    with_url: bool = option(False, "+ query vs candidate-URL trigrams (doc_fields['url']; the code's twitter setting)")
    loss: str = option("nll", "nll: pointwise NLL of P(relevant) [C]; hinge: pairwise, on the logit z_1 - z_0; "
                       "listwise [R]: each positive's softmax cross-entropy against its question's sampled negatives "
                       "(negatives_per_positive each), on the logit", choices=("nll", "hinge", "listwise"))
    margin: float = option(1.0, "hinge margin", at_least=0, when=field_is("loss", "hinge"))
    start: str = option("random", "random: the MLP of eq. (8) as PyTorch draws it | rm0 [R]: a residual start, "
                        "z_1 - z_0 = w x rm0 + MLP(features), rm0 the level-0 RM's IDF-weighted mean of each query "
                        "word's best match (bench/hcan_inputs_probe.py), w = 1 and the MLP's last layer zero: the "
                        "untrained model ranks exactly as that feature, training learns a correction",
                        choices=("random", "rm0"))
    seed: int = option(0, "unknown-word rows and word2vec (`hcan(seed=N)` also seeds the training run)", integer=True)

    def check(self) -> None:
        check_declared("hcan", self)
        if self.rm_only and self.sm_only:
            raise ConfigError("hcan: rm_only and sm_only exclude each other (that would leave no features)",
                              field="sm_only")
        if self.sm_only and self.trigrams:
            raise ConfigError("hcan: char_trigrams and with_url are relevance matching, which sm_only turns off",
                              field="sm_only")
        if self.start == "rm0" and self.sm_only:
            raise ConfigError("hcan: start=rm0 starts from relevance matching's level 0, which sm_only turns off",
                              field="start")
        if (self.encoder == "bilstm" and self.filters % 2) or self.sm_hidden % 2:
            raise ConfigError("hcan: filters (contextual encoder) and sm_hidden must be even: F/2, d/2 per direction",
                              field="sm_hidden")

    @property
    def trigrams(self) -> bool:
        """Whether any character-trigram branch is on (the model then has a trigram vocabulary)."""
        return self.char_trigrams or self.with_url

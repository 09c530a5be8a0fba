"""MRNN's config: every option declared once (pipeline/declared.py). The network is in network.py, the inputs from
texts in inputs.py (docs/models.md §2)."""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.declared import check_declared, field_is, option
from pipeline.errors import ConfigError
from pipeline.rerank.bert import DEFAULT_BERT
from pipeline.rerank.text import SOURCES
from pipeline.validate import at_least

CONTEXTUAL = "contextual"  # frozen BERT token features: the closest thing here to the paper's BERT/ELMo features
# -- config ------------------------------------------------------------------------------------------------------------
@dataclass
class MRNNConfig:
    embeddings: str = option("glove", "static word tables (pipeline/rerank/text.py), or contextual: frozen BERT "
                             "last-layer word-piece features", choices=(*SOURCES, CONTEXTUAL))
    bert: str = option(DEFAULT_BERT, "a local BERT folder, or the packaged all-MiniLM-L6-v2",
                       when=field_is("embeddings", "bert", CONTEXTUAL))
    embedding_dim: int = option(0, "0 = the table's width (word2vec/random: 300), fixed when the vocabulary is built",
                                at_least=0, integer=True)
    pretrained_vocab: int = option(100_000, "static tables: also admit the table's first N words (unseen test words)",
                                   at_least=0, integer=True)
    freeze_embeddings: bool = option(True, "the paper's inputs are pretrained features [R]; padding row stays zero "
                                     "either way")
    idf_inputs: bool = option(False, "scale each input vector by its word's (word piece's) normalised IDF over the "
                              "training texts [R]: the most common word weighs 0, unseen words 1")
    blocks: int = option(4, "N (6 for SQuAD)", at_least=1, integer=True)
    filters: int = option(256, "s (1024 in the paper; 128-256 on a CPU)", at_least=1, integer=True)
    window: int = option(3, 'ws: kernel of blocks 2..N (odd: "same" padding)', at_least=1, integer=True)
    pooling: str = option("identity", "POOL after PReLU: identity [R] | max (stride 1, window ws)",
                          choices=("identity", "max"))
    summary: str = option("mean", "T: mean over features [R] | sum (paper): after BN + PReLU the sum is ~0.3 s, which "
                          "saturates the softmax of eq. (3) (one-hot aw, no gradient)", choices=("sum", "mean"))
    doc_attention: str = option("fixed", "fixed: FC over the document axis padded to max_doc_length (paper) [R] | "
                                "length_free: a per-position scalar affine map [R]", choices=("fixed", "length_free"))
    attention_init: str = option("identity", "the FC of eq. (6) starts as the identity (dot-product attention) [R] | "
                                 "random", choices=("identity", "random"))
    attention_logits: str = option("distance", "e of eq. (5): distance [R]: (|q_i|^2 - |q_i - d_j|^2) / sqrt(s), "
                                   "attention on the positions nearest in eq. (8) | scaled (dot / sqrt(s)) | dot "
                                   "(paper: its one-hot attention lands on loud, unrelated positions; eval/MRNN.md)",
                                   choices=("dot", "scaled", "distance"))
    init: str = option("random", "random (PyTorch's defaults) | identity [R]: the untrained network is the nearest-"
                       "word distance of its inputs, sum_i min_j |e_q,i - e_d,j| (softly): block 1 an orthonormal "
                       "projection (w -> s), every PReLU the identity (BN is, in evaluation, from its initial "
                       "statistics), blocks 2..N off (sc_n = 0), the conductor uniform, the attention of eq. (6) "
                       "sharpened (eval/MRNN.md section 2.7)", choices=("random", "identity"))
    query_weights: str = option("uniform", "w_i of eq. (8): uniform (paper) | idf [R]: the question word's (piece's) "
                                "normalised IDF over the training texts, as idf_inputs (eval/MRNN.md 2.8)",
                                choices=("uniform", "idf"))
    max_query_length: int = option(40, "words kept (contextual: positions, [CLS] and [SEP] included; then >= 3)",
                                   at_least=1, integer=True)
    max_doc_length: int = option(100, "L_d of the fixed-length document attention (as max_query_length)", at_least=1,
                                 integer=True)
    loss: str = option("triplet", "triplet (paper): batch-hard, the hardest positive against the hardest negative | "
                       "listwise [R]: each positive's softmax cross-entropy of -distance against every negative the "
                       "triplet loss would mine", choices=("triplet", "listwise"))
    margin: float = option(0.5, "triplet margin: 0.5 WikiQA/TrecQA, 0.8 QUASAR-T, 1 SQuAD", at_least=0,
                           when=field_is("loss", "triplet"))
    own_negatives: bool = option(False, "also mine the question's own labelled negatives [R] (else other questions' "
                                 "only)")
    seed: int = option(0, "unknown-word rows and word2vec (`mrnn(seed=N)` also seeds the training run)", integer=True)

    def keeps_idf(self) -> bool:
        """Whether the model holds each input id's normalised IDF (`input_idf`): for idf_inputs or query_weights=idf."""
        return self.idf_inputs or self.query_weights == "idf"

    def check(self) -> None:
        check_declared("mrnn", self)
        if self.embeddings == CONTEXTUAL:                                   # [CLS] + a piece + [SEP]
            for name in ("max_query_length", "max_doc_length"):
                at_least("mrnn", name, getattr(self, name), 3)
        if self.init == "identity" and self.attention_init != "identity":
            raise ConfigError("mrnn: init=identity sharpens the identity attention FC; it needs "
                              "attention_init=identity", field="init")
        if self.window % 2 == 0:
            raise ConfigError(f"mrnn: window={self.window}; it must be odd (same-length convolution)", field="window")

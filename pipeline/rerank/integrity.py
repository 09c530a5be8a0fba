"""What a checkpoint's integrity records compare beyond a file's bytes (pipeline/rerank/checkpoint.py): a safetensors
file's tensors, and a transformers config's meaning -- both the same when transformers (save_pretrained) or another
writer saves the same model again with other bytes; and the pretraining that made a BERT folder (`bert_recipe=`,
checked by bert.py `pinned_bert_folder`)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pipeline.data.files import parse_json


# what a save stamps, and how a model is run rather than what it is (sentence-transformers saves use_cache=False)
_NOT_THE_MODEL = frozenset({"transformers_version", "_name_or_path", "use_cache", "return_dict", "output_attentions",
                            "output_hidden_states", "torchscript"})


def transformers_meaning(config: dict) -> dict:
    """A transformers config as transformers reads it: its defaults filled in (save_pretrained writes only the keys
    that differ from them), less what a save stamps and the flags of how the model is run (`_NOT_THE_MODEL`)."""
    from transformers import AutoConfig

    try:
        read = AutoConfig.for_model(**config).to_dict()
    except (ValueError, TypeError, KeyError):
        read = dict(config)
    return {key: value for key, value in read.items() if key not in _NOT_THE_MODEL}


_tensor_digests: dict[tuple, str | None] = {}


def tensors_digest(path: Path) -> str | None:
    """sha256 of a safetensors file's tensors -- each name, dtype, shape and value, by name -- rather than of its
    bytes, which another writer lays out otherwise; None for a file safetensors cannot read. Once per process and
    file version."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _tensor_digests:
        import torch
        from safetensors import SafetensorError, safe_open

        digest = hashlib.sha256()
        try:
            with safe_open(str(path), framework="pt") as handle:
                for name in sorted(handle.keys()):
                    tensor = handle.get_tensor(name)
                    digest.update(json.dumps([name, str(tensor.dtype), list(tensor.shape)]).encode())
                    digest.update(tensor.reshape(-1).contiguous().view(torch.uint8).numpy().tobytes())
            _tensor_digests[key] = digest.hexdigest()
        except (SafetensorError, OSError, ValueError, RuntimeError):
            _tensor_digests[key] = None
    return _tensor_digests[key]


PRETRAIN_RECORD = "pretrain.json"   # pretrain-mlm's options, corpus and vocabulary (pipeline/training/pretrain.py)
PRETRAIN_STATE = "state"            # its saved states; state/current.json names the committed one


def pretraining_recipe(folder: Path) -> tuple[str | None, str]:
    """(the sha256 of the folder's pretrain.json, ""), when `irpipe pretrain-mlm` made the folder, saved its last step
    and the folder still holds that step's tensors; else (None, why not). The options, corpus and vocabulary decide
    the weights, up to the floating-point rounding of the CPU that ran it: the same recipe on every machine."""
    try:
        settings = parse_json((folder / PRETRAIN_RECORD).read_text(encoding="utf-8"))
        commit = parse_json((folder / PRETRAIN_STATE / "current.json").read_text(encoding="utf-8"))
        steps, saved = settings["options"]["steps"], folder / PRETRAIN_STATE / commit["folder"] / "model.safetensors"
        if commit["step"] != steps:
            return None, f"its pretraining saved step {commit['step']} of {steps}, not the last"
        if tensors_digest(saved) != tensors_digest(folder / "model.safetensors"):
            return None, f"its model.safetensors is not the tensors its pretraining saved last ({saved})"
    except (OSError, ValueError, KeyError, TypeError) as error:
        return None, f"no finished `irpipe pretrain-mlm` run recorded there ({type(error).__name__}: {error})"
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest(), ""

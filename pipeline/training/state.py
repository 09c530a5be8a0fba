"""Resumable training state, nothing pickled: the last epoch's model (a checkpoint folder), optimizer, scheduler and
RNG states (safetensors for tensors, JSON for the rest)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from pipeline.data.files import atomic_write
from pipeline.errors import ConfigError
from pipeline.rerank.checkpoint import load_checkpoint, save_checkpoint


def encode_state(obj, tensors: dict):
    """Split a nested state (optimizer/scheduler state_dicts, RNG states) into JSON and named tensors."""
    if isinstance(obj, torch.Tensor):
        key = f"t{len(tensors)}"
        tensors[key] = obj.detach().cpu().contiguous()
        return {"__tensor__": key}
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in obj):
            return {k: encode_state(v, tensors) for k, v in obj.items()}
        return {"__items__": [[encode_state(k, tensors), encode_state(v, tensors)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [encode_state(v, tensors) for v in obj]}
    if isinstance(obj, list):
        return [encode_state(v, tensors) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot save {type(obj).__name__} in training state")


def decode_state(obj, tensors: dict):
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__items__" in obj:
            return {decode_state(k, tensors): decode_state(v, tensors) for k, v in obj["__items__"]}
        if "__tuple__" in obj:
            return tuple(decode_state(v, tensors) for v in obj["__tuple__"])
        return {k: decode_state(v, tensors) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode_state(v, tensors) for v in obj]
    return obj


def rng_state(generator) -> dict:
    kind, keys, position, has_gauss, gauss = np.random.get_state()
    state = {"torch": torch.get_rng_state(), "shuffle": generator.get_state(), "python": random.getstate(),
             "numpy": [kind, keys.tolist(), position, has_gauss, gauss]}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict, generator) -> None:
    torch.set_rng_state(state["torch"])
    generator.set_state(state["shuffle"])
    random.setstate(state["python"])
    kind, keys, position, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), position, has_gauss, gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_state(directory: Path, model, trainer: dict) -> None:
    save_checkpoint(model, directory, training={"state": "last epoch, for --resume"})
    tensors: dict = {}
    encoded = encode_state(trainer, tensors)
    tmp = directory / ".trainer.safetensors.tmp"
    save_file(tensors, str(tmp))
    tmp.replace(directory / "trainer.safetensors")
    with atomic_write(directory / "trainer.json") as out:  # written last: the epoch is complete when it is there
        json.dump(encoded, out)


def load_state(directory: Path) -> tuple[torch.nn.Module, dict]:
    path = directory / "trainer.json"
    try:
        encoded = json.loads(path.read_text(encoding="utf-8"))
        tensors = load_file(str(directory / "trainer.safetensors"))
    except (OSError, ValueError) as error:
        raise ConfigError(f"{directory}: cannot read the training state ({error}); start afresh without --resume "
                          "in a new --out folder") from None
    return load_checkpoint(directory), decode_state(encoded, tensors)

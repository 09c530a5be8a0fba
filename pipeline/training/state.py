"""Resumable training state, nothing pickled: the last epoch's model (a checkpoint folder), optimizer, scheduler and
RNG states (safetensors for tensors, JSON for the rest).

    OUT/state/epoch-0003/     model.safetensors, config.json, assets, trainer.safetensors, trainer.json
    OUT/state/current.json    {"folder": "epoch-0003", "epoch": 3, "files": {name: sha1}}: the commit

A state is committed as a whole: its folder is written first, then `current.json` is replaced atomically; a kill at
any instant leaves either the previous commit or the new one, never a mix. Resuming checks every file against its
recorded digest and refuses a state that does not match.
"""
from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from pipeline.data.files import atomic_write
from pipeline.errors import ConfigError, IrpipeError
from pipeline.rerank.checkpoint import file_digest, load_checkpoint, save_checkpoint

COMMIT = "current.json"


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


def has_state(root: Path) -> bool:
    return (root / COMMIT).is_file()


def committed_epoch(root: Path) -> int:
    """The epoch of the committed state (0: none)."""
    try:
        return int(json.loads((root / COMMIT).read_text(encoding="utf-8"))["epoch"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def save_state(root: Path, model, trainer: dict) -> None:
    """Write the state after `trainer["epoch"]` into a new folder, then commit it by rewriting `root/current.json`
    (atomically: the one step that makes it the state), then remove the folders it replaces."""
    folder = root / f"epoch-{trainer['epoch']:04d}"
    if folder.exists():  # a save of this epoch that was interrupted before its commit
        shutil.rmtree(folder)
    save_checkpoint(model, folder, training={"state": "last epoch, for --resume"})
    tensors: dict = {}
    encoded = encode_state(trainer, tensors)
    tmp = folder / ".trainer.safetensors.tmp"
    save_file(tensors, str(tmp))
    os.replace(tmp, folder / "trainer.safetensors")
    with atomic_write(folder / "trainer.json") as out:
        json.dump(encoded, out)
    files = {p.name: file_digest(p) for p in sorted(folder.iterdir()) if p.is_file()}
    with atomic_write(root / COMMIT) as out:  # the commit point
        json.dump({"folder": folder.name, "epoch": trainer["epoch"], "files": files}, out, indent=2)
    sweep_state(root)


def sweep_state(root: Path) -> None:
    """Remove state folders that the commit does not name (older epochs, saves interrupted before their commit)."""
    current = json.loads((root / COMMIT).read_text(encoding="utf-8"))["folder"] if has_state(root) else None
    for folder in root.glob("epoch-*"):
        if folder.name != current:
            shutil.rmtree(folder, ignore_errors=True)


def load_state(root: Path) -> tuple[torch.nn.Module, dict]:
    """The committed state: every file checked against the digest recorded at its commit."""
    commit = root / COMMIT
    try:
        record = json.loads(commit.read_text(encoding="utf-8"))
        folder = root / record["folder"]
        for name, digest in record["files"].items():
            if file_digest(folder / name) != digest:
                raise ValueError(f"{folder / name} changed after it was saved")
        encoded = json.loads((folder / "trainer.json").read_text(encoding="utf-8"))
        tensors = load_file(str(folder / "trainer.safetensors"))
    except (OSError, ValueError, KeyError, TypeError, IrpipeError) as error:
        raise ConfigError(f"{commit}: the training state is inconsistent ({error}); it cannot be resumed exactly: "
                          "start afresh in a new --out folder (or delete this one)") from None
    return load_checkpoint(folder), decode_state(encoded, tensors)

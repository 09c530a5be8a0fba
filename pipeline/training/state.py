"""Resumable training state, nothing pickled, for `irpipe train` (a state per epoch) and `irpipe pretrain-mlm` (a
state every `save_every` steps): the model, the optimizer, schedule and grad-scaler states, the RNG states and the
loop's own bookkeeping, tensors in safetensors and the rest in JSON.

    OUT/state/epoch-0003/      the model's files, trainer.safetensors, trainer.json     (StateStore(root, "epoch", 4))
    OUT/state/step-0001500/                                                            (StateStore(root, "step", 7))
    OUT/state/current.json     {"folder": "epoch-0003", "epoch": 3, "files": {name: sha256}}: the commit

A state is committed as a whole: its folder is written first (each file through a scratch file renamed into place),
then `current.json` is replaced atomically; a kill at any instant leaves either the previous commit or the new one,
never a mix. Resuming checks every file against its recorded digest and refuses a state that does not match;
`sweep` removes the folders the commit does not name (older states, saves killed before their commit).
"""
from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from pipeline.data.files import atomic_write, write_by_path, parse_json, writing
from pipeline.errors import ConfigError, IrpipeError
from pipeline.rerank.checkpoint import file_digest

COMMIT = "current.json"
TENSORS, RECORD = "trainer.safetensors", "trainer.json"


# -- nested states as JSON + named tensors -------------------------------------------------------------------------

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


# -- RNG ---------------------------------------------------------------------------------------------------------

def rng_state(generator: torch.Generator) -> dict:
    """torch's (dropout, init), the loop's own `generator` (shuffling, negatives, masks), Python's, NumPy's and
    CUDA's RNG states."""
    kind, keys, position, has_gauss, gauss = np.random.get_state()
    state = {"torch": torch.get_rng_state(), "shuffle": generator.get_state(), "python": random.getstate(),
             "numpy": [kind, keys.tolist(), position, has_gauss, gauss]}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict, generator: torch.Generator) -> None:
    """Put back what `rng_state` saved (a state without Python/NumPy/CUDA parts leaves those as they are)."""
    torch.set_rng_state(state["torch"])
    generator.set_state(state["shuffle"])
    if "python" in state:
        random.setstate(state["python"])
    if "numpy" in state:
        kind, keys, position, has_gauss, gauss = state["numpy"]
        np.random.set_state((kind, np.array(keys, dtype=np.uint32), position, has_gauss, gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# -- the committed state -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StateStore:
    """The saved states under `root`, one folder `<unit>-<number>` each, the committed one named by current.json."""

    root: Path
    unit: str = "epoch"   # what a state is counted in: "epoch" (irpipe train) | "step" (pretrain-mlm)
    width: int = 4        # digits of the folder's number

    def exists(self) -> bool:
        return (self.root / COMMIT).is_file()

    def committed(self) -> int:
        """The epoch (step) of the committed state; 0 without one."""
        try:
            return int(self._commit()[self.unit])
        except (OSError, ValueError, KeyError, TypeError):
            return 0

    def save(self, number: int, write_model: Callable[[Path], None], trainer: dict) -> None:
        """Write the state after epoch (step) `number` into a new folder -- `write_model(folder)` the model's files,
        then `trainer` -- commit it by replacing current.json (the one step that makes it the state), then sweep."""
        folder = self.root / f"{self.unit}-{number:0{self.width}d}"
        # a full or read-only disk: exit 2 naming the folder, this save's half-written folder removed, the last
        # commit kept (`--resume` continues from it once there is space)
        with writing(folder, cleanup=lambda: shutil.rmtree(folder, ignore_errors=True)):
            if folder.exists():  # a save of this number that was killed before its commit
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            write_model(folder)
            tensors: dict = {}
            encoded = encode_state(trainer, tensors)
            write_by_path(folder / TENSORS, lambda path: save_file(tensors, path),
                          needed=sum(t.numel() * t.element_size() for t in tensors.values()))
            with atomic_write(folder / RECORD) as out:
                json.dump(encoded, out)
            files = {p.name: file_digest(p) for p in sorted(folder.iterdir()) if p.is_file()}
            with atomic_write(self.root / COMMIT) as out:  # the commit point
                json.dump({"folder": folder.name, self.unit: number, "files": files}, out, indent=2)
        self.sweep()

    def load(self) -> tuple[Path, dict]:
        """(folder, trainer) of the committed state, every file checked against the digest recorded at its commit;
        the caller loads the model from the folder."""
        try:
            record = self._commit()
            folder = self.root / record["folder"]
            for name, digest in record["files"].items():
                if file_digest(folder / name) != digest:
                    raise ValueError(f"{folder / name} changed after it was saved")
            encoded = parse_json((folder / RECORD).read_text(encoding="utf-8"))
            return folder, decode_state(encoded, load_file(str(folder / TENSORS)))
        except (OSError, ValueError, KeyError, TypeError, IrpipeError) as error:
            raise self.inconsistent(error) from None

    def inconsistent(self, error: Exception) -> ConfigError:
        return ConfigError(f"{self.root / COMMIT}: the training state is inconsistent ({error}); it cannot be "
                           "resumed exactly: start afresh in a new output folder (or delete this one)")

    def sweep(self) -> None:
        """Remove the state folders that the commit does not name (older states, saves killed before their
        commit)."""
        if not self.root.is_dir():
            return
        current = self._commit()["folder"] if self.exists() else None
        for folder in self.root.glob(f"{self.unit}-*"):
            if folder.name != current:
                shutil.rmtree(folder, ignore_errors=True)

    def _commit(self) -> dict:
        return json.loads((self.root / COMMIT).read_text(encoding="utf-8"))

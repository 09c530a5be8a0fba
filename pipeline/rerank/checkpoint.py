"""Checkpoints: a folder from which a reranker model rebuilds alone, with no code unpickled.

    DIR/config.json          {"format": 1, "model": "monobert", "config": {dataclass fields}, "irpipe": "0.1.0",
                              "training": {recipe, epochs, dev scores, ...}}
    DIR/model.safetensors    the weights (safetensors only: `torch.load` is never called)
    DIR/...                  the model's assets (vocabularies, IDF tables, tokenizer files: `save_assets`)

`save_checkpoint(model, DIR)` writes one; `load_checkpoint(DIR)` rebuilds the model: the model class comes from
the model registry (pipeline/rerank/models) by the name in config.json, the config dataclass from its fields, the untrained network from
`load_assets`, then the weights. Whatever is wrong -- a missing file, bad JSON, an unknown model, a config field
the model does not have or of the wrong type, a tensor missing, unexpected or of the wrong shape -- raises a
`CheckpointError` naming the file and the problem. Other files in DIR (a training log, resume state) are ignored.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline import __version__
from pipeline.data.files import atomic_write, file_sha256
from pipeline.errors import ConfigError, InputError, UnknownNameError
from pipeline.log import logger
from pipeline.rerank import models
from pipeline.rerank.config import config_to_dict, make_config

if TYPE_CHECKING:
    from pipeline.rerank.model import RerankModel

FORMAT = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"


class CheckpointError(InputError):
    """A checkpoint folder that cannot be loaded: names the file (and the field or tensor) at fault."""


# -- the model and its config from config.json -----------------------------------------------------------------

def checkpoint_model_class(name: str, where: str | Path) -> type["RerankModel"]:
    """The model class named by a checkpoint's config.json (a CheckpointError naming the file otherwise)."""
    try:
        return models.model_class(name)
    except UnknownNameError as error:
        raise CheckpointError(where, f"{error}", field="model") from None


def checkpoint_config(config_class: type, fields, where: str | Path, overrides: dict | None = None):
    """The config dataclass from config.json's fields (all present, each of its kind, the whole checked), then
    `overrides`; what is wrong is a CheckpointError naming the file and field. A field the model gained after a
    checkpoint was saved is read as the value it was trained with, when the config class says it
    (`LEGACY = {field: value}`), and logged; any other missing field is an error."""
    if not isinstance(fields, dict):
        raise CheckpointError(where, "the model config is not a JSON object", field="config")
    renamed = getattr(config_class, "RENAMED", {})  # a field saved under its old name
    fields = {renamed.get(name, name): value for name, value in fields.items()}
    legacy = getattr(config_class, "LEGACY", {})
    older = {f.name: legacy[f.name] for f in dataclasses.fields(config_class) if f.name not in fields and f.name in legacy}
    if older:
        logger.info("%s: saved before the config field(s) %s; read as it was trained: %s", where, ", ".join(older),
                    ", ".join(f"{k}={v}" for k, v in older.items()))
        fields = fields | older
    missing = [f.name for f in dataclasses.fields(config_class) if f.name not in fields]
    if missing:
        raise CheckpointError(where, f"the model config lacks the field(s) {', '.join(missing)} of "
                              f"{config_class.__name__}", field=f"config.{missing[0]}")
    try:
        config = make_config(config_class, fields)
    except ConfigError as error:
        hint = ": a checkpoint of another model or version?" if "has no field" in str(error) else ""
        raise CheckpointError(where, f"{error}{hint}", field=f"config.{error.field}") from None
    return make_config(config_class, overrides, base=config) if overrides else config


# -- saving and loading --------------------------------------------------------------------------------------------

def save_checkpoint(model: "RerankModel", directory: str | Path, training: dict | None = None) -> Path:
    """Write `model` as a checkpoint folder (weights and assets first, config.json last, each file atomically)."""
    from safetensors.torch import save_model

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{WEIGHTS_FILE}.{os.getpid()}.tmp"
    try:
        # One metadata key: safetensors writes a header map of several keys in a per-process order, so the same
        # weights would give other bytes (and another checkpoint digest, another run-cache key) in each process.
        save_model(model, str(tmp), metadata={"format": "pt"})  # writes by path only
        os.replace(tmp, directory / WEIGHTS_FILE)
    finally:
        tmp.unlink(missing_ok=True)
    model.save_assets(directory)
    with atomic_write(directory / CONFIG_FILE) as out:
        json.dump({"format": FORMAT, "model": model.name, "config": config_to_dict(model.config), "irpipe": __version__,
                   "training": training or {}}, out, indent=2, ensure_ascii=False)
        out.write("\n")
    return directory


def read_checkpoint_config(directory: str | Path) -> dict:
    """config.json of a checkpoint, checked for shape (not yet against the model)."""
    path = Path(directory) / CONFIG_FILE
    if not Path(directory).is_dir():
        raise CheckpointError(directory, "no such checkpoint folder")
    if not path.is_file():
        raise CheckpointError(path, "missing: a checkpoint folder holds config.json and model.safetensors")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise CheckpointError(path, f"not valid JSON: {error.msg}", line=error.lineno) from None
    except UnicodeDecodeError:
        raise CheckpointError(path, "not UTF-8 text") from None
    if not isinstance(data, dict):
        raise CheckpointError(path, "expected a JSON object")
    for key, kind in (("model", str), ("config", dict)):
        if not isinstance(data.get(key), kind):
            raise CheckpointError(path, f"missing or not a {kind.__name__}", field=key)
    if data.get("format", FORMAT) != FORMAT:
        raise CheckpointError(path, f"checkpoint format {data['format']!r}; this irpipe reads format {FORMAT}",
                              field="format")
    return data


def load_checkpoint(directory: str | Path, overrides: dict[str, Any] | None = None) -> "RerankModel":
    """Rebuild the model saved in `directory` (on the CPU, in eval mode). `overrides` replace config fields
    before the model is built (e.g. a longer max_length); one that changes a weight's shape fails clearly."""
    directory = Path(directory)
    data = read_checkpoint_config(directory)
    config_path = directory / CONFIG_FILE
    cls = checkpoint_model_class(data["model"], config_path)
    config = checkpoint_config(cls.config_class, data["config"], config_path, overrides)
    weights = directory / WEIGHTS_FILE
    if not weights.is_file():
        raise CheckpointError(weights, "missing: the model's weights")
    model = cls.load_assets(config, directory)
    load_weights(model, weights)
    return model.eval()


def load_weights(model, path: str | Path) -> None:
    """Load a safetensors file into `model`, every tensor checked for name and shape first."""
    from safetensors import SafetensorError, safe_open
    from safetensors.torch import load_model

    path = Path(path)
    expected = model.state_dict()
    try:
        with safe_open(str(path), framework="pt") as handle:
            shapes = {key: tuple(handle.get_slice(key).get_shape()) for key in handle.keys()}
    except (SafetensorError, OSError, ValueError) as error:
        raise CheckpointError(path, f"not a readable safetensors file ({error})") from None
    for key, shape in sorted(shapes.items()):
        if key in expected and tuple(expected[key].shape) != shape:
            raise CheckpointError(path, f"tensor {key} has shape {list(shape)}, the model built from config.json "
                                  f"expects {list(expected[key].shape)}")
    try:
        missing, unexpected = load_model(model, str(path), strict=False)
    except (SafetensorError, RuntimeError) as error:
        raise CheckpointError(path, f"cannot load the weights ({error})") from None
    if missing or unexpected:
        parts = [f"{label} {', '.join(sorted(keys)[:5])}{' ...' if len(keys) > 5 else ''}"
                 for label, keys in (("missing tensors", missing), ("unexpected tensors", unexpected)) if keys]
        raise CheckpointError(path, "; ".join(parts) + " (a checkpoint of another model or config?)",
                              field=sorted(missing or unexpected)[0])


def file_digest(path: Path) -> str:
    """The sha256 of a checkpoint file (memoised per process); a CheckpointError when it is missing."""
    if not path.is_file():
        raise CheckpointError(path, "missing")
    return file_sha256(path)


def checkpoint_digest(directory: str | Path) -> str:
    """sha1 over the sha256 of a checkpoint's config.json and weights: a retrained checkpoint invalidates cached
    runs."""
    digest = hashlib.sha1()
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        digest.update(file_digest(Path(directory) / name).encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from, in a form another process (a cluster's worker) can load it again from: a
    checkpoint folder (a trained recipe's too), or a pretrained model's name and config overrides."""

    name: str
    checkpoint: str | None = None
    overrides: tuple[tuple[str, Any], ...] = ()

    def load(self) -> "RerankModel":
        """The model, on the CPU, in eval mode."""
        if self.checkpoint is not None:
            return load_checkpoint(self.checkpoint, dict(self.overrides))
        model_class = models.model_class(self.name)
        return model_class(make_config(model_class.config_class, dict(self.overrides))).eval()

"""Checkpoints: a folder from which a reranker model rebuilds alone, with no code unpickled.

    DIR/config.json          {"format": 1, "model": "monobert", "config": {dataclass fields}, "irpipe": "0.1.0",
                              "training": {recipe, epochs, dev scores, ...}}
    DIR/model.safetensors    the weights (safetensors only: `torch.load` is never called)
    DIR/...                  the model's assets (vocabularies, IDF tables, tokenizer files: `save_assets`)

`save_checkpoint(model, DIR)` writes one; `load_checkpoint(DIR)` rebuilds the model: the model class comes from
the stage registry by the name in config.json, the config dataclass from its fields, the untrained network from
`load_assets`, then the weights. Whatever is wrong -- a missing file, bad JSON, an unknown model, a config field
the model does not have or of the wrong type, a tensor missing, unexpected or of the wrong shape -- raises a
`CheckpointError` naming the file and the problem. Other files in DIR (a training log, resume state) are ignored.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline import __version__
from pipeline.data.files import atomic_write
from pipeline.errors import ConfigError, InputError, UnknownNameError

if TYPE_CHECKING:
    from pipeline.rerank.model import RerankModel

FORMAT = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"


class CheckpointError(InputError):
    """A checkpoint folder that cannot be loaded: names the file (and the field or tensor) at fault."""


# -- the model registry: checkpoint "model" names are stage names --------------------------------------------------

def model_class(name: str, where: str | Path | None = None) -> type["RerankModel"]:
    """The `RerankModel` subclass registered under `name` (its stage's `model_class`)."""
    from pipeline.stage import get_stage_class, stage_names

    try:
        stage = get_stage_class(name)
    except UnknownNameError as error:
        if where is None:
            raise
        raise CheckpointError(where, f"unknown model {name!r}: {error}", field="model") from None
    model = getattr(stage, "model_class", None)
    if model is None:
        message = f"{name!r} is a stage, not a neural reranker model (stages: {', '.join(stage_names())})"
        raise CheckpointError(where, message, field="model") if where is not None else ConfigError(message)
    return model


# -- config dataclasses <-> JSON -----------------------------------------------------------------------------------

def config_to_dict(config) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(config)))  # tuples -> lists, as they come back from JSON


def config_from_dict(config_class: type, fields: dict, where: str | Path, strict: bool = True):
    """The config dataclass from JSON fields, checked field by field; `strict`: no field may be missing."""
    if not isinstance(fields, dict):
        raise CheckpointError(where, "the model config is not a JSON object", field="config")
    known = {f.name: f for f in dataclasses.fields(config_class)}
    for name, value in fields.items():
        problem = field_problem(config_class, name, value)
        if problem:
            hint = ": a checkpoint of another model or version?" if name not in known else ""
            raise CheckpointError(where, problem + hint, field=f"config.{name}")
    missing = [name for name, f in known.items() if name not in fields and (strict or _default(f) is dataclasses.MISSING)]
    if missing:
        raise CheckpointError(where, f"the model config lacks the field(s) {', '.join(missing)} of "
                              f"{config_class.__name__}", field=f"config.{missing[0]}")
    values = {name: tuple(v) if isinstance(_default(known[name]), tuple) and isinstance(v, list) else v
              for name, v in fields.items()}
    return config_class(**values)


def field_problem(config_class: type, name: str, value) -> str | None:
    """Why `value` cannot be the field `name` of the config dataclass, or None when it can."""
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    if name not in fields:
        return f"{config_class.__name__} has no field {name!r} (fields: {', '.join(fields)})"
    default = _default(fields[name])
    if not _same_kind(value, default):
        return f"{name}={value!r} should be of type {type(default).__name__}, like the default {default!r}"
    return None


def _default(field: dataclasses.Field):
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def _same_kind(value, default) -> bool:
    """Whether a JSON value fits a field by its default's type (None and missing defaults accept anything)."""
    if default is None or default is dataclasses.MISSING or value is None and default is None:
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, str):
        return isinstance(value, str)
    if isinstance(default, (list, tuple)):
        return isinstance(value, list)
    if isinstance(default, dict):
        return isinstance(value, dict)
    return True


# -- saving and loading --------------------------------------------------------------------------------------------

def save_checkpoint(model: "RerankModel", directory: str | Path, training: dict | None = None) -> Path:
    """Write `model` as a checkpoint folder (weights and assets first, config.json last, each file atomically)."""
    from safetensors.torch import save_model

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{WEIGHTS_FILE}.{os.getpid()}.tmp"
    try:
        save_model(model, str(tmp), metadata={"format": "pt", "model": model.name})  # writes by path only
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
    cls = model_class(data["model"], config_path)
    config = config_from_dict(cls.config_class, data["config"], config_path)
    if overrides:
        config = dataclasses.replace(config, **overrides)
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


_digests: dict[tuple[str, int, int], str] = {}


def checkpoint_digest(directory: str | Path) -> str:
    """sha1 of a checkpoint's config.json and weights: a retrained checkpoint invalidates cached runs."""
    directory = Path(directory)
    digest = hashlib.sha1()
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        path = directory / name
        if not path.is_file():
            raise CheckpointError(path, "missing")
        stat = path.stat()
        key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
        if key not in _digests:
            file_digest = hashlib.sha1()
            with open(path, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    file_digest.update(chunk)
            _digests[key] = file_digest.hexdigest()
        digest.update(_digests[key].encode())
    return digest.hexdigest()

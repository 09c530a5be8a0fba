"""Checkpoints: a folder from which a reranker model rebuilds alone, with no code unpickled.

    DIR/config.json          {"format": 1, "model": "monobert", "config": {dataclass fields}, "irpipe": "0.1.0",
                              "training": {recipe, epochs, dev scores, ...},
                              "files": {"model.safetensors": {"bytes": N, "sha256": HEX}, asset: {...}},
                              "digest": sha1 of model + config + files}
    DIR/model.safetensors    the weights (safetensors only: `torch.load` is never called)
    DIR/...                  the model's assets (vocabularies, IDF tables, tokenizer files: `save_assets`)

`save_checkpoint(model, DIR)` writes one; `load_checkpoint(DIR)` rebuilds the model: the model class comes from
the model registry (pipeline/rerank/models) by the name in config.json, the config dataclass from its fields, the untrained network from
`load_assets`, then the weights. Whatever is wrong -- a missing file, bad JSON, an unknown model, a config field
the model does not have or of the wrong type, a tensor missing, unexpected or of the wrong shape -- raises a
`CheckpointError` naming the file and the problem. Other files in DIR (a training log, resume state) are ignored.

Integrity: config.json records the size and sha256 of every file the save wrote (`files`; of a safetensors file also
the sha256 of its tensors: each name, dtype, shape and value) and a digest of the model, its config and that list
(`digest`); loading checks them (the sizes always, each file's sha256 once per process), so a flipped byte or a
truncated file anywhere is a CheckpointError naming the file and how to rebuild it (a trained recipe of the cache:
remove the folder and run the same command again), never a model that scores wrongly. A weights file whose bytes
differ but whose tensors are those saved (written again by transformers' save_pretrained, or another writer) loads;
config.json saved again by transformers loads when irpipe's record is intact and the transformers config means what
irpipe exported (`digests`: the two checked apart, the transformers config with transformers' defaults filled in).
Where the tensors differ, the error says which case it is: re-saved with other weights (config.json saved again by
transformers too), or damaged (config.json as saved). Checkpoints saved before these records load unchecked.

Hugging Face folders (pipeline/rerank/hf_folders.py): a monobert or biencoder checkpoint is also a sentence-transformers
CrossEncoder / SentenceTransformer folder (config.json holds the transformers config beside irpipe's record, which the
digest covers too), and a cross-encoder or sentence-transformers folder made elsewhere (no irpipe record) loads as
a monobert / biencoder checkpoint, its config read from the folder.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.version import __version__
from pipeline.data.files import atomic_write, cache_root, file_sha256, json_digest, parse_json
from pipeline.errors import CheckpointError, ConfigError, UnknownNameError
from pipeline.log import logger
from pipeline.rerank import hf_folders, migrations, models
from pipeline.rerank.config import config_to_dict, make_config
from pipeline.rerank.hf_cache import model_folder
from pipeline.rerank.integrity import tensors_digest, transformers_meaning

if TYPE_CHECKING:
    from pipeline.rerank.model import RerankModel

FORMAT = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"


# -- the model and its config from config.json -----------------------------------------------------------------

def checkpoint_model_class(name: str, where: str | Path) -> type["RerankModel"]:
    """The model class named by a checkpoint's config.json (a CheckpointError naming the file otherwise)."""
    try:
        return models.model_class(name)
    except UnknownNameError as error:
        raise CheckpointError(where, f"{error}", field="model") from None


_RETIRED_LOGGED: set[str] = set()  # checkpoints whose retired fields were logged (once a file, a process)


def checkpoint_config(config_class: type, fields, where: str | Path, overrides: dict | None = None):
    """The config dataclass from config.json's fields (all present, each of its kind, the whole checked), then
    `overrides`; what is wrong is a CheckpointError naming the file and field. A field the model gained after a
    checkpoint was saved is read as the value it was trained with, when the config class says it
    (pipeline/rerank/migrations.py), and logged; any other missing field is an error. A retired field
    (migrations.RETIRED) at the value the class computes now is dropped (logged once a file); at another value the
    checkpoint is a model irpipe no longer computes, a CheckpointError naming the field."""
    if not isinstance(fields, dict):
        raise CheckpointError(where, "the model config is not a JSON object", field="config")
    renamed = migrations.renamed(config_class)  # a field saved under its old name
    fields = {renamed.get(name, name): value for name, value in fields.items()}
    fields |= {name: values[fields[name]] for name, values in migrations.values_renamed(config_class).items()
               if isinstance(fields.get(name), str) and fields[name] in values}  # a value saved under its old name
    retired = {name: value for name, value in fields.items() if name in migrations.retired(config_class)}
    for name, value in retired.items():  # a retired field: dropped at the value computed now, refused at another
        problem = migrations.retired_value_problem(config_class, name, value)
        if problem:
            raise CheckpointError(where, problem, field=f"config.{name}")
    if retired:
        fields = {name: value for name, value in fields.items() if name not in retired}
        if str(where) not in _RETIRED_LOGGED:
            _RETIRED_LOGGED.add(str(where))
            logger.info("%s: saved with the retired config field(s) %s at the value(s) computed now; dropped", where,
                        ", ".join(f"{k}={v}" for k, v in retired.items()))
    legacy = migrations.added(config_class)
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
    before = _file_stats(directory)
    tmp = directory / f".{WEIGHTS_FILE}.{os.getpid()}.tmp"
    try:
        # One metadata key: safetensors writes a header map of several keys in a per-process order, so the same
        # weights would give other bytes (and another checkpoint digest, another run-cache key) in each process.
        save_model(model, str(tmp), metadata={"format": "pt"})  # writes by path only
        os.replace(tmp, directory / WEIGHTS_FILE)
    finally:
        tmp.unlink(missing_ok=True)
    model.save_assets(directory)
    transformers_config = hf_folders.export(model, directory)  # {} for a model with no transformers form
    written = {name for name, stat in _file_stats(directory).items() if before.get(name) != stat} | {WEIGHTS_FILE}
    files = {name: _file_record(directory / name) for name in sorted(written)}
    record = {"format": FORMAT, "model": model.name, "config": config_to_dict(model.config), "irpipe": __version__,
              "training": training or {}, "files": files} | transformers_config
    if transformers_config:  # the two halves apart: a transformers save rewrites the second's bytes, not its meaning
        record["digests"] = {"irpipe": _digest(record, transformers=False),
                             "transformers": json_digest(transformers_meaning(transformers_config))}
    record["digest"] = _digest(record)
    with atomic_write(directory / CONFIG_FILE) as out:
        json.dump(record, out, indent=2, ensure_ascii=False)
        out.write("\n")
    return directory


def _file_stats(directory: Path) -> dict[str, tuple]:
    """name (relative, '/'-separated) -> (size, mtime, inode) of the files under `directory`, less config.json and
    scratch (dot) files: what a save wrote is what changed between two of these."""
    stats = {}
    for path in directory.rglob("*"):
        name = path.relative_to(directory).as_posix()
        if name != CONFIG_FILE and not any(part.startswith(".") for part in name.split("/")) and path.is_file():
            stat = path.stat()
            stats[name] = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
    return stats


def _file_record(path: Path) -> dict:
    record = {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
    return record | {"tensors": tensors_digest(path)} if path.suffix == ".safetensors" else record


def _digest(record: dict, transformers: bool = True) -> str:
    """sha1 of the model, its config, the file records and (when there is one and `transformers`) the
    transformers config."""
    digested = {key: record.get(key) for key in ("model", "config", "files")}
    transformers_config = _transformers_config(record) if transformers else {}
    return json_digest(digested | {"transformers": transformers_config} if transformers_config else digested)


def _transformers_config(record: dict) -> dict:
    return {key: value for key, value in record.items() if key not in hf_folders.IRPIPE_KEYS}


def verify_checkpoint(directory: str | Path, data: dict | None = None) -> None:
    """Check a checkpoint against the records its save left in config.json (see the module docstring): each file
    there with its size, and its sha256 (computed once per process and file version); a CheckpointError naming the
    damaged file and how to rebuild it otherwise."""
    directory = Path(directory)
    data = data if data is not None else read_checkpoint_config(directory)
    files = data.get("files")
    if files is None:
        return  # saved before checkpoints carried these records
    resaved = False  # config.json saved again by transformers, irpipe's record intact
    if not isinstance(files, dict) or data.get("digest") != _digest(data):
        resaved = _saved_again(directory, data)
    for name, record in files.items():
        path = directory / name
        if not path.is_file():
            raise CheckpointError(path, "missing: the checkpoint was saved with it; " + (
                SAVED_AGAIN_MISSING if resaved and not (directory / hf_folders.MODULES).is_file()
                else rebuild_hint(directory, data)))
        size = path.stat().st_size
        if size == record["bytes"] and file_sha256(path) == record["sha256"]:
            continue
        tensors = tensors_digest(path) if record.get("tensors") else None
        if tensors is not None and tensors == record["tensors"]:
            logger.info("%s: its bytes differ from those saved, its tensors do not (written again): loaded", path)
            continue
        if tensors is not None and resaved:
            raise CheckpointError(path, "re-saved with other weights: its tensors (names, shapes, dtypes or values) "
                                  "differ from those irpipe saved, and transformers saved config.json again: a model "
                                  "changed or fine-tuned elsewhere? irpipe's record in config.json describes the "
                                  "weights it saved, not these: to rerank with these, remove irpipe's keys "
                                  f"({', '.join(sorted(hf_folders.IRPIPE_KEYS))}) from config.json and the folder "
                                  "loads as a transformers folder; for irpipe's weights, restore the folder from a "
                                  "copy")
        if tensors is not None:
            raise CheckpointError(path, "damaged: its tensors differ from those saved while config.json is as saved "
                                  "(sha256 mismatch: a changed byte, or other weights written over it); "
                                  f"{rebuild_hint(directory, data)}")
        if size != record["bytes"]:
            raise CheckpointError(path, f"damaged: {size} bytes where it was saved with {record['bytes']} (truncated "
                                  f"or overwritten); {rebuild_hint(directory, data)}")
        if file_sha256(path) != record["sha256"]:
            raise CheckpointError(path, "damaged: its content differs from what was saved (sha256 mismatch: a changed "
                                  f"byte); {rebuild_hint(directory, data)}")


SAVED_AGAIN_MISSING = ("config.json was saved again by transformers (save_pretrained writes config.json and "
                       "model.safetensors alone): copy the checkpoint's other files beside them from the folder "
                       "irpipe saved, or give that folder")


def _saved_again(directory: Path, data: dict) -> bool:
    """True when config.json was saved again by transformers -- irpipe's record as saved, the transformers config
    meaning what irpipe exported -- else the CheckpointError of a config.json that changed otherwise."""
    config_path = directory / CONFIG_FILE
    digests = data.get("digests")
    if isinstance(data.get("files"), dict) and isinstance(digests, dict) and digests.get("irpipe") == _digest(
            data, transformers=False):
        if digests.get("transformers") == json_digest(transformers_meaning(_transformers_config(data))):
            logger.info("%s: saved again by transformers (irpipe's record intact, the same transformers config)",
                        config_path)
            return True
        raise CheckpointError(config_path, "changed: its transformers config (the keys beside irpipe's record, which "
                              "transformers and sentence-transformers read) differs from the one irpipe exported, "
                              "irpipe's own record being as saved; restore config.json from a copy, or save the "
                              "checkpoint again with irpipe", field="digest")
    raise CheckpointError(config_path, "damaged: its model, config or file records differ from those it was saved "
                          f"with (a changed byte?); {rebuild_hint(directory, data)}", field="digest")


def rebuild_hint(directory: Path, data: dict | None = None) -> str:
    """How to get a sound copy of the checkpoint in `directory` back."""
    if (Path(directory) / hf_folders.MODULES).is_file() and not (Path(directory) / "bert").is_dir():
        return ("if sentence-transformers saved this folder from an irpipe checkpoint, it kept irpipe's record: remove "
                f"irpipe's keys ({', '.join(sorted(hf_folders.IRPIPE_KEYS))}) from config.json, and it loads as a "
                "transformers folder")
    if Path(directory).resolve().parent == (cache_root() / "models").resolve():
        return (f"it is a trained recipe of the cache: remove it (rm -r {directory}) and run the same command again, "
                "which trains it anew")
    recipe = ((data or {}).get("training") or {}).get("recipe") or {}
    if recipe.get("model") and recipe.get("train"):
        dev = f" --dev {recipe['dev']}" if recipe.get("dev") else ""
        return (f"restore it from a copy, or train it again: irpipe train {recipe['model']} --train {recipe['train']}"
                f"{dev} --output NEW_FOLDER, with the options config.json records under training.recipe.options")
    return "restore it from a copy, or train it again"


def read_checkpoint_config(directory: str | Path) -> dict:
    """config.json of a checkpoint, checked for shape (not yet against the model); for a transformers or
    sentence-transformers folder, the record hf_folders makes of it (with "foreign": what it read). `directory` may
    be a Hugging Face name, hf:ORG/NAME, read from the local cache (pipeline/rerank/hf_cache.py)."""
    directory = model_folder(directory)
    path = Path(directory) / CONFIG_FILE
    if not Path(directory).is_dir():
        raise CheckpointError(directory, "no such checkpoint folder")
    if not path.is_file():
        if hf_folders.is_foreign(Path(directory), None):  # a sentence-transformers folder, its BERT in a subfolder
            return hf_folders.foreign_record(Path(directory))
        raise CheckpointError(path, "missing: a checkpoint folder holds config.json and model.safetensors")
    try:
        data = parse_json(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise CheckpointError(path, f"not valid JSON: {error.msg}; {rebuild_hint(Path(directory))}",
                              line=error.lineno) from None
    except UnicodeDecodeError:
        raise CheckpointError(path, f"not UTF-8 text; {rebuild_hint(Path(directory))}") from None
    if not isinstance(data, dict):
        raise CheckpointError(path, "expected a JSON object")
    if hf_folders.is_foreign(Path(directory), data):
        return hf_folders.foreign_record(Path(directory))
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
    directory = model_folder(directory)
    data = read_checkpoint_config(directory)
    config_path = directory / CONFIG_FILE
    cls = checkpoint_model_class(data["model"], config_path)
    config = checkpoint_config(cls.config_class, data["config"], config_path, overrides)
    if "foreign" in data:
        return hf_folders.load_foreign(cls, config, directory, data["foreign"]).eval()
    verify_checkpoint(directory, data)  # (after the config's own checks, which say more about a hand-edited one)
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
    """sha1 over the sha256 of a checkpoint's config.json and weights (of a transformers folder: of each file its
    load reads): a retrained checkpoint invalidates cached runs."""
    directory, digest = model_folder(directory), hashlib.sha1()
    for name in _digested_files(directory):
        digest.update(file_digest(directory / name).encode())
    return digest.hexdigest()


def _digested_files(directory: Path) -> list[str]:
    """config.json and the weights; of a transformers or sentence-transformers folder, each file its load reads."""
    path = directory / CONFIG_FILE
    try:
        data = parse_json(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, ValueError):
        return [CONFIG_FILE, WEIGHTS_FILE]  # (a damaged config.json: its digest, as for any checkpoint)
    if hf_folders.is_foreign(directory, data):
        return hf_folders.foreign_record(directory)["foreign"]["files"]
    return [CONFIG_FILE, WEIGHTS_FILE]


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
            model = load_checkpoint(self.checkpoint, dict(self.overrides))
            if model.name != self.name:
                raise CheckpointError(self.checkpoint, f"holds a {model.name} model, not a {self.name}: use "
                                      f"{model.name}(ckpt={self.checkpoint}) or --model {self.checkpoint}")
            return model
        model_class = models.model_class(self.name)
        return model_class(make_config(model_class.config_class, dict(self.overrides))).eval()

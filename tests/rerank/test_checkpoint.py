"""Checkpoints: a folder rebuilds the model alone with identical scores; every malformed folder fails clearly."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from pipeline.errors import CheckpointError
from pipeline.rerank.checkpoint import load_checkpoint, read_checkpoint_config, save_checkpoint
from pipeline.rerank.models.monobert import MonoBERT, MonoBERTConfig
from pipeline.rerank.scoring import predict
from support import make_pairs

QUERIES = ["what colour is the sky", "what colour is the sky", "who wrote hamlet"]
DOCS = ["the sky is blue", "grass is green and the sun is " + "very " * 40 + "bright", "shakespeare wrote hamlet"]


@pytest.fixture(scope="module")
def checkpoint(tiny_bert, tmp_path_factory) -> Path:
    torch.manual_seed(1)
    model = MonoBERT(MonoBERTConfig(bert=str(tiny_bert), max_length=48))
    return save_checkpoint(model, tmp_path_factory.mktemp("ckpt") / "monobert", training={"note": "test"})


def test_round_trip_gives_identical_scores(checkpoint, tiny_bert):
    torch.manual_seed(1)
    original = MonoBERT(MonoBERTConfig(bert=str(tiny_bert), max_length=48))
    shutil.rmtree(tiny_bert.parent / "moved", ignore_errors=True)
    moved = Path(shutil.copytree(checkpoint, tiny_bert.parent / "moved"))  # no path back to the BERT folder needed
    loaded = load_checkpoint(moved)
    assert type(loaded) is MonoBERT and loaded.config == original.config and not loaded.training
    assert predict(loaded, make_pairs(QUERIES, DOCS)).scores == predict(original, make_pairs(QUERIES, DOCS)).scores
    assert read_checkpoint_config(moved)["training"] == {"note": "test"}


@pytest.mark.slow
def test_the_same_weights_give_the_same_bytes_in_every_process(checkpoint, tmp_path):
    """A checkpoint saved again by other processes is byte-identical, so its digest (a run-cache key) is stable:
    its safetensors header holds one metadata key (a map of several is written in a per-process order)."""
    import struct
    import subprocess
    import sys

    from pipeline.rerank.checkpoint import checkpoint_digest

    raw = (checkpoint / "model.safetensors").read_bytes()
    header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
    assert header["__metadata__"] == {"format": "pt"}
    code = ("import sys; from pipeline.rerank.checkpoint import load_checkpoint, save_checkpoint; "
            "save_checkpoint(load_checkpoint(sys.argv[1]), sys.argv[2])")
    for copy in ("a", "b"):
        subprocess.run([sys.executable, "-c", code, str(checkpoint), str(tmp_path / copy)], check=True)
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (tmp_path / "b" / "model.safetensors").read_bytes()
    assert checkpoint_digest(tmp_path / "a") == checkpoint_digest(tmp_path / "b")


def test_overrides_apply_before_building(checkpoint):
    assert load_checkpoint(checkpoint, {"max_length": 64}).config.max_length == 64


def _broken(checkpoint: Path, tmp_path: Path, edit) -> Path:
    """A copy of the checkpoint without its integrity records (as saved before them, or made by hand: the checks
    here are the rest; a damaged file of a checkpoint with records: tests/rerank/test_integrity.py), then `edit`."""
    folder = Path(shutil.copytree(checkpoint, tmp_path / "broken"))
    data = json.loads((folder / "config.json").read_text())
    del data["files"], data["digest"]
    (folder / "config.json").write_text(json.dumps(data))
    edit(folder)
    return folder


def _edit_config(**changes):
    def edit(folder: Path):
        data = json.loads((folder / "config.json").read_text())
        for key, value in changes.items():
            if key.startswith("config."):
                data["config"][key[7:]] = value
            else:
                data[key] = value
        (folder / "config.json").write_text(json.dumps(data))
    return edit


def _drop_tensor(folder: Path):
    from safetensors.torch import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    del tensors["classifier.weight"]
    save_file(tensors, folder / "model.safetensors")


def _pickled_weights(folder: Path):
    torch.save({"classifier.weight": torch.zeros(2, 32)}, folder / "model.safetensors")  # a pickle: must not load


def _wider_bert(folder: Path):
    config = json.loads((folder / "bert" / "config.json").read_text())
    config["intermediate_size"] = 48
    (folder / "bert" / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("edit, file, message", [
    (lambda f: (f / "config.json").unlink(), "config.json", "missing"),
    (lambda f: (f / "config.json").write_text('{"model": "monobert", "config": {'), "config.json", "not valid JSON"),
    (lambda f: (f / "model.safetensors").unlink(), "model.safetensors", "missing"),
    (_edit_config(model="monobret"), "config.json", "unknown model 'monobret'"),
    (_edit_config(model="bm25"), "config.json", "unknown model 'bm25'"),
    (_edit_config(**{"config.pooling": "mean"}), "config.json", "[config.pooling]: monobert: pooling='mean'; choose one"),
    (_edit_config(**{"config.hidden": 64}), "config.json", "has no field 'hidden'"),
    (_edit_config(**{"config.max_length": "long"}), "config.json", "max_length='long' should be of type int"),
    (_edit_config(format=7), "config.json", "format 7"),
    (_drop_tensor, "model.safetensors", "missing tensors classifier.weight"),
    (_pickled_weights, "model.safetensors", "not a readable safetensors file"),
    (_wider_bert, "model.safetensors", "has shape [64], the model built from config.json expects [48]"),
    (lambda f: shutil.rmtree(f / "bert"), "bert/config.json", "missing"),
], ids=["no-config", "bad-json", "no-weights", "unknown-model", "not-a-model", "bad-choice", "unknown-field", "field-type",
        "format", "missing-tensor", "pickle", "shape", "no-assets"])
def test_malformed_checkpoints_name_file_and_problem(checkpoint, tmp_path, edit, file, message):
    folder = _broken(checkpoint, tmp_path, edit)
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(folder)
    assert str(folder / file) in str(error.value) and message in str(error.value)


def test_missing_folder(tmp_path):
    with pytest.raises(CheckpointError, match="no such checkpoint folder"):
        load_checkpoint(tmp_path / "nothing")


def test_the_framework_never_unpickles():
    for source in (Path(__file__).resolve().parents[2] / "pipeline").rglob("*.py"):
        text = source.read_text()
        assert "torch.load(" not in text and "import pickle" not in text, source

"""Integrity: a checkpoint -- a recipe-cache model too -- whose files rot or are cut short is an
error naming the file and how to rebuild it, never a model that scores otherwise; a damaged stage-cache entry is
recomputed, giving the fault-free result. (The training state checks its own digests on --resume:
tests/rerank/test_train.py.)"""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
import torch

from pipeline import cache
from pipeline.data import files
from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.errors import InputError
from pipeline.errors import CheckpointError
from pipeline.rerank.checkpoint import load_checkpoint, save_checkpoint
from pipeline.rerank.models.monobert import MonoBERT, MonoBERTConfig
from pipeline.stage import Stage

RECIPE = {"model": "monobert", "train": "wikiqa/train", "dev": "wikiqa/dev", "options": {"epochs": 2}}


@pytest.fixture(scope="module")
def saved(tiny_bert, tmp_path_factory) -> Path:
    torch.manual_seed(1)
    model = MonoBERT(MonoBERTConfig(bert=str(tiny_bert), max_length=48))
    return save_checkpoint(model, tmp_path_factory.mktemp("ckpt") / "monobert", training={"recipe": RECIPE})


@pytest.fixture
def checkpoint(saved, tmp_path) -> Path:
    return Path(shutil.copytree(saved, tmp_path / "monobert"))


def flip(path: Path, at: float = 0.5) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x01
    path.write_bytes(bytes(data))


def test_the_save_records_every_file_it_wrote(checkpoint):
    record = json.loads((checkpoint / "config.json").read_text())
    written = sorted(p.relative_to(checkpoint).as_posix() for p in checkpoint.rglob("*") if p.is_file())
    written.remove("config.json")
    assert sorted(record["files"]) == written and "model.safetensors" in written and len(written) > 1
    assert all(record["files"][name]["bytes"] == (checkpoint / name).stat().st_size for name in written)


@pytest.mark.parametrize("at", [0.3, 0.5, 0.99])
def test_a_flipped_byte_in_any_file_of_a_checkpoint_is_refused(checkpoint, at):
    """Before: a flipped bit in the weights loaded silently (another float: other scores); in a vocabulary file
    another token. Now every file the save wrote is checked, and the error names it and the command that
    retrains it."""
    for path in sorted(p for p in checkpoint.rglob("*") if p.is_file() and p != checkpoint / "config.json"):
        name = path.relative_to(checkpoint).as_posix()
        flip(checkpoint / name, at)
        with pytest.raises(CheckpointError) as error:
            load_checkpoint(checkpoint)
        assert isinstance(error.value, InputError) and error.value.path == str(checkpoint / name)
        assert "a changed byte" in str(error.value)
        assert "irpipe train monobert --train wikiqa/train --dev wikiqa/dev --output NEW_FOLDER" in str(error.value)
        flip(checkpoint / name, at)  # put back
    load_checkpoint(checkpoint)


def test_a_truncated_weights_file_is_refused_with_its_sizes(checkpoint):
    weights = checkpoint / "model.safetensors"
    size = weights.stat().st_size
    weights.write_bytes(weights.read_bytes()[:size // 2])
    with pytest.raises(CheckpointError, match=f"damaged: {size // 2} bytes where it was saved with {size}"):
        load_checkpoint(checkpoint)


def test_a_changed_config_value_is_refused(checkpoint):
    """A byte of config.json's config that still parses (max_length 48 -> 49) changed the model silently."""
    path = checkpoint / "config.json"
    path.write_text(path.read_text().replace('"max_length": 48', '"max_length": 49'))
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(checkpoint)
    assert error.value.path == str(path) and error.value.field == "digest"


def test_a_damaged_recipe_model_says_remove_it_and_rerun(saved, tmp_path, monkeypatch):
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    folder = Path(shutil.copytree(saved, tmp_path / "cache" / "models" / "monobert-0123456789abcdef0123"))
    flip(folder / "model.safetensors")
    with pytest.raises(CheckpointError, match=f"a trained recipe of the cache: remove it \\(rm -r {folder}\\) and run "
                                              "the same command again"):
        load_checkpoint(folder)


def test_each_file_is_hashed_once_per_process(checkpoint, monkeypatch):
    """The first load hashes each file the save recorded (the check that finds a flipped byte), the second none."""
    hashed = []
    real = files.hashlib.sha256

    def counting(*args):
        hashed.append(1)
        return real(*args)

    monkeypatch.setattr(files.hashlib, "sha256", counting)
    load_checkpoint(checkpoint)
    assert len(hashed) == len(json.loads((checkpoint / "config.json").read_text())["files"]) > 1
    hashed.clear()
    load_checkpoint(checkpoint)
    assert hashed == []


def test_checkpoints_saved_before_the_records_still_load(checkpoint):
    """...with the weights of their own file: every tensor as saved (shifted here by 0.25, values that neither the
    pretrained BERT nor a fresh initialisation gives), not a model built from the config alone."""
    from safetensors.torch import load_file, save_file

    path = checkpoint / "config.json"
    record = json.loads(path.read_text())
    del record["files"], record["digest"]
    path.write_text(json.dumps(record))
    weights = checkpoint / "model.safetensors"
    saved = {name: tensor + 0.25 if tensor.is_floating_point() else tensor
             for name, tensor in load_file(weights).items()}
    save_file(saved, weights)  # (unchecked: no records to differ from)
    model = load_checkpoint(checkpoint)
    state = model.state_dict()
    assert saved and set(saved) <= set(state) and not model.training
    assert [name for name, tensor in saved.items() if not torch.equal(state[name], tensor)] == []


# -- stage cache entries: gzip's CRC-32 and length, checked on every read -------------------------------------------

class Counted(Stage):
    name, cacheable = "counted", True
    calls = 0

    def transform(self, topics, run):
        Counted.calls += 1
        return Run.from_scores({q: {f"d{i}": i / 7 for i in range(200)} for q in topics.queries},
                               texts={"d1": "one"})


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_stage_cache_entry_gives_the_fault_free_result(tmp_path, damage):
    topics = Topics({"q1": "a", "q2": "b"})
    with cache.using(cache.StageCache(tmp_path)):
        expected = Counted()(topics)
    entry = next(tmp_path.rglob("*.json.gz"))
    good = entry.read_bytes()
    positions = range(10, len(good), max(1, len(good) // 40)) if damage == "flip" else range(1, len(good), 97)
    for at in positions:  # every 40th byte past the header, or cut at every 97th
        entry.write_bytes(good[:at] + bytes([good[at] ^ 0x10]) + good[at + 1:] if damage == "flip" else good[:at])
        calls = Counted.calls
        with cache.using(cache.StageCache(tmp_path)):
            again = Counted()(topics)
        assert again.ranking == expected.ranking and again.texts == expected.texts
        assert Counted.calls == calls + 1  # recomputed, and stored whole again
        with gzip.open(entry) as handle:
            handle.read()


def test_a_damaged_recipe_model_end_to_end(tmp_path, monkeypatch, capsys):
    """`irpipe run` with a training recipe, its cached model damaged: exit 2 naming the file and what to run; after
    `rm -r` of the folder the same command trains it again and writes the same run."""
    from pipeline import cli
    from test_local_training import COLOURS, answer_selection_folder

    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    answer_selection_folder(tmp_path / "train", COLOURS[:6], "t")
    answer_selection_folder(tmp_path / "dev", COLOURS[6:], "d")
    spec = ("candidates() >> hcan(train=./train, epochs=1, embeddings=random, embedding_dim=8, filters=8, "
            "max_query_length=12, max_doc_length=16, threads=1)")
    command = ["-q", "run", spec, "--dataset", "./dev", "--output", "runs/x.trec", "--no-cache"]
    assert cli.main(command) == 0, capsys.readouterr().err
    first = (tmp_path / "runs" / "x.trec").read_bytes()
    folder = next((tmp_path / "cache" / "models").iterdir())
    flip(folder / "model.safetensors")
    capsys.readouterr()
    assert cli.main(command) == 2
    err = capsys.readouterr().err
    assert f"{folder / 'model.safetensors'}: damaged" in err and f"rm -r {folder}" in err
    shutil.rmtree(folder)
    assert cli.main(command) == 0, capsys.readouterr().err
    assert (tmp_path / "runs" / "x.trec").read_bytes() == first

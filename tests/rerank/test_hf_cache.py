"""Hugging Face names (`hf:ORG/NAME`, pipeline/rerank/hf_cache.py) read from the local Hugging Face cache, offline, in
a cache laid out here as huggingface_hub lays it out (models--ORG--NAME/blobs, snapshots/<commit>/, refs/main); and
a checkpoint saved again by transformers (save_pretrained) checked by its tensors and its config's meaning, not
its bytes (pipeline/rerank/checkpoint.py, integrity.py)."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch

from pipeline.data.runs import read_run
from pipeline.errors import CheckpointError
from pipeline.rerank.checkpoint import load_checkpoint, save_checkpoint
from support import irpipe

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def exported(tiny_bert, tmp_path_factory) -> Path:
    """A monobert checkpoint on the tiny BERT, as irpipe saves it: also a CrossEncoder folder."""
    from pipeline.rerank.models.monobert import MonoBERT, MonoBERTConfig

    torch.manual_seed(3)
    model = MonoBERT(MonoBERTConfig(bert=str(tiny_bert), max_length=48)).eval()
    return save_checkpoint(model, tmp_path_factory.mktemp("exported") / "monobert")


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("pairs")
    rows = [(1, "what colour is the sky", "the sky is blue"), (0, "what colour is the sky", "a cat sleeps"),
            (0, "what colour is the sky", "rivers flow"), (1, "what colour is snow", "snow is white"),
            (0, "what colour is snow", "the train left late"), (0, "what colour is snow", "numbers add up")]
    (folder / "pairs.tsv").write_text("".join(f"{label}\t{q}\t{d}\n" for label, q, d in rows))
    (folder / "dataset.yaml").write_text("kind: pairs\nfiles: {pairs: pairs.tsv}\n")
    return folder


def place_in_cache(folder: Path, cache: Path, repo: str, commit: str = COMMIT, ref: str | None = "main") -> Path:
    """`folder` as huggingface_hub caches a model: each file a blob named by its sha256, linked from
    snapshots/<commit>/, and refs/<ref> holding the commit."""
    model = cache / f"models--{repo.replace('/', '--')}"
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        blob = model / "blobs" / hashlib.sha256(path.read_bytes()).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, blob)
        link = model / "snapshots" / commit / path.relative_to(folder)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(blob)
    if ref:
        (model / "refs").mkdir(exist_ok=True)
        (model / "refs" / ref).write_text(commit)
    return model / "snapshots" / commit


def ranking(capsys, tmp_path: Path, model, pairs: Path) -> dict:
    out = tmp_path / f"r{len(list(tmp_path.glob('r*.trec')))}.trec"
    code, _, err = irpipe(capsys, "rerank", "--model", model, "--dataset", pairs, "--output", out, "--threads", "1")
    assert code == 0, err
    return read_run(out).ranking


# -- hf:ORG/NAME ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variable", ["HF_HUB_CACHE", "HF_HOME"])
def test_an_hf_name_reranks_as_its_folder_in_the_cache(exported, pairs, tmp_path, capsys, monkeypatch, variable):
    """`irpipe rerank --model hf:ORG/NAME` and `monobert(ckpt=hf:ORG/NAME)` score as --model DIR, from the snapshot
    refs/main names in $HF_HUB_CACHE (or $HF_HOME/hub); nothing is downloaded."""
    cache = tmp_path / ("hub" if variable == "HF_HUB_CACHE" else "home/hub")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv(variable, str(cache if variable == "HF_HUB_CACHE" else cache.parent))
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "irpipe-cache"))
    place_in_cache(exported, cache, "irpipe-tests/tiny-monobert")
    direct = ranking(capsys, tmp_path, exported, pairs)
    assert ranking(capsys, tmp_path, "hf:irpipe-tests/tiny-monobert", pairs) == direct
    code, _, err = irpipe(capsys, "run", "candidates() >> monobert(ckpt=hf:irpipe-tests/tiny-monobert, threads=1)",
                          "--dataset", pairs, "--output", tmp_path / "spec.trec", "--no-cache")
    assert code == 0, err
    assert read_run(tmp_path / "spec.trec").ranking == direct


def test_a_revision_or_a_commit_picks_the_snapshot(exported, tiny_bert, tmp_path, monkeypatch):
    from pipeline.rerank.hf_cache import resolve_hf_name

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    main = place_in_cache(exported, tmp_path / "hub", "org/m")
    other = place_in_cache(exported, tmp_path / "hub", "org/m", commit="f" * 40, ref="v2")
    assert resolve_hf_name("hf:org/m") == main and resolve_hf_name("hf:org/m@v2") == other
    assert resolve_hf_name(f"hf:org/m@{'f' * 40}") == other
    assert load_checkpoint("hf:org/m@v2").name == "monobert"


def test_a_transformers_crossencoder_in_the_cache_loads_as_monobert(tiny_bert, pairs, tmp_path, capsys, monkeypatch):
    """The usual cached model: BertForSequenceClassification (1 label) and its tokenizer, no irpipe record."""
    from transformers import AutoTokenizer, BertForSequenceClassification

    model = BertForSequenceClassification.from_pretrained(tiny_bert, num_labels=1)
    model.save_pretrained(tmp_path / "ce")
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(tmp_path / "ce")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "irpipe-cache"))
    place_in_cache(tmp_path / "ce", tmp_path / "hub", "cross-encoder/tiny")
    assert ranking(capsys, tmp_path, "hf:cross-encoder/tiny", pairs) == ranking(capsys, tmp_path, tmp_path / "ce",
                                                                                  pairs)


@pytest.mark.parametrize("layout, missing", [
    ("empty", "models--org--absent/refs/main"),
    ("no snapshot", f"models--org--absent/snapshots/{COMMIT}"),
    ("bad ref", "models--org--absent/refs/main holds 'not-a-commit'"),
])
def test_a_name_not_in_the_cache_is_exit_2_saying_where_it_looked(exported, pairs, tmp_path, capsys, monkeypatch,
                                                                   layout, missing):
    cache = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    cache.mkdir()
    if layout != "empty":
        (cache / "models--org--absent" / "refs").mkdir(parents=True)
        (cache / "models--org--absent" / "refs" / "main").write_text(COMMIT if layout == "no snapshot" else
                                                                      "not-a-commit")
    code, out, err = irpipe(capsys, "rerank", "--model", "hf:org/absent", "--dataset", pairs, "--output",
                            tmp_path / "x.trec")
    assert code == 2 and out == "" and f"{cache}/{missing}" in err
    assert "hf download org/absent" in err and f"models--org--absent folder into {cache}" in err
    assert ("$HF_HUB_CACHE" in err) == (layout != "bad ref")  # where the cache folder comes from, for a miss
    code, _, err = irpipe(capsys, "rerank", "--model", "hf:org--x/../y", "--dataset", pairs, "--output",
                          tmp_path / "x.trec")
    assert code == 2 and "not a Hugging Face model name" in err


# -- a checkpoint saved again by transformers ------------------------------------------------------------------------


@pytest.fixture
def copy(exported, tmp_path) -> Path:
    return Path(shutil.copytree(exported, tmp_path / "copy"))


def scores(folder) -> list[float]:
    from pipeline.rerank.scoring import predict
    from support import make_pairs

    pairs = make_pairs(["what colour is the sky"] * 3, ["the sky is blue", "a cat sleeps", "rivers flow"])
    return predict(load_checkpoint(folder), pairs, 8, torch.device("cpu")).scores


def test_save_pretrained_in_place_loads_with_the_same_scores(exported, copy):
    """Before: "config.json [digest]: damaged ... train it again" (transformers writes config.json without the keys
    that hold its defaults). Now irpipe's record and the config's meaning are checked apart."""
    from transformers import BertForSequenceClassification

    before = (copy / "config.json").read_text()
    BertForSequenceClassification.from_pretrained(copy).save_pretrained(copy)
    assert (copy / "config.json").read_text() != before
    assert scores(copy) == scores(exported)


def test_weights_written_again_with_other_bytes_load_if_their_tensors_are_equal(exported, copy):
    from safetensors.torch import load_file, save_file

    weights = copy / "model.safetensors"
    save_file(load_file(weights), weights, metadata={"format": "pt", "written_by": "another writer"})
    assert weights.read_bytes() != (exported / "model.safetensors").read_bytes()
    assert scores(copy) == scores(exported)


def test_other_weights_are_re_saved_weights_or_damage_by_what_else_changed(copy):
    """save_pretrained of a changed model (config.json saved again too): "re-saved with other weights", with how to
    use them; the same tensors changed under an untouched config.json: damaged, restore or retrain."""
    from safetensors.torch import load_file, save_file
    from transformers import BertForSequenceClassification

    original = (copy / "model.safetensors").read_bytes()
    tensors = load_file(copy / "model.safetensors")
    tensors["classifier.bias"] = tensors["classifier.bias"] + 1
    save_file(tensors, copy / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="damaged: its tensors differ from those saved while config.json is as "
                                              "saved .*a changed byte.*restore it from a copy, or train it again"):
        load_checkpoint(copy)
    (copy / "model.safetensors").write_bytes(original)
    model = BertForSequenceClassification.from_pretrained(copy)
    with torch.no_grad():
        model.classifier.bias.add_(1)
    model.save_pretrained(copy)
    with pytest.raises(CheckpointError, match="re-saved with other weights: .* remove irpipe's keys .* from "
                                              "config.json and the folder loads as a transformers folder"):
        load_checkpoint(copy)


def test_a_new_folder_save_pretrained_wrote_says_what_to_copy_and_a_changed_config_is_named(exported, tmp_path):
    from transformers import BertForSequenceClassification

    BertForSequenceClassification.from_pretrained(exported).save_pretrained(tmp_path / "new")
    with pytest.raises(CheckpointError, match="missing: .*save_pretrained writes config.json and model.safetensors "
                                              "alone\\): copy the checkpoint's other files"):
        load_checkpoint(tmp_path / "new")
    changed = Path(shutil.copytree(exported, tmp_path / "changed"))
    config = json.loads((changed / "config.json").read_text())
    (changed / "config.json").write_text(json.dumps(config | {"num_hidden_layers": 3}))
    with pytest.raises(CheckpointError, match="changed: its transformers config .* differs from the one irpipe "
                                              "exported") as error:
        load_checkpoint(changed)
    assert error.value.field == "digest"

"""The shared training loop: seeded and repeatable, resumable to the same weights, losses as their formulas say,
dev selection and early stopping, the JSONL log, examples from labelled candidates or BM25 runs, recipe caching."""
from __future__ import annotations

import json
import logging

import pytest
import torch
from safetensors.torch import load_file

from pipeline.errors import ConfigError
from pipeline.rerank.train import Examples, TrainOptions, examples_from, pair_loss, train


def _options(**changes) -> dict:
    base = {"epochs": 3, "lr": 1e-3, "train_batch_size": 8, "seed": 3, "eval_batch_size": 64}
    return base | changes


def _weights(folder) -> dict[str, torch.Tensor]:
    return load_file(folder / "model.safetensors")


def _train(tiny_bert, dataset, out, **kwargs):
    options = _options(**kwargs.pop("options", {}))
    return train("monobert", dataset, out, dev=kwargs.pop("dev", dataset), options=options,
                 overrides={"bert": str(tiny_bert), "max_length": 32}, **kwargs)


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_same_seed_same_weights_other_seed_other_weights(tiny_bert, tiny_qa, tmp_path):
    first = _train(tiny_bert, tiny_qa, tmp_path / "a", options={"epochs": 1})
    second = _train(tiny_bert, tiny_qa, tmp_path / "b", options={"epochs": 1})
    other = _train(tiny_bert, tiny_qa, tmp_path / "c", options={"epochs": 1, "seed": 4})
    assert _same(_weights(first.out), _weights(second.out))
    assert first.history[0]["loss"] == second.history[0]["loss"]
    assert not _same(_weights(first.out), _weights(other.out))


@pytest.mark.parametrize("loss", ["pointwise", "hinge"])
def test_interrupted_and_resumed_equals_uninterrupted(tiny_bert, tiny_qa, tmp_path, loss):
    whole = _train(tiny_bert, tiny_qa, tmp_path / "whole", options={"loss": loss})

    def interrupt(record):
        if record["epoch"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _train(tiny_bert, tiny_qa, tmp_path / "resumed", options={"loss": loss}, on_epoch_end=interrupt)
    log = [json.loads(line) for line in (tmp_path / "resumed" / "train.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [1]
    with pytest.raises(ConfigError, match="--resume"):
        _train(tiny_bert, tiny_qa, tmp_path / "resumed", options={"loss": loss})
    with pytest.raises(ConfigError, match="changed: options"):
        _train(tiny_bert, tiny_qa, tmp_path / "resumed", options={"loss": loss, "lr": 0.5}, resume=True)
    resumed = _train(tiny_bert, tiny_qa, tmp_path / "resumed", options={"loss": loss}, resume=True)
    assert _same(_weights(whole.out), _weights(resumed.out))
    assert _same(_weights(whole.out / "state"), _weights(resumed.out / "state"))
    assert [r["loss"] for r in whole.history] == [r["loss"] for r in resumed.history]
    assert resumed.best_epoch == whole.best_epoch


def test_log_checkpoint_and_best_epoch(tiny_bert, tiny_qa, tmp_path):
    result = _train(tiny_bert, tiny_qa, tmp_path / "out")
    log = [json.loads(line) for line in (tmp_path / "out" / "train.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [1, 2, 3]
    assert all({"loss", "lr", "dev", "train_seconds", "best", "truncated", "dev_truncated"} <= set(r) for r in log)
    assert log[0]["truncated"] == 0 and log[0]["dev_truncated"] == 0
    assert set(log[0]["dev"]) == {"AP", "RR@10", "nDCG@10", "loss"}
    best = max(range(3), key=lambda i: (log[i]["dev"]["AP"], -i))  # first epoch reaching the highest dev AP
    assert result.best_epoch == best + 1 and result.best == log[best]["dev"]
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["training"]["finished"] and config["training"]["best_epoch"] == best + 1
    assert config["training"]["recipe"]["options"]["seed"] == 3


def test_early_stopping_on_a_flat_dev_score(tiny_bert, tiny_qa, tmp_path):
    result = _train(tiny_bert, tiny_qa, tmp_path / "out", options={"epochs": 6, "lr": 0.0, "patience": 2,
                                                                    "schedule": "constant"})
    assert len(result.history) == 3 and result.best_epoch == 1  # epochs 2 and 3 do not improve: stop


def test_dev_loss_selection_and_no_dev(tiny_bert, tiny_qa, tmp_path):
    by_loss = _train(tiny_bert, tiny_qa, tmp_path / "loss", options={"epochs": 2, "measure": "loss"})
    losses = [r["dev"]["loss"] for r in by_loss.history]
    assert by_loss.best_epoch == 1 + losses.index(min(losses))
    no_dev = _train(tiny_bert, tiny_qa, tmp_path / "nodev", dev=None, options={"epochs": 2})
    assert no_dev.best_epoch == 2 and no_dev.best == {}


def test_sgd_plateau_and_triplet_run(tiny_bert, tiny_qa, tmp_path):
    result = _train(tiny_bert, tiny_qa, tmp_path / "out", options={
        "epochs": 2, "optimizer": "sgd", "nesterov": True, "schedule": "plateau", "plateau_patience": 0,
        "loss": "triplet", "lr": 0.05})
    assert len(result.history) == 2 and all(r["loss"] >= 0 for r in result.history)


def test_pair_losses_follow_their_formulas():
    positive, negative = torch.tensor([2.0, 0.5, 1.0]), torch.tensor([1.0, 1.0, 3.0])
    hinge = pair_loss(positive, negative, ["a", "a", "b"], "hinge", 1.0)
    assert hinge.item() == pytest.approx((max(0, 1 - 2 + 1) + max(0, 1 - 0.5 + 1) + max(0, 1 - 1 + 3)) / 3)
    triplet = pair_loss(positive, negative, ["a", "a", "b"], "triplet", 1.0)
    # query a: hardest positive 0.5, hardest negative 1.0; query b: 1.0 against 3.0
    assert triplet.item() == pytest.approx((max(0, 1 - 0.5 + 1.0) + max(0, 1 - 1.0 + 3.0)) / 2)


def test_examples_from_labelled_candidates(tiny_qa):
    examples = examples_from(tiny_qa)
    assert examples.summary() == {"queries": 8, "pairs": 40, "positives": 8}
    assert examples.labels["q0"]["q0-a"] == 1 and examples.texts["q0-a"] == "the sky is blue"
    assert examples_from(tiny_qa, max_queries=3).summary()["queries"] == 3
    generator = torch.Generator().manual_seed(0)
    pairs = Examples.pairs(examples, generator, per_positive=2)
    assert len(pairs) == 16 and all(p.endswith("-a") and not n.endswith("-a") for _, p, n in pairs)


def test_examples_with_bm25_negatives_on_dl19(shared_data):
    """DL19 ships BM25's top 100: the positives are its rel >= 2 passages, the negatives every other hit (judged or
    not); labelled negatives keep only the judged ones."""
    from pipeline.data.registry import get_dataset

    dataset = get_dataset("dl19-passage")
    labelled = examples_from(dataset, "labelled")
    assert labelled.summary() == {"queries": 43, "pairs": 2257, "positives": 566 + 280}
    mined = examples_from(dataset, "bm25", depth=100)
    # every hit of the 43 x 100; of the 2,501 rel >= 2 passages only the 846 in the top 100 have a text (no corpus)
    assert mined.summary() == {"queries": 43, "pairs": 43 * 100, "positives": 846}
    assert examples_from(dataset, "labelled", min_rel=1).summary()["positives"] == 846 + 526


def test_bad_options_fail_before_training(tiny_bert, tiny_qa, tmp_path):
    with pytest.raises(ValueError, match="loss must be one of"):
        TrainOptions(loss="listwise")
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        TrainOptions(threads=0)
    with pytest.raises(ConfigError, match="unknown training option"):
        _train(tiny_bert, tiny_qa, tmp_path / "x", options={"epoch": 2})
    with pytest.raises(Exception, match="measure"):
        _train(tiny_bert, tiny_qa, tmp_path / "y", options={"measure": "MAPP"})
    assert not (tmp_path / "x").exists() and not (tmp_path / "y" / "state").exists()


def test_recipe_is_trained_once_then_loaded_from_the_cache(tiny_bert, tmp_path, monkeypatch, caplog, shared_data):
    from pipeline.experiment import run_pipeline

    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    spec = (f"monobert(train=wikiqa/dev, epochs=1, train_queries=4, train_batch_size=8, lr=0.001, bert={tiny_bert}, "
            "max_length=32)")
    with caplog.at_level(logging.INFO, logger="irpipe"):
        first, stage, _ = run_pipeline(spec, "wikiqa/dev", use_cache=False)
    assert "recipe not in the cache yet" in caplog.text
    folders = list((tmp_path / "cache" / "models").iterdir())
    assert len(folders) == 1 and folders[0].name.startswith("monobert-")
    trained_at = (folders[0] / "model.safetensors").stat().st_mtime_ns
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="irpipe"):
        second, _, _ = run_pipeline(spec, "wikiqa/dev", use_cache=False)
    assert "trained model from the cache" in caplog.text and "training" not in caplog.text.replace("trained", "")
    assert (folders[0] / "model.safetensors").stat().st_mtime_ns == trained_at
    assert second.ranking == first.ranking
    # another seed is another recipe
    other = stage.recipe()
    other.options["seed"] = 9
    assert other.directory() != folders[0]


def test_training_truncation_is_counted_and_reported(tiny_bert, tiny_qa, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="irpipe"):
        result = train("monobert", tiny_qa, tmp_path / "out", dev=tiny_qa, options=_options(epochs=1),
                       overrides={"bert": str(tiny_bert), "max_length": 10})
    # "[CLS] what colour is the sky [SEP]" leaves 3 pieces of a 10-piece input: every filler sentence is cut
    assert result.history[0]["truncated"] >= 32 and result.history[0]["dev_truncated"] >= 32
    assert "training inputs were truncated to fit the model" in caplog.text

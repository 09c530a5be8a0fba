"""The shared training loop: seeded and repeatable, resumable to the same weights, losses as their formulas say,
dev selection and early stopping, the JSONL log, examples from labelled candidates or BM25 runs, recipe caching."""
from __future__ import annotations

import json
import logging
import math

import pytest
import torch
from safetensors.torch import load_file

from pipeline.errors import ConfigError
from pipeline.rerank.losses import batch_hard_triplet, grouped_softmax, in_batch_softmax, pairwise_hinge
from pipeline.training.examples import epoch_batches, examples_from
from pipeline.training.identity import RecipeIdentity
from pipeline.training.loop import train
from pipeline.training.negatives import NegativeSampling
from pipeline.training.options import TrainOptions, check_options


def _options(**changes) -> dict:
    base = {"epochs": 3, "lr": 1e-3, "train_batch_size": 8, "seed": 3, "eval_batch_size": 64}
    return base | changes


def _weights(folder) -> dict[str, torch.Tensor]:
    return load_file(folder / "model.safetensors")


def _train(tiny_bert, dataset, out, model="monobert", **kwargs):
    options = _options(**kwargs.pop("options", {}))
    return train(model, dataset, out, dev=kwargs.pop("dev", dataset), options=options,
                 overrides={"bert": str(tiny_bert), "max_length": 32}, **kwargs)


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_same_seed_same_weights_other_seed_other_weights(tiny_bert, tiny_qa, tmp_path):
    first = _train(tiny_bert, tiny_qa, tmp_path / "a", options={"epochs": 1})
    second = _train(tiny_bert, tiny_qa, tmp_path / "b", options={"epochs": 1})
    other = _train(tiny_bert, tiny_qa, tmp_path / "c", options={"epochs": 1, "seed": 4})
    assert _same(_weights(first.out), _weights(second.out))
    assert first.history[0]["loss"] == second.history[0]["loss"]
    assert not _same(_weights(first.out), _weights(other.out))


@pytest.mark.slow
@pytest.mark.parametrize("model", ["monobert", "biencoder", "kwbert"])  # pointwise; in-batch negatives; keyword layer
def test_interrupted_and_resumed_equals_uninterrupted(tiny_bert, tiny_qa, tmp_path, model):
    whole = _train(tiny_bert, tiny_qa, tmp_path / "whole", model)

    def interrupt(record):
        if record["epoch"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _train(tiny_bert, tiny_qa, tmp_path / "resumed", model, on_epoch_end=interrupt)
    log = [json.loads(line) for line in (tmp_path / "resumed" / "train.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [1]
    with pytest.raises(ConfigError, match="--resume"):
        _train(tiny_bert, tiny_qa, tmp_path / "resumed", model)
    with pytest.raises(ConfigError, match="changed: options"):
        _train(tiny_bert, tiny_qa, tmp_path / "resumed", model, options={"lr": 0.5}, resume=True)
    resumed = _train(tiny_bert, tiny_qa, tmp_path / "resumed", model, resume=True)
    assert _same(_weights(whole.out), _weights(resumed.out))
    assert _same(_weights(whole.out / "state" / "epoch-0003"), _weights(resumed.out / "state" / "epoch-0003"))
    assert [r["loss"] for r in whole.history] == [r["loss"] for r in resumed.history]
    assert resumed.best_epoch == whole.best_epoch


def test_random_negatives_replace_the_labelled_ones(tiny_bert, tiny_qa, tmp_path):
    sampled = examples_from(tiny_qa, sampling=NegativeSampling("random", per_positive=2, seed=1))
    labelled = examples_from(tiny_qa)
    assert {q: sorted(d for d, label in docs.items() if label) for q, docs in sampled.labels.items()} == \
        {q: sorted(d for d, label in docs.items() if label) for q, docs in labelled.labels.items()}
    assert all(sum(1 for label in docs.values() if not label) == 2 for docs in sampled.labels.values())
    result = _train(tiny_bert, tiny_qa, tmp_path / "out", options={"epochs": 1, "negatives": "random"})
    assert result.history[0]["steps"] == 2  # 8 queries x (1 positive + 1 sampled negative) / 8 (labelled: 40 / 8)


@pytest.mark.slow
def test_log_checkpoint_and_best_epoch(tiny_bert, tiny_qa, tmp_path):
    result = _train(tiny_bert, tiny_qa, tmp_path / "out")
    log = [json.loads(line) for line in (tmp_path / "out" / "train.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [1, 2, 3]
    assert all({"loss", "loss_parts", "lr", "dev", "train_seconds", "best", "truncated", "dev_truncated"} <= set(r)
               for r in log)
    assert log[0]["truncated"] == 0 and log[0]["dev_truncated"] == 0
    assert set(log[0]["dev"]) == {"AP", "RR@10", "nDCG@10", "loss", "loss:ce"}
    assert log[0]["loss_parts"]["ce"] == pytest.approx(log[0]["loss"])
    best = max(range(3), key=lambda i: (log[i]["dev"]["AP"], -i))  # first epoch reaching the highest dev AP
    assert result.best_epoch == best + 1 and result.best == log[best]["dev"]
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["training"]["finished"] and config["training"]["best_epoch"] == best + 1
    assert config["training"]["recipe"]["options"]["seed"] == 3
    identity = RecipeIdentity.resolve("monobert", tiny_qa, tiny_qa, _options(),
                                      {"bert": str(tiny_bert), "max_length": 32})
    assert config["training"]["recipe"] == identity.record()  # the cache key's identity is the one recorded


@pytest.mark.slow
def test_early_stopping_on_a_flat_dev_score(tiny_bert, tiny_qa, tmp_path):
    result = _train(tiny_bert, tiny_qa, tmp_path / "out", options={"epochs": 6, "lr": 0.0, "patience": 2,
                                                                    "schedule": "constant"})
    assert len(result.history) == 3 and result.best_epoch == 1  # epochs 2 and 3 do not improve: stop


@pytest.mark.slow
def test_dev_loss_selection_and_no_dev(tiny_bert, tiny_qa, tmp_path):
    by_loss = _train(tiny_bert, tiny_qa, tmp_path / "loss", options={"epochs": 2, "measure": "loss"})
    losses = [r["dev"]["loss"] for r in by_loss.history]
    assert by_loss.best_epoch == 1 + losses.index(min(losses))
    no_dev = _train(tiny_bert, tiny_qa, tmp_path / "nodev", dev=None, options={"epochs": 2})
    assert no_dev.best_epoch == 2 and no_dev.best == {}


@pytest.mark.slow
def test_keep_start_scores_the_untrained_model_as_epoch_0(tiny_bert, tiny_qa, tmp_path):
    """keep_start: the untrained model's dev scores are train.jsonl's epoch 0, and the checkpoint stays the start
    unless an epoch beats it; with lr 0 no epoch does (each ranks as the start). Without a dev set it is refused."""
    start = _train(tiny_bert, tiny_qa, tmp_path / "start", options={"epochs": 1, "lr": 0.0})
    flat = _train(tiny_bert, tiny_qa, tmp_path / "flat", options={"epochs": 2, "lr": 0.0, "keep_start": True})
    log = [json.loads(line) for line in (tmp_path / "flat" / "train.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [0, 1, 2] and log[0]["dev"] == log[1]["dev"] == start.best
    assert flat.best_epoch == 0 and flat.best == log[0]["dev"] and [r["best"] for r in log] == [True, False, False]
    config = json.loads((tmp_path / "flat" / "config.json").read_text())
    assert config["training"]["finished"] and config["training"]["best_epoch"] == 0
    assert _same(_weights(tmp_path / "flat"), _weights(start.out))   # lr 0: the start's weights
    trained = _train(tiny_bert, tiny_qa, tmp_path / "trained", options={"epochs": 3, "lr": 1e-3, "keep_start": True})
    dev = [r["dev"]["AP"] for r in trained.history]
    assert trained.best_epoch == max(range(4), key=lambda i: (dev[i], -i))   # the first reaching the best dev AP
    with pytest.raises(ConfigError, match="keep_start=true acts only with a dev set"):  # refused before any work
        _train(tiny_bert, tiny_qa, tmp_path / "nodev", dev=None, options={"keep_start": True})


@pytest.mark.slow
def test_keep_start_interrupted_and_resumed_equals_uninterrupted(tiny_bert, tiny_qa, tmp_path):
    """A keep_start run killed after epoch 1 resumes without scoring the start again, to the same weights, log and
    kept epoch as the uninterrupted run."""
    options = {"epochs": 3, "keep_start": True}
    whole = _train(tiny_bert, tiny_qa, tmp_path / "whole", options=options)

    def interrupt(record):
        if record["epoch"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _train(tiny_bert, tiny_qa, tmp_path / "resumed", options=options, on_epoch_end=interrupt)
    resumed = _train(tiny_bert, tiny_qa, tmp_path / "resumed", options=options, resume=True)
    log = [json.loads(line) for line in (tmp_path / "resumed" / "train.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [0, 1, 2, 3]
    assert [r["dev"] for r in resumed.history] == [r["dev"] for r in whole.history]
    assert resumed.best_epoch == whole.best_epoch
    assert _same(_weights(whole.out), _weights(resumed.out))


@pytest.mark.slow
def test_sgd_plateau_halves_the_lr_after_patience_epochs_without_a_better_dev_score(tiny_bert, tiny_qa, tmp_path):
    """schedule=plateau (HCAN's SGD + Nesterov): the first epoch sets the best dev score; once plateau_patience
    epochs without a better one have been borne, the next such epoch ends with the lr times plateau_factor, and the
    count starts again. An lr of 1e-6 leaves the dev AP flat, so every epoch after the first is one without."""
    lr = 1e-6
    result = _train(tiny_bert, tiny_qa, tmp_path / "out", options={
        "epochs": 5, "optimizer": "sgd", "nesterov": True, "schedule": "plateau", "plateau_patience": 1,
        "plateau_factor": 0.5, "lr": lr})
    dev = [r["dev"]["AP"] for r in result.history]
    assert dev == [dev[0]] * 5 and result.best_epoch == 1                  # no epoch after the first is better
    # the lr each epoch trained with: epochs 2 and 3 without a better score -> halved after epoch 3; epoch 4 starts
    # the count again (halving again after epoch 5)
    assert [r["lr"] for r in result.history] == [lr, lr, lr, lr / 2, lr / 2]


def test_warmup_schedules_of_train_and_pretrain():
    """One schedule, each caller's shape: the reranker's ramp peaks at step `warmup`, pretrain-mlm's a step earlier
    and holds; both decay linearly to 0 at the last step."""
    from pipeline.training.optim import LinearWarmupDecay

    reranker = LinearWarmupDecay.reranker(0.2, 10)  # int(0.2 x 10) = 2 warm-up steps
    assert [reranker(s) for s in range(11)] == [1 / 3, 2 / 3, 1.0] + [(10 - s) / 8 for s in range(3, 11)]
    mlm = LinearWarmupDecay.mlm(0.2, 10)            # round(0.2 x 10) = 2
    assert [mlm(s) for s in range(11)] == [1 / 2, 1.0, 1.0] + [(10 - s) / 8 for s in range(3, 11)]
    assert LinearWarmupDecay.mlm(0.01, 10).warmup == 1 and LinearWarmupDecay.reranker(0.01, 10).warmup == 0
    assert [LinearWarmupDecay.reranker(0.0, 4)(s) for s in range(5)] == [4 / 4, 3 / 4, 2 / 4, 1 / 4, 0.0]
    # a warm-up longer than the run: the reranker's lr after its last step is still the ramp's
    assert LinearWarmupDecay.reranker(2.0, 3)(3) == 4 / 7 and LinearWarmupDecay.mlm(2.0, 3)(3) == 0.0


def test_pairwise_hinge_compares_within_groups():
    scores, labels = torch.tensor([2.0, 1.0, 0.5, 1.0, 3.0]), torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0])
    groups = torch.tensor([0, 0, 1, 1, 1])
    # group 0: (2.0 vs 1.0); group 1: (0.5 vs 3.0), (1.0 vs 3.0)
    expected = (max(0, 1 - 2 + 1) + max(0, 1 - 0.5 + 3) + max(0, 1 - 1 + 3)) / 3
    assert pairwise_hinge(scores, labels, groups, 1.0).item() == pytest.approx(expected)
    assert pairwise_hinge(scores, torch.ones(5), groups).item() == 0.0  # nothing to compare


def test_grouped_softmax_is_each_positives_cross_entropy_against_its_groups_negatives():
    scores, labels = torch.tensor([2.0, 1.0, 0.5, 1.0, 3.0, 0.0]), torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    groups = torch.tensor([0, 0, 1, 1, 1, 2])
    nll = lambda s, negatives: -s + math.log(math.exp(s) + sum(math.exp(n) for n in negatives))  # noqa: E731
    # group 0: positive 2.0 against 1.0; group 1: 0.5 and 1.0 each against 3.0 (not against each other); group 2: none
    expected = (nll(2.0, [1.0]) + nll(0.5, [3.0]) + nll(1.0, [3.0])) / 3
    assert grouped_softmax(scores, labels, groups).item() == pytest.approx(expected, rel=1e-6)
    assert grouped_softmax(scores, torch.ones(6), groups).item() == 0.0  # nothing to compare
    shifted = grouped_softmax(scores + 7.0, labels, groups).item()         # a softmax: only differences count
    assert shifted == pytest.approx(expected, rel=1e-5)


def test_batch_hard_triplet_picks_the_hardest_pair_of_each_group():
    # distances: group 0 positives 0.2, 0.9 (hardest 0.9), negatives 0.5, 1.5 (hardest 0.5); group 1: 0.3 vs 0.4
    distances = torch.tensor([0.2, 0.9, 0.5, 1.5, 0.3, 0.4])
    labels, groups = torch.tensor([1.0, 1, 0, 0, 1, 0]), torch.tensor([0, 0, 0, 0, 1, 1])
    expected = (max(0, 0.9 - 0.5 + 0.5) + max(0, 0.3 - 0.4 + 0.5)) / 2
    assert batch_hard_triplet(distances, labels, groups, 0.5).item() == pytest.approx(expected)


def test_in_batch_softmax_is_cross_entropy_over_the_batch():
    queries, docs = torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    cos = torch.tensor([[1.0, 2 ** -0.5], [0.0, 2 ** -0.5]])
    expected = torch.nn.functional.cross_entropy(20 * cos, torch.tensor([0, 1]))
    assert in_batch_softmax(queries, docs, ["a", "b"], 20.0).item() == pytest.approx(expected.item(), abs=1e-5)
    # two positives of one query: neither is the other's negative
    same = in_batch_softmax(queries, docs, ["a", "a"], 20.0)
    assert same.item() == pytest.approx(0.0, abs=1e-6)


def test_examples_from_labelled_candidates(tiny_qa):
    examples = examples_from(tiny_qa)
    assert examples.summary() == {"queries": 8, "pairs": 40, "positives": 8}
    assert examples.labels["q0"]["q0-a"] == 1 and examples.texts["q0-a"] == "the sky is blue"
    assert examples_from(tiny_qa, max_queries=3).summary()["queries"] == 3
    generator = torch.Generator().manual_seed(0)
    groups = examples.groups("pairs", generator, per_positive=2)
    assert len(groups) == 8 and all(len(g) == 3 and g[0].label == 1 and g[1].label == g[2].label == 0 and
                                    len({p.qid for p in g}) == 1 for g in groups)
    assert all(len(g) == 1 and g[0].label == 1 for g in examples.groups("positives", generator))
    queries = examples.groups("queries", generator, per_positive=2)
    assert len(queries) == 8 and all(2 <= len(g) <= 3 and len({p.qid for p in g}) == 1 for g in queries)
    batches = epoch_batches(examples, "pointwise", TrainOptions(train_batch_size=16), generator)
    assert sorted(len(b) for b in batches) == [8, 16, 16] and all(len(g) == 1 for b in batches for g in b)


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
    with pytest.raises(ConfigError, match="optimizer='lamb'; choose one of adamw, adam, sgd"):
        check_options({"optimizer": "lamb"})
    with pytest.raises(ConfigError, match="threads=0; expected an integer >= 1"):
        check_options({"threads": 0})
    with pytest.raises(ConfigError, match="has no field 'epoch'"):
        _train(tiny_bert, tiny_qa, tmp_path / "x", options={"epoch": 2})
    with pytest.raises(Exception, match="measure"):
        _train(tiny_bert, tiny_qa, tmp_path / "y", options={"measure": "MAPP"})
    assert not (tmp_path / "x").exists() and not (tmp_path / "y" / "state").exists()


@pytest.mark.slow
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


class _Fault(KeyboardInterrupt):
    """The process dies here (as under SIGKILL: nothing after this point runs)."""


@pytest.fixture(scope="module")
def two_epochs(tiny_bert, tiny_qa, tmp_path_factory):
    return _train(tiny_bert, tiny_qa, tmp_path_factory.mktemp("whole") / "out", options={"epochs": 2})


@pytest.mark.parametrize("fault", [1, *(pytest.param(f, marks=pytest.mark.slow) for f in (2, 3, 4, 5, "after-commit"))])
def test_a_fault_anywhere_in_the_state_save_resumes_bit_identical(tiny_bert, tiny_qa, tmp_path, monkeypatch, fault,
                                                                  two_epochs):
    """Kill the save of epoch 2's state before its 1st..5th file replacement (the weights, the checkpoint config,
    the trainer tensors, trainer.json, the commit) or after the commit: --resume ends with the very weights, history
    and best epoch of an uninterrupted run."""
    import os

    from pipeline.training.state import StateStore

    whole = two_epochs
    real_save, real_replace, real_sweep = StateStore.save, os.replace, StateStore.sweep

    def faulty_save(store, number, write_model, trainer):
        if number != 2:
            return real_save(store, number, write_model, trainer)
        calls = []

        def replace(src, dst):
            calls.append(dst)
            if len(calls) == fault:
                raise _Fault
            return real_replace(src, dst)

        def sweep(store):
            raise _Fault

        monkeypatch.setattr(os, "replace", replace)
        if fault == "after-commit":
            monkeypatch.setattr(StateStore, "sweep", sweep)
        try:
            real_save(store, number, write_model, trainer)
        finally:
            monkeypatch.setattr(os, "replace", real_replace)
            monkeypatch.setattr(StateStore, "sweep", real_sweep)

    monkeypatch.setattr(StateStore, "save", faulty_save)
    with pytest.raises(_Fault):
        _train(tiny_bert, tiny_qa, tmp_path / "cut", options={"epochs": 2})
    monkeypatch.setattr(StateStore, "save", real_save)
    resumed = _train(tiny_bert, tiny_qa, tmp_path / "cut", options={"epochs": 2}, resume=True)
    assert _same(_weights(whole.out), _weights(resumed.out))
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in whole.history]
    assert resumed.best_epoch == whole.best_epoch
    assert sorted(p.name for p in (tmp_path / "cut" / "state").iterdir()) == ["current.json", "epoch-0002"]


def test_a_tampered_state_is_refused_and_an_empty_one_said(tiny_bert, tiny_qa, tmp_path, caplog):
    _train(tiny_bert, tiny_qa, tmp_path / "out", options={"epochs": 1})
    (tmp_path / "out" / "state" / "epoch-0001" / "trainer.json").write_text("{}")
    with pytest.raises(ConfigError, match="inconsistent .*changed after it was saved"):
        _train(tiny_bert, tiny_qa, tmp_path / "out", options={"epochs": 2}, resume=True)
    (tmp_path / "fresh").mkdir()  # an existing --output folder without state: --resume says it starts afresh
    with caplog.at_level(logging.WARNING, logger="irpipe"):
        _train(tiny_bert, tiny_qa, tmp_path / "fresh", options={"epochs": 1}, resume=True)
    assert "holds no saved training state: training starts afresh" in caplog.text


def test_deterministic_mode_fixes_kernels_and_threads(tiny_bert, tiny_qa, tmp_path):
    threads = torch.get_num_threads()
    try:
        first = _train(tiny_bert, tiny_qa, tmp_path / "a", options={"epochs": 1, "deterministic": True})
        assert torch.are_deterministic_algorithms_enabled() and torch.get_num_threads() == 1
        second = _train(tiny_bert, tiny_qa, tmp_path / "b", options={"epochs": 1, "deterministic": True})
        assert _same(_weights(first.out), _weights(second.out))
    finally:
        torch.use_deterministic_algorithms(False)
        torch.set_num_threads(threads)


def test_length_balance_leaves_the_label_nothing_to_read_from_length():
    """balance=length: in each length tenth as many positives as negatives (the larger side subsampled, seeded); a
    tenth with one label only is dropped, as LCQMC dev's shortest tenth (all non-matches) is."""
    from pipeline.training.examples import Examples, length_balanced

    queries = {f"q{i}": "x" * (1 + i) for i in range(40)}                   # length grows with i
    texts = {f"d{i}": "y" for i in range(40)}
    labels = {f"q{i}": {f"d{i}": int(i >= 4 and i % 3 != 0)} for i in range(40)}  # the shortest tenth: all 0
    examples = Examples(queries, texts, labels)
    balanced = length_balanced(examples, seed=0)
    kept = [(int(q[1:]), label) for q, docs in balanced.labels.items() for label in docs.values()]
    assert all(i >= 4 for i, _ in kept) and len(kept) > 20                    # the all-negative tenth is gone
    for tenth in range(10):
        inside = [label for i, label in kept if 4 * tenth <= i < 4 * tenth + 4]
        assert inside.count(0) == inside.count(1)
    assert sum(label for _, label in kept) == len(kept) / 2
    assert set(balanced.texts) == {d for docs in balanced.labels.values() for d in docs}
    assert length_balanced(examples, seed=0).labels == balanced.labels     # seeded
    with pytest.raises(ConfigError, match="balance"):
        check_options({"balance": "size"})

"""Distillation (pipeline/training/distill.py): the listwise KL as its equations say, a teacher's standardised
scores as the targets with no qrels read, a student that learns the teacher's order, and the options' checks."""
from __future__ import annotations

import logging
import math

import pytest
import torch

from pipeline.errors import ConfigError
from pipeline.training import distill
from pipeline.training.distill import TARGETS_FILE, listwise_kl, standardised, teacher_examples
from pipeline.training.examples import epoch_batches, epoch_steps
from pipeline.training.identity import RecipeIdentity
from pipeline.training.loop import train
from pipeline.training.options import TrainOptions, check_options

OPTIONS = {"epochs": 3, "lr": 1e-3, "train_batch_size": 8, "seed": 3, "eval_batch_size": 64}


def test_listwise_kl_is_the_kl_of_the_softmaxes_within_each_group():
    scores, targets = torch.tensor([1.0, 0.0, 2.0, -1.0, 0.5]), torch.tensor([0.0, 1.0, 1.0, 0.0, 3.0])
    groups = torch.tensor([0, 0, 1, 1, 1])

    def kl(s, t):
        p, q = [math.exp(x) / sum(math.exp(y) for y in t) for x in t], [math.exp(x) / sum(math.exp(y) for y in s)
                                                                           for x in s]
        return sum(pi * math.log(pi / qi) for pi, qi in zip(p, q))

    expected = (kl([1.0, 0.0], [0.0, 1.0]) + kl([2.0, -1.0, 0.5], [1.0, 0.0, 3.0])) / 2
    assert listwise_kl(scores, targets, groups).item() == pytest.approx(expected, rel=1e-6)
    # a student equal to the teacher up to a constant per group has nothing left to learn
    assert listwise_kl(targets + torch.tensor([5.0, 5.0, -2.0, -2.0, -2.0]), targets, groups).item() == pytest.approx(
        0.0, abs=1e-6)


def test_standardised_scores_have_mean_0_and_sd_1():
    z = standardised({"a": 0.9, "b": 0.1, "c": 0.5, "d": 0.3})
    values = torch.tensor(list(z.values()), dtype=torch.float64)
    assert values.mean().item() == pytest.approx(0, abs=1e-12) and values.std().item() == pytest.approx(1)
    assert z["a"] > z["c"] > z["d"] > z["b"]
    assert standardised({"a": 2.0, "b": 2.0}) == {"a": 0.0, "b": 0.0}


@pytest.fixture(scope="module")
def teacher(tiny_bert, tiny_qa, tmp_path_factory):
    """A tiny monobert trained on TinyQA's labels: it ranks each question's answer first."""
    result = train("monobert", tiny_qa, tmp_path_factory.mktemp("teacher"), dev=tiny_qa, options=OPTIONS,
                   overrides={"bert": str(tiny_bert), "max_length": 32})
    assert result.best["AP"] == 1.0
    return result.out


@pytest.fixture(scope="module")
def unjudged(tiny_qa):
    """TinyQA without its qrels: a teacher needs none."""

    class Unjudged(type(tiny_qa)):
        provides = ("topics", "run")

        def qrels(self):
            raise AssertionError("a teacher's examples read no qrels")

    return Unjudged("tiny-qa-unjudged")


def test_teacher_examples_are_the_teachers_standardised_scores_without_qrels(teacher, unjudged):
    options = TrainOptions(teacher=str(teacher), eval_batch_size=64)
    examples = teacher_examples(unjudged, options, torch.device("cpu"))
    assert examples.summary() == {"queries": 8, "pairs": 40}                # no positives: a teacher's scores
    for qid, docs in examples.labels.items():
        assert max(docs, key=docs.get) == f"{qid}-a"                  # the teacher's order: the answer first
        assert sum(docs.values()) == pytest.approx(0, abs=1e-9)
    generator = torch.Generator().manual_seed(0)
    groups = examples.groups("listwise", generator, per_positive=2)
    assert len(groups) == 8 * 2 and all(len(g) == 2 and len({p.qid for p in g}) == 1 for g in groups)  # 5 = 2+2(+1)
    batches = epoch_batches(examples, "listwise", TrainOptions(teacher="x", teacher_group=3, train_batch_size=4),
                            generator)
    assert sum(len(b) for b in batches) == 8 * 2 == 4 * epoch_steps(examples, "listwise",
                                                                     TrainOptions(teacher_group=3, train_batch_size=4))


def test_saved_targets_are_reused_only_for_the_same_teacher_and_candidates(teacher, unjudged, tmp_path, monkeypatch):
    options = TrainOptions(teacher=str(teacher), eval_batch_size=64)
    scored = teacher_examples(unjudged, options, torch.device("cpu"), tmp_path).labels
    assert teacher_examples(unjudged, options, torch.device("cpu")).labels == scored   # scored again: the same numbers
    saved = (tmp_path / TARGETS_FILE).read_text(encoding="utf-8")

    def no_teacher(*args, **kwargs):
        raise AssertionError("the teacher ran again")

    with monkeypatch.context() as patch:
        patch.setattr(distill, "predict", no_teacher)
        assert teacher_examples(unjudged, options, torch.device("cpu"), tmp_path).labels == scored
        with pytest.raises(AssertionError, match="ran again"):   # fewer queries: other candidates, scored again
            teacher_examples(unjudged, TrainOptions(teacher=str(teacher), train_queries=4), torch.device("cpu"),
                             tmp_path)
    (tmp_path / TARGETS_FILE).write_text(saved.replace('"teacher": "', '"teacher": "x'), encoding="utf-8")
    assert teacher_examples(unjudged, options, torch.device("cpu"), tmp_path).labels == scored  # another's: rescored
    (tmp_path / TARGETS_FILE).write_text(saved[:100], encoding="utf-8")
    assert teacher_examples(unjudged, options, torch.device("cpu"), tmp_path).labels == scored  # unreadable: rescored
    assert (tmp_path / TARGETS_FILE).read_text(encoding="utf-8") == saved



def test_the_teacher_scores_at_the_trainings_precision_on_any_cpu(teacher, unjudged, tmp_path, monkeypatch):
    """Inference's amp="auto" is bf16 on a CPU with native bf16; a teacher's targets are training data, so they are
    fp32 there too (the same targets on every CPU) unless the recipe sets amp, which the saved targets record."""
    options = TrainOptions(teacher=str(teacher), eval_batch_size=64)
    fp32 = teacher_examples(unjudged, options, torch.device("cpu")).labels
    monkeypatch.setattr("pipeline.rerank.scoring.native_bf16", lambda: True)
    assert teacher_examples(unjudged, options, torch.device("cpu"), tmp_path).labels == fp32
    bf16 = teacher_examples(unjudged, TrainOptions(teacher=str(teacher), eval_batch_size=64, amp="bf16"),
                            torch.device("cpu"), tmp_path).labels                       # not the fp32 file's
    assert bf16 != fp32 and bf16.keys() == fp32.keys()
    assert '"amp": "bf16"' in (tmp_path / TARGETS_FILE).read_text(encoding="utf-8")

@pytest.mark.slow
def test_a_student_learns_the_teachers_order(teacher, tiny_bert, tiny_qa, unjudged, tmp_path, caplog):
    """A fresh monobert (another seed) trained on the teacher's scores alone ranks every answer first too, while
    the same network untrained does not. Its first training, resumable as the recipe cache runs it, does not warn
    that a folder holding only the targets just written has no state."""
    options = OPTIONS | {"teacher": str(teacher), "teacher_group": 5, "seed": 11, "epochs": 4}
    with caplog.at_level(logging.WARNING, logger="irpipe"):
        student = train("monobert", unjudged, tmp_path / "student", dev=tiny_qa, options=options,
                        overrides={"bert": str(tiny_bert), "max_length": 32}, resume=True)
    assert "training starts afresh" not in caplog.text
    assert student.best["AP"] == 1.0
    assert all("kl" in record["loss_parts"] for record in student.history)
    untrained = train("monobert", tiny_qa, tmp_path / "untrained", dev=tiny_qa, options=OPTIONS | {"lr": 0.0,
                      "epochs": 1}, overrides={"bert": str(tiny_bert), "max_length": 32})
    assert untrained.best["AP"] < 0.9


def test_a_checkpoint_teachers_weights_key_the_recipe(teacher, tiny_bert, tiny_qa, tmp_path):
    import shutil

    def key(folder):
        return RecipeIdentity.resolve("monobert", tiny_qa, options={"teacher": str(folder)},
                                      overrides={"bert": str(tiny_bert)}).key()

    copy = tmp_path / "copy"
    shutil.copytree(teacher, copy)
    before = key(copy)
    assert key(copy) == before
    weights = copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-4] + b"\0\0\0\1")  # retrained in place: another teacher
    assert key(copy) != before
    assert RecipeIdentity.resolve("monobert", tiny_qa).key() != RecipeIdentity.resolve(
        "monobert", tiny_qa, options={"teacher": "biencoder"}).key()


def test_bad_teacher_options_fail_before_training(tiny_bert, tiny_qa, tmp_path):
    with pytest.raises(ConfigError, match="teacher_group=1; expected an integer >= 2"):
        check_options({"teacher": "biencoder", "teacher_group": 1})
    with pytest.raises(ConfigError, match="reads no labels; negatives=random"):
        check_options({"teacher": "biencoder", "negatives": "random"})
    with pytest.raises(ConfigError, match="teacher=hcan is neither a pretrained model .*biencoder.* nor a checkpoint"):
        train("monobert", tiny_qa, tmp_path / "x", options=OPTIONS | {"teacher": "hcan"},
              overrides={"bert": str(tiny_bert), "max_length": 32})
    assert not (tmp_path / "x" / "state").exists()


@pytest.mark.slow
def test_a_distillation_killed_after_an_epoch_resumes_to_the_same_weights(teacher, tiny_bert, tiny_qa, tmp_path):
    """--resume trains on the saved teacher targets (the teacher does not run again) and the listwise draw continues
    from the saved RNG state: the resumed run ends with the uninterrupted run's weights and losses."""
    from safetensors.torch import load_file

    options = OPTIONS | {"teacher": str(teacher), "teacher_group": 3, "seed": 7}
    overrides = {"bert": str(tiny_bert), "max_length": 32}
    whole = train("monobert", tiny_qa, tmp_path / "whole", options=options, overrides=overrides)

    def interrupt(record):
        if record["epoch"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train("monobert", tiny_qa, tmp_path / "resumed", options=options, overrides=overrides, on_epoch_end=interrupt)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(distill, "predict", lambda *args, **kwargs: pytest.fail("the teacher ran again on --resume"))
        resumed = train("monobert", tiny_qa, tmp_path / "resumed", options=options, overrides=overrides, resume=True)
    first, second = load_file(whole.out / "model.safetensors"), load_file(resumed.out / "model.safetensors")
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
    assert [r["loss"] for r in whole.history] == [r["loss"] for r in resumed.history]

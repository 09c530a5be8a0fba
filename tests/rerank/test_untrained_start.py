"""epochs=0: a training recipe that yields the model's untrained start -- the model as built from the training data
(vocabulary, IDF, initial weights under the recipe's seed), no step taken -- keyed apart from every trained recipe,
so that an experiment can put the start in `baseline:` and test the trained model against it."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from pipeline.rerank.checkpoint import load_checkpoint
from pipeline.rerank.models.mrnn import MRNN, MRNNConfig
from pipeline.rerank.scoring import predict
from pipeline.training.examples import examples_from
from pipeline.training.identity import RecipeIdentity
from pipeline.training.loop import train
from pipeline.training.options import check_options
from support import make_pairs

# MRNN with the identity start (its untrained network ranks by the nearest-word distance of its inputs), small
OVERRIDES = {"embeddings": "random", "embedding_dim": 16, "filters": 16, "blocks": 2, "init": "identity",
             "max_query_length": 12, "max_doc_length": 16, "pretrained_vocab": 0, "seed": 1}
OPTIONS = {"train_batch_size": 4, "lr": 1e-2}  # the seed is the config's (as `mrnn(seed=1)`): training takes it too


def _built_here(dataset) -> MRNN:
    """The untrained model as the loop builds it: every RNG seeded with the recipe's seed, then the model made from
    the labelled training examples' queries and texts."""
    seed = OVERRIDES["seed"]
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    examples = examples_from(dataset, "labelled")
    config = MRNNConfig(**OVERRIDES)
    return MRNN.from_training_data(config, list(examples.queries.values()), list(examples.texts.values()),
                                   list(examples.doc_fields.values())).eval()


def test_epochs_0_is_the_untrained_model_and_scores_as_it(tiny_qa, tmp_path):
    """The checkpoint of epochs=0 holds the weights of the model built from the training data under the recipe's
    seed, and scores every pair exactly as that model does; its train.jsonl is epoch 0 with the start's dev scores."""
    start = train("mrnn", tiny_qa, tmp_path / "start", dev=tiny_qa, options=OPTIONS | {"epochs": 0},
                  overrides=OVERRIDES)
    assert start.best_epoch == 0 and set(start.best) >= {"AP"}
    log = [json.loads(line) for line in (tmp_path / "start" / "train.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [0] and log[0]["dev"] == start.best
    config = json.loads((tmp_path / "start" / "config.json").read_text())
    assert config["training"]["finished"] and config["training"]["epochs_run"] == 0
    built = _built_here(tiny_qa)
    saved = load_file(tmp_path / "start" / "model.safetensors")
    assert saved.keys() == built.state_dict().keys()
    assert all(torch.equal(saved[k], v) for k, v in built.state_dict().items())
    pairs = make_pairs([tiny_qa.topics()[q] for q in ("q0", "q1", "q2")],
                       ["the sky is blue", "a cat sleeps on the warm mat", "the snow is white"])
    assert predict(load_checkpoint(tmp_path / "start"), pairs).scores == predict(built, pairs).scores


def test_epochs_0_without_a_dev_set_keeps_the_start(tiny_qa, tmp_path):
    """No dev set: nothing to score, the start is still the checkpoint (the same weights as with one)."""
    with_dev = train("mrnn", tiny_qa, tmp_path / "dev", dev=tiny_qa, options=OPTIONS | {"epochs": 0},
                     overrides=OVERRIDES)
    alone = train("mrnn", tiny_qa, tmp_path / "alone", options=OPTIONS | {"epochs": 0}, overrides=OVERRIDES)
    assert alone.best_epoch == 0 and alone.best == {}
    a, b = load_file(with_dev.out / "model.safetensors"), load_file(alone.out / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_trained_recipe_moves_away_from_its_start(tiny_qa, tmp_path):
    """The same recipe with epochs > 0 starts from those weights and changes them: the start is a baseline of its
    own, not the trained model under another name."""
    start = train("mrnn", tiny_qa, tmp_path / "start", options=OPTIONS | {"epochs": 0}, overrides=OVERRIDES)
    trained = train("mrnn", tiny_qa, tmp_path / "trained", options=OPTIONS | {"epochs": 1}, overrides=OVERRIDES)
    a, b = load_file(start.out / "model.safetensors"), load_file(trained.out / "model.safetensors")
    assert a.keys() == b.keys() and not all(torch.equal(a[k], b[k]) for k in a)


def test_the_start_is_keyed_apart_from_the_trained_recipe(tiny_qa):
    """epochs=0 is part of the recipe key: the start and the trained model are two cache entries, two digests."""
    def key(epochs: int, seed: int = 1) -> str:
        return RecipeIdentity.resolve("mrnn", tiny_qa, tiny_qa, OPTIONS | {"epochs": epochs},
                                      OVERRIDES | {"seed": seed}).key()

    assert len({key(0), key(1), key(3), key(0, seed=2)}) == 4
    assert key(0) == key(0)


def test_the_stage_keys_the_start_apart(tiny_qa):
    """The stage's model digest (its stage-cache key) of `epochs=0` differs from the trained recipe's."""
    from pipeline.stages.neural import reranker_class

    stage = reranker_class("mrnn")
    start = stage(train=tiny_qa, dev=tiny_qa, epochs=0, **OVERRIDES)
    trained = stage(train=tiny_qa, dev=tiny_qa, epochs=3, **OVERRIDES)
    assert start.model_digest() != trained.model_digest()
    assert start.config()["epochs"] == 0


@pytest.mark.parametrize("epochs", [-1, 1.5])
def test_a_negative_or_fractional_epoch_count_is_refused(epochs):
    from pipeline.errors import ConfigError

    with pytest.raises(ConfigError, match="epochs"):
        check_options({"epochs": epochs})



def test_a_seed_given_as_a_training_option_seeds_the_config_too(tiny_qa):
    """`train("mrnn", ..., options={"seed": 2})` is `mrnn(seed=2)`: the seed reaches the config (its unknown-word
    rows) as well as the training run, so both give one recipe; two different seeds at once are refused."""
    from pipeline.errors import ConfigError

    overrides = {k: v for k, v in OVERRIDES.items() if k != "seed"}
    as_option = RecipeIdentity.resolve("mrnn", tiny_qa, tiny_qa, OPTIONS | {"seed": 2}, overrides)
    as_field = RecipeIdentity.resolve("mrnn", tiny_qa, tiny_qa, OPTIONS, overrides | {"seed": 2})
    assert as_option.config.seed == 2 and as_option.options.seed == 2
    assert as_option.key() == as_field.key()
    assert as_option.key() != RecipeIdentity.resolve("mrnn", tiny_qa, tiny_qa, OPTIONS, overrides).key()
    with pytest.raises(ConfigError, match="seed is 2 as a training option and 3 as a model config field"):
        RecipeIdentity.resolve("mrnn", tiny_qa, tiny_qa, OPTIONS | {"seed": 2}, overrides | {"seed": 3})

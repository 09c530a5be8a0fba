"""One options resolver: every keyword of a neural stage goes to exactly one of the model config, the training
options and the runtime (pipeline/training/options.py); `seed` alone is in two. ADDAX's code sharpness, once `alpha`
like training's keyword-negatives ratio, is `code_sharpness` now, and the two are different settings."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import pytest
import torch

from pipeline.errors import ConfigError
from pipeline.rerank import models
from pipeline.rerank.checkpoint import checkpoint_config
from pipeline.rerank.config import config_to_dict, make_config, recipe_fields
from pipeline.rerank.models.addax import ADDAX, ADDAXConfig
from pipeline.stages.neural import reranker_class
from pipeline.training.identity import RecipeIdentity
from pipeline.training.negatives import NegativeSampling
from pipeline.training.options import RUNTIME, SHARED, SOURCES, check_namespaces, split_options, training_names
from support import make_pairs


@pytest.mark.parametrize("name", models.model_names())
def test_no_model_config_shares_a_name_with_training_runtime_or_sources(name):
    fields = {f.name for f in dataclasses.fields(models.model_class(name).config_class)}
    assert not (fields & (training_names() | set(RUNTIME) | set(SOURCES))) - set(SHARED)
    assert not training_names() & set(RUNTIME)
    reranker_class(name)  # the stage class is made (and checked) without complaint


def test_a_config_that_reuses_a_training_or_runtime_name_is_refused_when_its_stage_class_is_made():
    @dataclass
    class ClashingConfig:
        lr: float = 0.1

    @dataclass
    class RuntimeClashConfig:
        threads: int = 1

    with pytest.raises(TypeError, match="lr are training options"):
        check_namespaces("clash", ClashingConfig)
    with pytest.raises(TypeError, match="threads are runtime options"):
        check_namespaces("clash", RuntimeClashConfig)


def test_each_option_lands_in_one_namespace_and_seed_in_two():
    split = split_options("hcan", models.model_class("hcan").config_class,
                          {"filters": 64, "lr": 0.1, "device": "cpu", "seed": 3})
    assert split.config == {"filters": 64, "seed": 3} and split.training == {"lr": 0.1, "seed": 3}
    assert split.runtime == {"device": "cpu"}
    with pytest.raises(ConfigError, match="did you mean code_sharpness"):
        split_options("addax", ADDAXConfig, {"code_sharpnes": 2.0})


def test_addax_code_sharpness_and_the_keyword_negatives_ratio_are_two_settings(shared_data):
    """`alpha=` reaches training's negative sampling only; `code_sharpness=` the model's codes only. (Before the
    split, ADDAX's config alpha 5.0 became training's alpha, and addax(alpha=...) could never set the ratio.)"""
    stage = reranker_class("addax")(train="wikiqa/train", negatives="keyword", negatives_dict="thucnews",
                                    alpha=0.3, code_sharpness=2.0)
    assert stage.train_options["alpha"] == 0.3 and stage.overrides == {"code_sharpness": 2.0}
    identity = stage.recipe().identity()
    assert identity.options.alpha == 0.3 and identity.config.code_sharpness == 2.0
    assert NegativeSampling.of(identity.options).alpha == 0.3

    plain = RecipeIdentity.resolve("addax", "wikiqa/train", options={"negatives": "bm25"})
    assert plain.options.alpha == 0.6 and plain.config.code_sharpness == 5.0  # neither leaks into the other
    keys = {RecipeIdentity.resolve("addax", "wikiqa/train", options=options, overrides=overrides).key()
            for options, overrides in [({"negatives": "keyword", "negatives_dict": "thucnews"}, {}),
                                       ({"negatives": "keyword", "negatives_dict": "thucnews", "alpha": 0.3}, {}),
                                       ({"negatives": "keyword", "negatives_dict": "thucnews"},
                                        {"code_sharpness": 2.0})]}
    assert len(keys) == 3  # each setting changes what is trained


def test_the_ratio_without_keyword_negatives_is_refused_not_ignored():
    with pytest.raises(ConfigError, match="code_sharpness") as error:
        reranker_class("addax")(train="wikiqa/train", alpha=5.0)
    assert error.value.field == "alpha"


def test_code_sharpness_changes_the_codes(tiny_bert):
    pairs = make_pairs(["who wrote hamlet"], ["hamlet is a tragedy by william shakespeare"])

    def scores(sharpness):
        torch.manual_seed(0)
        model = ADDAX(make_config(ADDAXConfig, {"bert": str(tiny_bert), "max_query_length": 16,
                                               "max_doc_length": 24, "code_sharpness": sharpness})).eval()
        with torch.inference_mode():
            return model.score(model(**model.prepare(pairs).tensors))

    assert not torch.allclose(scores(1.0), scores(50.0))


def test_an_addax_checkpoint_saved_with_alpha_loads_and_keys_keep_the_old_name(tmp_path):
    saved = json.loads(json.dumps(config_to_dict(ADDAXConfig(code_sharpness=3.0))))
    saved["alpha"] = saved.pop("code_sharpness")
    assert checkpoint_config(ADDAXConfig, saved, tmp_path / "config.json").code_sharpness == 3.0
    keyed = recipe_fields(ADDAXConfig(code_sharpness=3.0))
    assert keyed["alpha"] == 3.0 and "code_sharpness" not in keyed  # cached models stay where they were

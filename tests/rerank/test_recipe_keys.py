"""Recipe keys (the cache folder of a trained model) stay put when a model or the training loop gains a field: a
field at the value it had in effect before it existed is left out of the key, and a new field must come with that value
in pipeline/rerank/migrations.py ADDED. A field retired since (migrations.RETIRED) is keyed at the value the model
computes now, as it was before: no key moves."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from pipeline.rerank import migrations, models
from pipeline.rerank.config import recipe_fields
from pipeline.rerank.models.monobert import MonoBERTConfig
from pipeline.training.options import TrainOptions
from pipeline.training.recipes import Recipe

# Each class's fields when recipe keys became stable (2026-11-23). A field added since must be in migrations.ADDED
# with the value that does what the class did before it existed (checkpoints saved earlier read it as that).
KEYED_FIELDS = {
    "addax": "ablation alpha bert codes delta dropout gamma hash_bits hash_hidden margin max_doc_length "
             "max_query_length scaled",
    "biencoder": "bert max_length scale",
    "hcan": "bert_path char_trigrams dropout embedding_dim embeddings encoder external_features filters "
            "freeze_embeddings idf_stat kernel levels loss margin max_doc_length max_doc_trigrams max_query_length "
            "max_query_trigrams max_url_trigrams min_count overlap_mode pretrained_vocab rm_mode rm_only "
            "rm_similarity rm_softmax seed sm_hidden sm_mode sm_only trigram_dim trigram_kernel with_url",
    "kwbert": "bert dict dropout fusion language max_length score",
    "monobert": "bert dropout max_length max_query_length pooling score",
    "mrnn": "attention_init bert blocks doc_attention embedding_dim embeddings filters freeze_embeddings idf_inputs "
            "margin max_doc_length max_query_length own_negatives pooling pretrained_vocab seed summary window",
    "training": "alpha amp beta bucket depth deterministic device epochs eval_batch_size lr max_grad_norm measure "
                "min_rel momentum negatives negatives_dict negatives_per_positive nesterov optimizer patience "
                "plateau_factor plateau_patience replace_ratio schedule seed threads train_batch_size train_queries "
                "warmup weight_decay",
}


def _classes():
    yield "training", TrainOptions
    for name in models.model_names():
        yield name, models.model_class(name).config_class


@pytest.mark.parametrize("name, cls", list(_classes()), ids=[name for name, _ in _classes()])
def test_a_field_added_since_keys_became_stable_has_a_legacy_value(name, cls):
    renamed = migrations.renamed(cls)  # old name -> new name: keyed under the old one
    known = {renamed.get(field, field) for field in KEYED_FIELDS.get(name, "").split()}
    legacy = migrations.added(cls)
    added = [f.name for f in dataclasses.fields(cls) if f.name not in known and f.name not in legacy]
    assert not added, (f"{cls.__name__} gained {added} without an entry in migrations.ADDED: add each there with "
                       "the value that does what the class did before it (or, for a new model, list its fields in "
                       "KEYED_FIELDS), so that cached models and older checkpoints stay valid")
    defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
    fields, retired = {f.name for f in dataclasses.fields(cls)}, migrations.retired(cls)
    assert set(legacy) <= fields | set(retired), "migrations.ADDED names a field the class lacks (nor retired)"
    gone = known - fields - set(retired)  # a keyed field is still a field, under its new name, or retired
    assert not gone, f"{cls.__name__} lost {sorted(gone)} without an entry in migrations.RETIRED"
    assert not set(retired) & fields, "migrations.RETIRED names a field the class still has"
    assert all(name not in defaults or isinstance(value, type(defaults[name])) or value is None
               for name, value in legacy.items())


@dataclass
class GrownConfig(MonoBERTConfig):
    """MonoBERTConfig after gaining a field, with its value before it existed (as a later change would add it)."""

    temperature: float = 1.0


def test_a_field_at_its_legacy_value_is_left_out_of_the_key_and_in_it_otherwise(monkeypatch):
    monkeypatch.setitem(migrations.ADDED, "GrownConfig", {"temperature": 1.0})
    assert recipe_fields(GrownConfig()) == recipe_fields(MonoBERTConfig())
    assert recipe_fields(GrownConfig(temperature=2.0)) == recipe_fields(MonoBERTConfig()) | {"temperature": 2.0}
    assert "deterministic" not in recipe_fields(TrainOptions())
    assert recipe_fields(TrainOptions(deterministic=True))["deterministic"] is True


def test_recipe_key_ignores_options_at_their_legacy_value(shared_data):
    def key(**options):
        return Recipe("monobert", "wikiqa/train", "wikiqa/dev", {"epochs": 2} | options, {"max_length": 128}).key()

    assert key() == key(deterministic=False, replace_ratio=0.0) != key(deterministic=True)
    assert key() != key(epochs=3) and key(threads=1) == key()  # how it runs is never in the key


def test_recipe_keys_are_pinned(shared_data, monkeypatch):
    """The keys of cached models do not move with a refactoring (here at irpipe 0.1.0): a changed key retrains."""
    from pipeline.training import identity

    monkeypatch.setattr(identity, "__version__", "0.1.0")
    assert Recipe("monobert", "wikiqa/train", "wikiqa/dev", {"epochs": 2}, {"max_length": 128}).key() == \
        "4a7cd8372043ff8e943f7ae6b179d51b5b22b497"
    # a seed given as a training option seeds the config too, as `mrnn(seed=1, ...)` always did: the stage's key (the
    # key pinned here until 2026-12-02, 09c36c22..., was of config seed 0 with training seed 1, which no spec gives)
    assert Recipe("mrnn", "wikiqa/train", "wikiqa/dev", {"seed": 1}, {"attention_logits": "dot"}, device="cpu",
                  threads=2).key() == \
        Recipe("mrnn", "wikiqa/train", "wikiqa/dev", {"seed": 1}, {"attention_logits": "dot", "seed": 1}).key() == \
        "12bbf6f8ce97178ec7eeb40da9d00acd85b9a1ed"
    # HCAN's keys from before its retired fields (2026-11-27) left the config: the same after
    assert Recipe("hcan", "wikiqa/train", "wikiqa/dev", {"epochs": 2}, {}).key() == \
        "b275b8b0691808eee481605307362540e91b67cf"
    assert Recipe("hcan", "wikiqa/train", "wikiqa/dev", {"epochs": 2}, {"char_trigrams": True, "with_url": True}).key() \
        == "768d3f637483b377bf7c653196d0e4f87c69702a"


def test_a_renamed_field_keeps_its_old_name_in_keys_and_checkpoints_load(tmp_path):
    """HCAN's `bert_path` is `bert` now: recipe keys still say `bert_path` (cached models stay valid) and a
    checkpoint saved with the old name loads."""
    import json

    from pipeline.rerank.checkpoint import checkpoint_config
    from pipeline.rerank.config import config_to_dict
    from pipeline.rerank.models.hcan import HCANConfig

    assert "bert_path" in recipe_fields(HCANConfig()) and "bert" not in recipe_fields(HCANConfig())
    saved = json.loads(json.dumps(config_to_dict(HCANConfig(bert="models/b"))))
    saved["bert_path"] = saved.pop("bert")
    assert checkpoint_config(HCANConfig, saved, tmp_path / "config.json").bert == "models/b"



def test_a_retired_field_is_keyed_at_the_value_computed_now():
    """HCAN's idf_stat, rm_mode, ... (migrations.RETIRED) are in its recipe fields at the values every HCAN computes
    with, as they were when they were options at their defaults; those also in ADDED (trigram sizes) stay out."""
    from pipeline.rerank.models.hcan import HCANConfig

    fields = recipe_fields(HCANConfig())
    assert {k: fields[k] for k in ("idf_stat", "rm_mode", "sm_mode", "kernel", "min_count")} == \
        {"idf_stat": "df", "rm_mode": "paper", "sm_mode": "paper", "kernel": 2, "min_count": 1}
    assert not {"trigram_dim", "trigram_kernel", "max_query_trigrams", "max_doc_trigrams", "max_url_trigrams"} & set(fields)
    assert recipe_fields(HCANConfig(char_trigrams=True))["char_trigrams"] is True


def test_hcans_renamed_bilstm_encoder_keeps_its_key_and_its_checkpoints():
    """encoder=contextual (the paper's BiLSTM encoder, a word embeddings=contextual also used) is encoder=bilstm: a
    recipe keys it as before, a checkpoint saved with the old value loads as the new one, and the old value given now
    says what it is called."""
    import pytest

    from pipeline.errors import ConfigError
    from pipeline.rerank.checkpoint import checkpoint_config
    from pipeline.rerank.config import config_to_dict, make_config, recipe_fields
    from pipeline.rerank.models.hcan import HCANConfig

    assert recipe_fields(HCANConfig(encoder="bilstm"))["encoder"] == "contextual"  # the key it had
    saved = config_to_dict(HCANConfig(encoder="bilstm")) | {"encoder": "contextual"}
    assert checkpoint_config(HCANConfig, saved, "config.json").encoder == "bilstm"
    with pytest.raises(ConfigError, match="encoder=contextual is now encoder=bilstm"):
        make_config(HCANConfig, {"encoder": "contextual"})

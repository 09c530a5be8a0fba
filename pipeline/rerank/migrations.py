"""The history of every config a checkpoint or a recipe key records, in one table: what a field was called before,
and the value that a field added later had in effect before it existed.

    ADDED["ADDAXConfig"]["init"] == "random"          ADDAX trained this way before `init` existed
    RENAMED["ADDAXConfig"]["alpha"] == "code_sharpness"

Three readers use it, and nothing else keeps history:
- `checkpoint_config` (checkpoint.py) reads a config.json saved under an old name, or before a field was added, as
  the model it was trained as;
- `recipe_fields` (config.py) leaves a field at its ADDED value out of a recipe key and keys a renamed field under
  its old name, so that no cached model is re-keyed (and retrained) by a field's arrival or a new name;
- tests/rerank/test_recipe_keys.py refuses a config that gains a field without an entry here.

A new field of a model config or of `TrainOptions` goes into ADDED with the value that does what the class did before
it; a renamed field goes into RENAMED (old -> new). Tables are keyed by the class's name (`HCANConfig`,
`TrainOptions`), so this module imports no model.
"""
from __future__ import annotations

# class name -> {field: the value in effect before the field existed}
ADDED: dict[str, dict] = {
    "TrainOptions": {"deterministic": False, "negatives_dict": "", "alpha": 0.6, "beta": 0.2, "replace_ratio": 0.0,
                     "balance": "none"},
    # overlap features were ours ("stopwords") before the authors' code became the default; loss, margin and the
    # trigram inputs came with the tweet-search setting
    "HCANConfig": {"external_features": False, "overlap_mode": "stopwords", "rm_similarity": "dot", "loss": "nll",
                   "margin": 1.0, "char_trigrams": False, "with_url": False, "trigram_dim": 50, "trigram_kernel": 4,
                   "max_query_trigrams": 100, "max_doc_trigrams": 200, "max_url_trigrams": 120},
    "MRNNConfig": {"attention_logits": "dot"},
    # the paper's reading was the default before the identity start and the detached reconstruction target
    "ADDAXConfig": {"reconstruction": "live", "init": "random"},
}

# class name -> {old field name: new field name}; checkpoints saved under the old name load, keys keep the old one
RENAMED: dict[str, dict[str, str]] = {
    "HCANConfig": {"bert_path": "bert"},
    # ADDAX's code sharpness (tanh(alpha B)) was `alpha`, a name training's keyword-negatives ratio also has
    "ADDAXConfig": {"alpha": "code_sharpness"},
}


def added(config_class: type) -> dict:
    """{field: value before it existed} of a config class (or TrainOptions)."""
    return ADDED.get(config_class.__name__, {})


def renamed(config_class: type) -> dict[str, str]:
    """{old name: new name} of a config class's renamed fields."""
    return RENAMED.get(config_class.__name__, {})

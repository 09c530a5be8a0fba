"""The history of every config a checkpoint or a recipe key records, in one table: what a field was called before,
the value that a field added later had in effect before it existed, and the value a field removed since is computed
with now.

    ADDED["ADDAXConfig"]["init"] == "random"          ADDAX trained this way before `init` existed
    RENAMED["ADDAXConfig"]["alpha"] == "code_sharpness"
    RETIRED["HCANConfig"]["idf_stat"] == "df"        HCAN computes document-frequency IDF, and nothing else, now

Its readers, and nothing else keeps history:
- `checkpoint_config` (checkpoint.py) reads a config.json saved under an old name, or before a field was added, as
  the model it was trained as; a retired field at its RETIRED value is dropped (logged once), at any other value the
  checkpoint is refused (a CheckpointError naming the file and field: irpipe no longer computes that model);
- `recipe_fields` (config.py) leaves a field at its ADDED value out of a recipe key, keys a renamed field under
  its old name and puts a retired field back at its RETIRED value, so that no cached model is re-keyed (and
  retrained) by a field's arrival, a new name or its retirement;
- `make_config` (config.py) and `split_options` (pipeline/training/options.py) refuse a spec, `--set` or override
  naming a retired field with what the model computes now (`retired_message`);
- tests/rerank/test_recipe_keys.py refuses a config that gains a field without an entry here.

A new field of a model config or of `TrainOptions` goes into ADDED with the value that does what the class did before
it; a renamed field goes into RENAMED (old -> new); a field removed with its code path goes into RETIRED with the one
value the class still computes (a field also in ADDED stays there: keys leave it out at that value as before).
Tables are keyed by the class's name (`HCANConfig`, `TrainOptions`), so this module imports no model.
"""
from __future__ import annotations

# class name -> {field: the value in effect before the field existed}
ADDED: dict[str, dict] = {
    "TrainOptions": {"deterministic": False, "negatives_dict": "", "alpha": 0.6, "beta": 0.2, "replace_ratio": 0.0,
                     "balance": "none", "teacher": "", "teacher_group": 8, "keep_start": False,
                     "hold_out": "", "start_lr": 1.0},
    # overlap features were ours ("stopwords") before the authors' code became the default; loss, margin and the
    # trigram inputs came with the tweet-search setting
    "HCANConfig": {"external_features": False, "overlap_mode": "stopwords", "rm_similarity": "dot", "loss": "nll",
                   "margin": 1.0, "char_trigrams": False, "with_url": False, "trigram_dim": 50, "trigram_kernel": 4,
                   "max_query_trigrams": 100, "max_doc_trigrams": 200, "max_url_trigrams": 120,
                   "start": "random"},
    "MRNNConfig": {"attention_logits": "dot", "init": "random", "query_weights": "uniform", "loss": "triplet"},
    # the paper's reading was the default before the identity start and the detached reconstruction target
    "ADDAXConfig": {"reconstruction": "live", "init": "random"},
    # a backbone's pinned tensor checksum (2026-11-27): unpinned before, the path alone named the backbone
    # and a made backbone's pinned pretraining recipe (2026-11-28), the same on every CPU
    "KeywordBERTConfig": {"bert_sha256": "", "bert_recipe": ""},
    "MonoBERTConfig": {"bert_sha256": "", "bert_recipe": ""},
}

# class name -> {old field name: new field name}; checkpoints saved under the old name load, keys keep the old one
RENAMED: dict[str, dict[str, str]] = {
    "HCANConfig": {"bert_path": "bert"},
    # ADDAX's code sharpness (tanh(alpha B)) was `alpha`, a name training's keyword-negatives ratio also has
    "ADDAXConfig": {"alpha": "code_sharpness"},
}


# class name -> {field: {old value: new value}}; checkpoints saved with the old value load as the new one, keys keep the
# old value. HCAN's BiLSTM encoder was encoder=contextual (the paper's word), which embeddings=contextual (frozen BERT
# states, as MRNN's) also said: two meanings of one word in one config.
VALUES_RENAMED: dict[str, dict[str, dict]] = {
    "HCANConfig": {"encoder": {"contextual": "bilstm"}},
}


# class name -> {retired field: the value every model of the class computes with now}. Issue 42: the authors'-code
# variants and constants of HCAN that no experiment used (docs/models.md §1 names what each was).
RETIRED: dict[str, dict] = {
    "HCANConfig": {"idf_stat": "df", "rm_mode": "paper", "sm_mode": "paper", "kernel": 2, "min_count": 1,
                   "trigram_dim": 50, "trigram_kernel": 4, "max_query_trigrams": 100, "max_doc_trigrams": 200,
                   "max_url_trigrams": 120},
}

# class name -> when its fields in RETIRED were retired (a checkpoint's error names it)
RETIRED_IN: dict[str, str] = {"HCANConfig": "irpipe of 2026-11-27"}

# class name -> {retired field: what its value computed now means} (the errors above quote it)
RETIRED_NOTES: dict[str, dict[str, str]] = {
    "HCANConfig": {
        "idf_stat": "IDF from document frequencies; cf, the code's collection frequency, is gone",
        "rm_mode": "relevance matching pools max and mean, docs/models.md (3); code, max only, is gone",
        "sm_mode": "semantic matching reads the BiLSTM's last real states, (7); code, ReLU(H) then max + mean, is gone",
        "kernel": "conv kernel 2 at every deep / wide level: level l covers (l+1)-grams",
        "min_count": "every training word is in the vocabulary",
        "trigram_dim": "a 50-d trigram table (the authors' code's)",
        "trigram_kernel": "conv kernel 4 over trigrams (the authors' code's)",
        "max_query_trigrams": "a query's first 100 trigrams",
        "max_doc_trigrams": "a text's first 200 trigrams (the authors' code's MAX_3GRAM_LENGTH)",
        "max_url_trigrams": "a URL's last 120 trigrams (the authors' code's MAX_URL_LENGTH)",
    },
}


def added(config_class: type) -> dict:
    """{field: value before it existed} of a config class (or TrainOptions), its base classes' fields included."""
    return {k: v for cls in reversed(config_class.__mro__) for k, v in ADDED.get(cls.__name__, {}).items()}


def renamed(config_class: type) -> dict[str, str]:
    """{old name: new name} of a config class's renamed fields."""
    return RENAMED.get(config_class.__name__, {})


def values_renamed(config_class: type) -> dict[str, dict]:
    """{field: {old value: new value}} of a config class's renamed values."""
    return VALUES_RENAMED.get(config_class.__name__, {})


def renamed_value_message(config_class: type, name: str, value) -> str | None:
    """What an old value given now (a spec, --set) is called, or None."""
    new = values_renamed(config_class).get(name, {}).get(value) if isinstance(value, str) else None
    return f"{name}={value} is now {name}={new} (renamed: {value} said something else elsewhere)" if new else None


def retired(config_class: type) -> dict:
    """{retired field: the value the class computes with now} of a config class."""
    return RETIRED.get(config_class.__name__, {})


def retired_message(config_class: type, name: str) -> str | None:
    """Why `name` can no longer be set on `config_class` (a spec, --set, an override), or None if it is not retired."""
    fields = retired(config_class)
    if name not in fields:
        return None
    model = config_class.__name__.removesuffix("Config").lower()
    note = RETIRED_NOTES.get(config_class.__name__, {}).get(name, "")
    return (f"{model}: {name} was retired in {RETIRED_IN.get(config_class.__name__, 'an earlier irpipe')}: every "
            f"{model} now computes {name}={fields[name]}{f': {note}' if note else ''}; drop {name} from the spec")


def retired_value_problem(config_class: type, name: str, value) -> str | None:
    """Why a checkpoint saved with retired field `name` at `value` cannot load (None when `value` is the one the class
    computes now, or `name` is not retired)."""
    fields = retired(config_class)
    if name not in fields or value == fields[name]:
        return None
    note = RETIRED_NOTES.get(config_class.__name__, {}).get(name, "")
    return (f"trained with {name}={value}, which irpipe no longer computes; it was retired in "
            f"{RETIRED_IN.get(config_class.__name__, 'an earlier irpipe')}: this irpipe computes only "
            f"{name}={fields[name]}{f': {note}' if note else ''}. Retrain the model with this irpipe (the same spec "
            f"without {name}), or load it with an irpipe from before the retirement")

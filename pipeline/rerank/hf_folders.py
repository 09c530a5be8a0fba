"""Hugging Face model folders in and out: a monobert checkpoint is also a sentence-transformers `CrossEncoder`
folder, a biencoder checkpoint a `SentenceTransformer` folder, and such folders made elsewhere load as monobert
and biencoder checkpoints (pipeline/rerank/checkpoint.py calls both ways).

Out (`export`). irpipe's weights already carry transformers' names: monobert (pooling=pooler) is
BertForSequenceClassification with 2 labels (bert.*, classifier.*), the biencoder a BertModel under bert.*. So
model.safetensors serves both, config.json holds the transformers config beside irpipe's record (irpipe's keys
are extra attributes to transformers), and these are added:

    tokenizer.json, tokenizer_config.json    the tokenizer, model_max_length = the model's max_length
    modules.json, sentence_bert_config.json  Transformer at DIR (sequence-classification | feature-extraction), then
      monobert:  1_Dense/{config.json, model.safetensors}  scores (B, 2) -> (B, 1) = z_rel - z_nonrel: [-1 1]
      biencoder: 1_Pooling/config.json (mean), 2_Normalize
    config_sentence_transformers.json        model_type; activation_fn (Identity: logit, Sigmoid: prob); cosine

CrossEncoder(DIR).predict = monobert's z_1 - z_0 (score=logit) or softmax(z)_1 = sigmoid(z_1 - z_0) (score=prob);
SentenceTransformer(DIR): cosine of encode(q), encode(d) = the biencoder's. Inputs are cut as irpipe cuts them
unless a query is longer than max_query_length or the document's room (transformers cuts the longer side first).
monobert with pooling=cls has no transformers form (BertForSequenceClassification reads the pooler).

In (`foreign_record`, `load_foreign`): a folder with no irpipe record in config.json -- a cross-encoder
(BertForSequenceClassification, 1 or 2 labels, model.safetensors, tokenizer; with or without modules.json) or a
sentence-transformers folder (Transformer -> Pooling (mean) [-> Normalize]) -- is read as a monobert / biencoder
checkpoint: max_length from max_seq_length or the tokenizer's model_max_length (at most the positions), score from
the CrossEncoder's activation (Sigmoid / Softmax -> prob, else logit), a 1-label head w, b as the 2-class head
[0; w], [0; b]: monobert = CrossEncoder.predict (1 label), = predict[:, 1] - predict[:, 0] (2 labels, Identity).
What irpipe cannot run the same way (another architecture, CLS or max pooling, other modules, dot-product
similarity without Normalize, weights in pytorch_model.bin only) is a ModelFolderError naming the file.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path

from pipeline.data.files import atomic_write, parse_json, write_by_path
from pipeline.errors import ModelFolderError
from pipeline.log import logger

# irpipe's keys in config.json (checkpoint.py): every other key is the transformers config's
IRPIPE_KEYS = frozenset({"format", "model", "config", "irpipe", "training", "files", "digest", "digests"})
MODULES = "modules.json"
ST_CONFIG = "config_sentence_transformers.json"
MODULE_CONFIG = "sentence_bert_config.json"
WEIGHTS = "model.safetensors"
IDENTITY, SIGMOID = "torch.nn.modules.linear.Identity", "torch.nn.modules.activation.Sigmoid"
SOFTMAX = "torch.nn.modules.activation.Softmax"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
_TYPES = {"Transformer": "sentence_transformers.base.modules.transformer.Transformer",
          "Dense": "sentence_transformers.base.modules.dense.Dense",
          "Pooling": "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
          "Normalize": "sentence_transformers.base.modules.normalize.Normalize"}


# -- out: the checkpoint as a transformers / sentence-transformers folder ------------------------------------------
def export(model, directory: Path) -> dict:
    """Write the sentence-transformers files of `model` into its checkpoint folder; the transformers config keys
    config.json takes beside irpipe's record ({} for a model with no such form)."""
    directory = Path(directory)
    if model.name == "monobert" and model.config.pooling == "pooler":
        return _export_cross_encoder(model, directory)
    if model.name == "biencoder":
        return _export_sentence_transformer(model, directory)
    return {}


def _export_cross_encoder(model, directory: Path) -> dict:
    import torch

    config = _transformers_config(model.bert, "BertForSequenceClassification", {0: "not_relevant", 1: "relevant"})
    _write_tokenizer(model.tokenizer, directory, model.config.max_length)
    _write_json(directory / MODULE_CONFIG, {
        "transformer_task": "sequence-classification", "max_seq_length": model.config.max_length,
        "modality_config": {"text": {"method": "forward", "method_output_name": "logits"}},
        "module_output_name": "scores"})
    _write_json(directory / "1_Dense" / "config.json", {  # scores (B, 2) -> (B, 1): z_1 - z_0
        "in_features": 2, "out_features": 1, "bias": True, "activation_function": IDENTITY,
        "module_input_name": "scores", "module_output_name": "scores"})
    _write_tensors(directory / "1_Dense" / WEIGHTS, {"linear.weight": torch.tensor([[-1.0, 1.0]]),
                                                     "linear.bias": torch.zeros(1)})
    _write_json(directory / ST_CONFIG, {"model_type": "CrossEncoder", "prompts": {}, "default_prompt_name": None,
                                        "activation_fn": SIGMOID if model.config.score == "prob" else IDENTITY})
    _write_json(directory / MODULES, [_module(0, "", "Transformer"), _module(1, "1_Dense", "Dense")])
    return config


def _export_sentence_transformer(model, directory: Path) -> dict:
    config = _transformers_config(model.bert, "BertModel")
    _write_tokenizer(model.tokenizer, directory, model.config.max_length)
    _write_json(directory / MODULE_CONFIG, {
        "transformer_task": "feature-extraction", "max_seq_length": model.config.max_length,
        "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
        "module_output_name": "token_embeddings", "model_kwargs": {"add_pooling_layer": False}})  # (none saved)
    _write_json(directory / "1_Pooling" / "config.json", {"embedding_dimension": model.bert.config.hidden_size,
                                                          "pooling_mode": "mean", "include_prompt": True})
    (directory / "2_Normalize").mkdir(exist_ok=True)
    _write_json(directory / ST_CONFIG, {"model_type": "SentenceTransformer", "similarity_fn_name": "cosine",
                                        "prompts": {}, "default_prompt_name": None})
    _write_json(directory / MODULES, [_module(0, "", "Transformer"), _module(1, "1_Pooling", "Pooling"),
                                      _module(2, "2_Normalize", "Normalize")])
    return config


def _transformers_config(bert, architecture: str, labels: dict[int, str] | None = None) -> dict:
    """The BERT's transformers config as save_pretrained writes it, for `architecture` (and its labels)."""
    config = copy.deepcopy(bert.config)
    config.architectures = [architecture]
    if labels:
        config.id2label, config.label2id = labels, {name: i for i, name in labels.items()}
    data = json.loads(config.to_json_string(use_diff=False))
    clash = IRPIPE_KEYS & set(data)
    if clash:  # (transformers never uses these names; were it to, irpipe's record would lose them)
        raise ValueError(f"the transformers config has irpipe's key(s) {sorted(clash)}")
    return data


def _module(index: int, path: str, kind: str) -> dict:
    return {"idx": index, "name": str(index), "path": path, "type": _TYPES[kind]}


def _write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as out:
        json.dump(data, out, indent=2)
        out.write("\n")


def _write_tensors(path: Path, tensors: dict) -> None:
    from safetensors.torch import save_file

    write_by_path(path, lambda scratch: save_file(tensors, scratch, metadata={"format": "pt"}))


def _write_tokenizer(tokenizer, directory: Path, max_length: int) -> None:
    """The tokenizer files at the folder's top (where transformers looks), model_max_length = `max_length`: written
    into a scratch folder, then each renamed into place."""
    scratch = directory / f".tokenizer.{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        tokenizer.save_pretrained(scratch)
        settings = json.loads((scratch / "tokenizer_config.json").read_text(encoding="utf-8"))
        settings["model_max_length"] = max_length
        settings.pop("max_length", None)
        (scratch / "tokenizer_config.json").write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
        for path in sorted(scratch.iterdir()):
            if path.name != "config.json":
                os.replace(path, directory / path.name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# -- in: a folder made by transformers or sentence-transformers as a checkpoint ------------------------------------
def is_foreign(directory: Path, data: dict | None) -> bool:
    """Whether a folder (its config.json parsed, None when it has none) is a transformers / sentence-transformers
    folder rather than an irpipe checkpoint: no irpipe key in config.json, and a transformers config, or (no
    config.json) a modules.json whose Transformer lies in a subfolder."""
    if data is None:
        try:
            modules = json.loads((Path(directory) / MODULES).read_text(encoding="utf-8"))
            return any(isinstance(m, dict) and str(m.get("type", "")).endswith(".Transformer") and m.get("path")
                       for m in modules)
        except (OSError, ValueError, TypeError):
            return False  # (config.json missing: said as for any checkpoint)
    return (isinstance(data, dict) and not IRPIPE_KEYS & set(data)
            and ("architectures" in data or "model_type" in data))


def foreign_record(directory: Path) -> dict:
    """A checkpoint record (model, config) for a cross-encoder or sentence-transformers folder, with "foreign":
    where its BERT is, its head and the files read; a ModelFolderError naming the file irpipe cannot read."""
    directory = Path(directory)
    modules = _read_modules(directory) if (directory / MODULES).is_file() else []
    kinds = [kind for kind, _ in modules]
    bert = directory / dict(modules).get("Transformer", "") if modules else directory
    files = [MODULES] if modules else []
    if "Pooling" in kinds:
        if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            raise ModelFolderError(directory / MODULES, f"modules {' -> '.join(kinds)}: irpipe's biencoder is "
                                   "Transformer -> Pooling (mean) [-> Normalize]", field="type")
        pooling = directory / dict(modules)["Pooling"] / "config.json"
        _check_mean_pooling(pooling)
        files.append(_relative(pooling, directory))
        _check_similarity(directory, normalized="Normalize" in kinds)
        model, hf = "biencoder", _read_hf_config(bert, ("BertModel",))
        config = {"bert": str(bert), "max_length": _max_length(bert, hf), "scale": 20.0}
        labels = 0
    else:
        if modules and kinds not in (["Transformer"], ["Transformer", "Dense"]):
            raise ModelFolderError(directory / MODULES, f"modules {' -> '.join(kinds)}: irpipe's monobert reads a "
                                   "cross-encoder of one Transformer module [-> the Dense z_1 - z_0 head]",
                                   field="type")
        hf = _read_hf_config(bert, ("BertForSequenceClassification",))
        labels = _labels(bert / "config.json", hf)
        if "Dense" in kinds:  # the head irpipe's own CrossEncoder folders carry, saved again by sentence-transformers
            files += _check_difference_head(directory / dict(modules)["Dense"], directory, labels)
        length = _max_length(bert, hf)
        model = "monobert"
        config = {"bert": str(bert), "max_length": length, "max_query_length": min(64, length - 4),
                  "pooling": "pooler", "dropout": hf.get("hidden_dropout_prob", 0.1),
                  "score": _score(directory, hf, 1 if "Dense" in kinds else labels)}
    weights = bert / WEIGHTS
    if not weights.is_file():
        legacy = [name for name in ("pytorch_model.bin", "tf_model.h5", "flax_model.msgpack")
                  if (bert / name).is_file()]
        raise ModelFolderError(weights, "missing: irpipe reads weights from safetensors only" + (
            f" (this folder has {legacy[0]}, which it never unpickles: save the model again with transformers' "
            "save_pretrained(DIR, safe_serialization=True))" if legacy else ""))
    tokenizer = [name for name in TOKENIZER_FILES if (bert / name).is_file()]
    if not {"tokenizer.json", "vocab.txt"} & set(tokenizer):
        raise ModelFolderError(bert, "no tokenizer: a BERT folder holds tokenizer.json or vocab.txt")
    files += [_relative(bert / name, directory) for name in ("config.json", WEIGHTS, MODULE_CONFIG, *tokenizer)
              if (bert / name).is_file()]
    files += [ST_CONFIG] if (directory / ST_CONFIG).is_file() else []
    return {"model": model, "config": config,
            "foreign": {"bert": _relative(bert, directory), "labels": labels, "files": sorted(set(files))}}


def _relative(path: Path, directory: Path) -> str:
    return path.relative_to(directory).as_posix() if path != directory else "."


def read_json(path: Path, kind: type = dict):
    """A JSON file of a model folder, of `kind`; a ModelFolderError naming it (and the line) otherwise."""
    if not path.is_file():
        raise ModelFolderError(path, "missing")
    try:
        data = parse_json(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ModelFolderError(path, f"not valid JSON: {error.msg}", line=error.lineno) from None
    except UnicodeDecodeError:
        raise ModelFolderError(path, "not UTF-8 text") from None
    if not isinstance(data, kind):
        raise ModelFolderError(path, f"expected a JSON {'object' if kind is dict else 'list'}")
    return data


def _read_modules(directory: Path) -> list[tuple[str, str]]:
    """(kind, path) of each module of modules.json, in order."""
    path = directory / MODULES
    modules = []
    for i, entry in enumerate(read_json(path, list)):
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str) or not isinstance(
                entry.get("path", ""), str):
            raise ModelFolderError(path, f"module {i}: expected an object with a type and a path", field="type")
        kind = entry["type"].rsplit(".", 1)[-1]
        if kind not in _TYPES:
            raise ModelFolderError(path, f"module {i} is a {entry['type']}, which irpipe cannot run (it reads "
                                   "Transformer, Pooling, Normalize, and a CrossEncoder's single Transformer)",
                                   field="type")
        modules.append((kind, entry.get("path", "")))
    return modules


def _read_hf_config(bert: Path, architectures: tuple[str, ...]) -> dict:
    """The transformers config of the folder's BERT: a BERT (model_type bert) with one of `architectures`."""
    path = bert / "config.json"
    hf = read_json(path)
    if hf.get("model_type") != "bert":
        raise ModelFolderError(path, f"model_type {hf.get('model_type')!r}: irpipe's monobert and biencoder run a "
                               "BERT (model_type bert)", field="model_type")
    found = (hf.get("architectures") or [None])[0]
    if found is not None and found not in architectures and "BertModel" not in architectures:
        hint = (": a BERT without a ranking head; train a model on it with --set bert=" + str(bert)
                if found in ("BertModel", "BertForMaskedLM", "BertForPreTraining") else "")
        raise ModelFolderError(path, f"architectures {found}: irpipe reads a {' or '.join(architectures)} folder "
                               f"here{hint}", field="architectures")
    if found is None and "BertModel" not in architectures:
        raise ModelFolderError(path, "no architectures: a cross-encoder folder names "
                               "BertForSequenceClassification", field="architectures")
    return hf


def _labels(path: Path, hf: dict) -> int:
    labels = len(hf["id2label"]) if isinstance(hf.get("id2label"), dict) else hf.get("num_labels", 2)
    if labels not in (1, 2):
        raise ModelFolderError(path, f"{labels} labels: irpipe's monobert reads a 1-label (a score) or 2-label "
                               "(not relevant, relevant) head", field="id2label")
    return labels


def _max_length(bert: Path, hf: dict) -> int:
    """What sentence-transformers cuts inputs to: the module's max_seq_length, else the tokenizer's
    model_max_length, at most the BERT's positions."""
    positions = int(hf.get("max_position_embeddings", 512))
    for name, key in ((MODULE_CONFIG, "max_seq_length"), ("tokenizer_config.json", "model_max_length")):
        if (bert / name).is_file():
            value = read_json(bert / name).get(key)
            if isinstance(value, (int, float)) and 5 <= value:
                return min(int(min(value, 1 << 30)), positions)
    return positions


def _score(directory: Path, hf: dict, labels: int) -> str:
    """monobert's score for CrossEncoder.predict's: prob under a Sigmoid (1 label) or Softmax (2), else logit."""
    st = read_json(directory / ST_CONFIG) if (directory / ST_CONFIG).is_file() else {}
    activation = (st.get("activation_fn") or (hf.get("sentence_transformers") or {}).get("activation_fn")
                  or hf.get("sbert_ce_default_activation_function") or (SIGMOID if labels == 1 else IDENTITY))
    if activation == (SIGMOID if labels == 1 else SOFTMAX):
        return "prob"
    if activation != IDENTITY:
        logger.warning("%s: activation %s: irpipe scores the logit (the same order, other numbers)", directory,
                       activation)
    return "logit"


def _check_difference_head(folder: Path, directory: Path, labels: int) -> list[str]:
    """The Dense module of `export`'s cross-encoders (2 labels -> z_1 - z_0), or a ModelFolderError naming it."""
    import torch

    config = read_json(folder / "config.json")
    wanted = {"in_features": 2, "out_features": 1, "activation_function": IDENTITY}
    if labels != 2 or any(config.get(key) != value for key, value in wanted.items()):
        raise ModelFolderError(folder / "config.json", "a Dense module irpipe does not run: it reads the head its "
                               "own CrossEncoder folders carry (2 labels -> z_1 - z_0, Identity)", field="type")
    tensors = _load_tensors(folder / WEIGHTS)
    if not (torch.equal(tensors.get("linear.weight", torch.zeros(0)), torch.tensor([[-1.0, 1.0]]))
            and torch.equal(tensors.get("linear.bias", torch.zeros(1)), torch.zeros(1))):
        raise ModelFolderError(folder / WEIGHTS, "weights other than [-1 1] (z_1 - z_0): irpipe's monobert "
                               "cannot score through this head")
    return [_relative(folder / "config.json", directory), _relative(folder / WEIGHTS, directory)]


def _load_tensors(path: Path) -> dict:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if not path.is_file():
        raise ModelFolderError(path, "missing")
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as error:
        raise ModelFolderError(path, f"not a readable safetensors file ({error})") from None


def _check_mean_pooling(path: Path) -> None:
    pooling = read_json(path)
    mode = pooling.get("pooling_mode")
    if mode is None:  # sentence-transformers before v5: one boolean per mode
        modes = [key[len("pooling_mode_"):] for key, on in pooling.items() if key.startswith("pooling_mode_") and on]
        mode = modes[0] if len(modes) == 1 else "+".join(modes) or "none"
    if mode not in ("mean", "mean_tokens"):
        raise ModelFolderError(path, f"pooling {mode!r}: irpipe's biencoder mean-pools", field="pooling_mode")


def _check_similarity(directory: Path, normalized: bool) -> None:
    path = directory / ST_CONFIG
    similarity = read_json(path).get("similarity_fn_name") if path.is_file() else None
    if similarity not in (None, "cosine") and not normalized:
        raise ModelFolderError(path, f"similarity {similarity!r} on vectors not normalised: irpipe's biencoder "
                               "scores by cosine", field="similarity_fn_name")


def load_foreign(model_class, config, directory: Path, foreign: dict):
    """The model of a folder `foreign_record` read: its BERT built from the folder's config, the folder's
    tokenizer, the weights (a 1-label head w, b as the 2-class head [0; w], [0; b])."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    folder = Path(directory) / foreign["bert"]
    bert = BertModel(BertConfig.from_pretrained(folder), add_pooling_layer=model_class.uses_pooler(config))
    model = model_class(config, bert, AutoTokenizer.from_pretrained(str(folder), local_files_only=True))
    path = folder / WEIGHTS
    tensors = _load_tensors(path)
    if foreign["labels"] == 0:  # a BertModel's names (embeddings.*, ...), or already under bert.
        tensors = {name if name.startswith("bert.") else f"bert.{name}": value for name, value in tensors.items()}
    elif foreign["labels"] == 1 and "classifier.weight" in tensors:
        weight, bias = tensors["classifier.weight"], tensors.get("classifier.bias", torch.zeros(1))
        tensors["classifier.weight"] = torch.cat([torch.zeros_like(weight), weight])          # (2, H): [0; w]
        tensors["classifier.bias"] = torch.cat([torch.zeros_like(bias), bias])                # (2,):   [0; b]
    expected = model.state_dict()
    unused = {"bert.embeddings.position_ids"} | ({n for n in tensors if n.startswith("bert.pooler.")}
                                                  if not model_class.uses_pooler(config) else set())
    tensors = {name: value for name, value in tensors.items() if name not in unused}
    missing, unexpected = sorted(set(expected) - set(tensors)), sorted(set(tensors) - set(expected))
    wrong = [n for n in tensors if n in expected and tuple(tensors[n].shape) != tuple(expected[n].shape)]
    if missing or unexpected or wrong:
        problems = (("missing tensors", missing), ("unexpected tensors", unexpected),
                    ("tensors of another shape than config.json gives", wrong))
        parts = [f"{label} {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}" for label, names in problems
                 if names]
        raise ModelFolderError(path, "; ".join(parts), field=(missing or unexpected or wrong)[0])
    model.load_state_dict(tensors)
    return model

"""Hugging Face model folders in and out: a cross-encoder folder (transformers' or sentence-transformers') reranks as
monobert with CrossEncoder.predict's scores, a sentence-transformers folder as biencoder with its cosine; folders
irpipe trains load in CrossEncoder / SentenceTransformer and score as irpipe does; folders irpipe cannot run the
same way are refused naming the file (exit 2)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from pipeline.data.runs import read_run
from support import irpipe, make_pairs

COLOURS = [("sky", "blue"), ("grass", "green"), ("snow", "white"), ("coal", "black"), ("blood", "red"),
           ("sun", "yellow"), ("violet", "purple"), ("sea", "blue")]
DISTRACTORS = ["the train left the station late", "a cat sleeps on the warm mat", "numbers can be added",
               "rivers flow to the sea"]


@pytest.fixture(scope="module")
def pairs_folder(tmp_path_factory) -> Path:
    """Labelled pairs of our own: 8 questions, the right answer and 4 distractors each (40 pairs)."""
    folder = tmp_path_factory.mktemp("colour-pairs")
    rows = [f"1\twhat colour is the {thing}\tthe {thing} is {colour}\n" +
            "".join(f"0\twhat colour is the {thing}\t{text}\n" for text in DISTRACTORS[i % 2:] + DISTRACTORS[:i % 2])
            for i, (thing, colour) in enumerate(COLOURS)]
    (folder / "pairs.tsv").write_text("".join(rows))
    (folder / "dataset.yaml").write_text("kind: pairs\nfiles: {pairs: pairs.tsv}\n")
    return folder


def the_pairs(folder: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(qid, docid) and (query, text) of every pair of the dataset folder, in one order."""
    from pipeline.data.registry import get_dataset

    dataset = get_dataset(str(folder))
    run, queries = dataset.run(), dataset.topics().queries
    keys = [(qid, docid) for qid, hits in run.ranking.items() for docid, _ in hits]
    return keys, [(queries[qid], run.texts[docid]) for qid, docid in keys]


def reranked(capsys, tmp_path: Path, model: str | Path, folder: Path, *options) -> dict[tuple[str, str], float]:
    """(qid, docid) -> score of `irpipe rerank --model MODEL` over the folder's pairs (scores written to 6 places)."""
    out = tmp_path / f"rerank-{len(list(tmp_path.glob('rerank-*')))}.trec"
    code, _, err = irpipe(capsys, "rerank", "--model", model, "--dataset", folder, "--output", out, "--threads", "1",
                       *options)
    assert code == 0, err
    return {(qid, docid): score for qid, hits in read_run(out).ranking.items() for docid, score in hits}


def assert_same_scores(ours: dict, keys: list, theirs, tolerance: float = 1e-5) -> None:
    """Scores within `tolerance`, spread enough that this says something, and each query's order the same."""
    theirs = [float(s) for s in theirs]
    assert max(theirs) - min(theirs) > 100 * tolerance
    assert [ours[key] for key in keys] == pytest.approx(theirs, abs=tolerance)
    for qid in {q for q, _ in keys}:
        rows = [i for i, key in enumerate(keys) if key[0] == qid]
        assert sorted(rows, key=lambda i: -ours[keys[i]]) == sorted(rows, key=lambda i: -theirs[i])


def seeded_head(classifier: torch.nn.Linear, seed: int) -> None:
    """A seeded head of unit-variance weights: on MiniLM's pooled vectors, logits apart by units."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        classifier.weight.copy_(torch.randn(classifier.weight.shape, generator=generator))
        classifier.bias.copy_(torch.randn(classifier.bias.shape, generator=generator))


@pytest.fixture(scope="module")
def minilm() -> str:
    """all-MiniLM-L6-v2's folder (from its package): a BERT whose [CLS] vectors differ from pair to pair, unlike
    those of a random tiny BERT, so that the scores compared below are well apart."""
    from pipeline.rerank.bert import DEFAULT_BERT, bert_folder

    return str(bert_folder(DEFAULT_BERT))


# -- in: folders made by sentence-transformers and transformers ------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("activation", ["default", "identity"])
def test_a_crossencoder_folder_reranks_as_crossencoder_predict_scores(tmp_path, capsys, minilm, pairs_folder,
                                                                       activation):
    from sentence_transformers import CrossEncoder

    from pipeline.rerank.checkpoint import read_checkpoint_config

    kwargs = {"activation_fn": torch.nn.Identity()} if activation == "identity" else {}
    model = CrossEncoder(minilm, num_labels=1, max_length=128, device="cpu", **kwargs)
    seeded_head(model[0].model.classifier, 1)
    model.save(str(tmp_path / "ce"))
    keys, texts = the_pairs(pairs_folder)
    expected = CrossEncoder(str(tmp_path / "ce"), device="cpu").predict(texts)  # sigmoid(logit) | logit
    assert_same_scores(reranked(capsys, tmp_path, tmp_path / "ce", pairs_folder), keys, expected)
    record = read_checkpoint_config(tmp_path / "ce")  # the folder's config: score from its activation
    assert record["config"]["score"] == ("prob" if activation == "default" else "logit")
    assert record["config"]["max_length"] == 128


@pytest.mark.slow
def test_a_two_label_transformers_folder_scores_relevant_minus_not_relevant(tmp_path, capsys, minilm, pairs_folder):
    from sentence_transformers import CrossEncoder
    from transformers import AutoTokenizer, BertForSequenceClassification

    model = BertForSequenceClassification.from_pretrained(minilm, num_labels=2)
    seeded_head(model.classifier, 2)
    model.save_pretrained(tmp_path / "hf")
    AutoTokenizer.from_pretrained(minilm).save_pretrained(tmp_path / "hf")
    keys, texts = the_pairs(pairs_folder)
    logits = CrossEncoder(str(tmp_path / "hf"), device="cpu").predict(texts)  # (n, 2): Identity for 2 labels
    spec = f"candidates() >> monobert(ckpt={tmp_path / 'hf'}, threads=1)"  # the stage spec, as --model DIR
    code, _, err = irpipe(capsys, "run", spec, "--dataset", pairs_folder, "--output", tmp_path / "spec.trec")
    assert code == 0, err
    ours = {(q, d): s for q, hits in read_run(tmp_path / "spec.trec").ranking.items() for d, s in hits}
    assert_same_scores(ours, keys, logits[:, 1] - logits[:, 0])


def _transformer_in_a_subfolder(folder: Path) -> None:
    """The older layout: the Transformer module's files under 0_Transformer/, no config.json at the top."""
    (folder / "0_Transformer").mkdir()
    for path in folder.iterdir():
        if path.is_file() and path.name not in ("modules.json", "config_sentence_transformers.json", "README.md"):
            path.rename(folder / "0_Transformer" / path.name)
    modules = json.loads((folder / "modules.json").read_text())
    modules[0]["path"] = "0_Transformer"
    (folder / "modules.json").write_text(json.dumps(modules))


@pytest.mark.parametrize("layout", ["top", "subfolder"])
def test_a_sentence_transformers_folder_reranks_as_its_cosine(tmp_path, capsys, tiny_bert, pairs_folder, layout):
    from sentence_transformers import SentenceTransformer

    SentenceTransformer(str(tiny_bert), device="cpu").save(str(tmp_path / "st"))  # mean pooling, no Normalize
    if layout == "subfolder":
        _transformer_in_a_subfolder(tmp_path / "st")
        assert not (tmp_path / "st" / "config.json").exists()
    model = SentenceTransformer(str(tmp_path / "st"), device="cpu")
    keys, texts = the_pairs(pairs_folder)
    queries, docs = (model.encode([pair[i] for pair in texts], convert_to_tensor=True) for i in (0, 1))
    cosine = torch.nn.functional.cosine_similarity(queries, docs)
    assert_same_scores(reranked(capsys, tmp_path, tmp_path / "st", pairs_folder), keys, cosine, tolerance=2e-6)


@pytest.mark.slow
def test_the_packaged_minilm_folder_is_the_zero_shot_biencoder(tmp_path, capsys, pairs_folder):
    from pipeline.rerank.bert import DEFAULT_BERT, bert_folder

    folder = bert_folder(DEFAULT_BERT)  # sentence-transformers' own all-MiniLM-L6-v2 folder
    assert reranked(capsys, tmp_path, folder, pairs_folder) == reranked(capsys, tmp_path, "biencoder", pairs_folder)


# -- out: folders irpipe trains ----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_trained_monobert_folder_is_a_crossencoder_with_the_same_scores(tmp_path, capsys, tiny_bert, pairs_folder):
    from sentence_transformers import CrossEncoder

    from pipeline.errors import CheckpointError
    from pipeline.rerank.checkpoint import load_checkpoint

    code, _, err = irpipe(capsys, "train", "monobert", "--train", pairs_folder, "--output", tmp_path / "mono", "--epochs",
                       "2", "--threads", "1", "--lr", "1e-3", "--set", f"bert={tiny_bert}", "--set", "max_length=64")
    assert code == 0, err
    keys, texts = the_pairs(pairs_folder)
    ce = CrossEncoder(str(tmp_path / "mono"), device="cpu")
    assert ce.max_seq_length == 64
    assert_same_scores(reranked(capsys, tmp_path, tmp_path / "mono", pairs_folder), keys, ce.predict(texts))
    record = json.loads((tmp_path / "mono" / "config.json").read_text())
    assert {"modules.json", "1_Dense/model.safetensors", "tokenizer.json"} <= set(record["files"])
    assert record["architectures"] == ["BertForSequenceClassification"] and record["model"] == "monobert"
    damaged = tmp_path / "damaged"  # the integrity records cover the added files and the transformers config
    shutil.copytree(tmp_path / "mono", damaged)
    (damaged / "1_Dense" / "model.safetensors").write_bytes(
        (tmp_path / "mono" / "1_Dense" / "model.safetensors").read_bytes()[:-1] + b"\x01")
    with pytest.raises(CheckpointError, match="1_Dense/model.safetensors"):
        load_checkpoint(damaged)
    shutil.copytree(tmp_path / "mono", damaged, dirs_exist_ok=True)
    (damaged / "config.json").write_text(json.dumps(record | {"hidden_size": 64}))
    with pytest.raises(CheckpointError, match="digest"):
        load_checkpoint(damaged)


@pytest.mark.slow
def test_a_probability_monobert_is_a_sigmoid_crossencoder(tmp_path, minilm, pairs_folder):
    from sentence_transformers import CrossEncoder

    from pipeline.rerank.checkpoint import load_checkpoint, save_checkpoint
    from pipeline.rerank.models.monobert import MonoBERT, MonoBERTConfig
    from pipeline.rerank.scoring import predict

    torch.manual_seed(0)
    model = MonoBERT(MonoBERTConfig(bert=minilm, max_length=64, score="prob")).eval()
    seeded_head(model.classifier, 3)
    save_checkpoint(model, tmp_path / "prob")
    _, texts = the_pairs(pairs_folder)
    ours = predict(load_checkpoint(tmp_path / "prob"), make_pairs(*zip(*texts)), 8, torch.device("cpu")).scores
    theirs = CrossEncoder(str(tmp_path / "prob"), device="cpu").predict(texts)
    assert max(ours) - min(ours) > 1e-2 and ours == pytest.approx([float(s) for s in theirs], abs=1e-6)


@pytest.mark.slow
def test_a_monobert_folder_saved_again_by_sentence_transformers_loads_once_irpipe_record_is_removed(
        tmp_path, minilm, pairs_folder):
    from sentence_transformers import CrossEncoder

    from pipeline.errors import CheckpointError
    from pipeline.rerank.checkpoint import load_checkpoint, save_checkpoint
    from pipeline.rerank.hf_folders import IRPIPE_KEYS
    from pipeline.rerank.models.monobert import MonoBERT, MonoBERTConfig
    from pipeline.rerank.scoring import predict

    model = MonoBERT(MonoBERTConfig(bert=minilm, max_length=64)).eval()
    seeded_head(model.classifier, 4)
    save_checkpoint(model, tmp_path / "ours")
    CrossEncoder(str(tmp_path / "ours"), device="cpu").save(str(tmp_path / "again"))  # keeps irpipe's keys
    with pytest.raises(CheckpointError, match="remove irpipe's keys"):
        load_checkpoint(tmp_path / "again")
    config = json.loads((tmp_path / "again" / "config.json").read_text())
    (tmp_path / "again" / "config.json").write_text(json.dumps({k: v for k, v in config.items()
                                                                if k not in IRPIPE_KEYS}))
    _, texts = the_pairs(pairs_folder)
    pairs = make_pairs(*zip(*texts))
    again = predict(load_checkpoint(tmp_path / "again"), pairs, 8, torch.device("cpu")).scores
    assert again == predict(load_checkpoint(tmp_path / "ours"), pairs, 8, torch.device("cpu")).scores
    theirs = CrossEncoder(str(tmp_path / "again"), device="cpu").predict(texts)
    assert max(again) - min(again) > 1e-1 and again == pytest.approx([float(s) for s in theirs], abs=1e-5)


def test_a_cls_pooling_monobert_has_no_crossencoder_form(tmp_path, tiny_bert):
    from pipeline.rerank.checkpoint import load_checkpoint, save_checkpoint
    from pipeline.rerank.models.monobert import MonoBERT, MonoBERTConfig

    save_checkpoint(MonoBERT(MonoBERTConfig(bert=str(tiny_bert), pooling="cls")), tmp_path / "cls")
    assert not (tmp_path / "cls" / "modules.json").exists()
    assert "architectures" not in json.loads((tmp_path / "cls" / "config.json").read_text())
    assert load_checkpoint(tmp_path / "cls").config.pooling == "cls"


def test_a_trained_biencoder_folder_is_a_sentence_transformer_with_the_same_scores(tmp_path, capsys, tiny_bert,
                                                                                   pairs_folder):
    from sentence_transformers import SentenceTransformer

    code, _, err = irpipe(capsys, "train", "biencoder", "--train", pairs_folder, "--output", tmp_path / "bi", "--epochs",
                       "1", "--threads", "1", "--set", f"bert={tiny_bert}", "--set", "max_length=48")
    assert code == 0, err
    keys, texts = the_pairs(pairs_folder)
    model = SentenceTransformer(str(tmp_path / "bi"), device="cpu")
    assert model.max_seq_length == 48
    queries, docs = (model.encode([pair[i] for pair in texts], convert_to_tensor=True) for i in (0, 1))
    assert torch.allclose(queries.norm(dim=-1), torch.ones(len(keys)))  # normalised, as irpipe's stored rows
    assert_same_scores(reranked(capsys, tmp_path, tmp_path / "bi", pairs_folder), keys,
                       model.similarity_pairwise(queries, docs), tolerance=2e-6)


# -- what irpipe cannot run the same way: exit 2 naming the file -------------------------------------------------------
def _edit_json(path: Path, **changes) -> None:
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


def _cls_pooling(folder: Path) -> None:
    _edit_json(folder / "1_Pooling" / "config.json", pooling_mode="cls")


def _bin_weights(folder: Path) -> None:
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")


def _roberta(folder: Path) -> None:
    _edit_json(folder / "config.json", model_type="roberta")


def _three_labels(folder: Path) -> None:
    _edit_json(folder / "config.json", id2label={"0": "a", "1": "b", "2": "c"})


def _broken_modules(folder: Path) -> None:
    (folder / "modules.json").write_text('[\n  {"idx": 0,\n')


def _dense_module(folder: Path) -> None:
    modules = json.loads((folder / "modules.json").read_text())
    modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules))


@pytest.mark.parametrize("kind, damage, named", [
    ("st", _cls_pooling, "1_Pooling/config.json [pooling_mode]: pooling 'cls'"),
    ("st", _dense_module, "modules.json [type]: modules Transformer -> Pooling -> Dense"),
    ("ce", _bin_weights, "model.safetensors: missing: irpipe reads weights from safetensors only (this folder has"),
    ("ce", _roberta, "config.json [model_type]: model_type 'roberta'"),
    ("ce", _three_labels, "config.json [id2label]: 3 labels"),
    ("ce", _broken_modules, "modules.json:3: not valid JSON"),
    ("bert", None, "config.json [architectures]: architectures BertModel"),
])
def test_folders_irpipe_cannot_run_the_same_way_exit_2_naming_the_file(tmp_path, capsys, tiny_bert, pairs_folder,
                                                                       kind, damage, named):
    from sentence_transformers import CrossEncoder, SentenceTransformer

    folder = tmp_path / kind
    if kind == "st":
        SentenceTransformer(str(tiny_bert), device="cpu").save(str(folder))
    elif kind == "ce":
        CrossEncoder(str(tiny_bert), num_labels=1, device="cpu").save(str(folder))
    else:
        shutil.copytree(tiny_bert, folder)  # a BERT with no ranking head
    if damage is not None:
        damage(folder)
    code, _, err = irpipe(capsys, "rerank", "--model", folder, "--dataset", pairs_folder, "--output", tmp_path / "x")
    assert code == 2 and f"{folder}/{named}" in err, err
    assert not (tmp_path / "x").exists()


def test_a_sentence_transformers_folder_given_to_monobert_says_which_model_it_holds(tmp_path, capsys, tiny_bert,
                                                                                    pairs_folder):
    from sentence_transformers import SentenceTransformer

    SentenceTransformer(str(tiny_bert), device="cpu").save(str(tmp_path / "st"))
    code, _, err = irpipe(capsys, "run", f"candidates() >> monobert(ckpt={tmp_path / 'st'})", "--dataset", pairs_folder,
                       "--output", tmp_path / "x")
    assert code == 2 and "holds a biencoder model, not a monobert: use biencoder(ckpt=" in err, err

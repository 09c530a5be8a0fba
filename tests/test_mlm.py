"""MLM pretraining (`irpipe pretrain-mlm`): the masking rule (rate, 80/10/10, whole words kept whole), a vocabulary
built from the text, a run interrupted after a saved state and resumed reaching the same weights as one that was
not, and an output folder that the BERT loader and kwbert take as `bert=`."""
from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from pipeline.errors import ConfigError
from pipeline.training import pretrain as pretrain_module
from pipeline.training.mlm import SPECIALS, MLMOptions, build_vocab, make_tokenizer
from pipeline.training.mlm_examples import MaskedBatches, jieba_words, mask_tokens, token_words
from pipeline.training.pretrain import pretrain
from support import save_tiny_bert

TEXTS = ["信用卡怎么还款", "贷款利率怎么算", "今天足球比赛怎么样", "我想去打篮球", "信用卡如何办理",
         "银行贷款需要什么材料", "足球比赛几点开始", "篮球和足球哪个好"] * 3


def _options(**changes) -> MLMOptions:
    return MLMOptions(**({"layers": 1, "hidden": 32, "batch_size": 4, "steps": 6, "save_every": 3, "log_every": 1,
                          "held_out": 0.1, "threads": 1} | changes))


def test_masking_rate_and_replacements():
    generator = torch.Generator().manual_seed(0)
    ids = list(range(10, 30))  # 20 tokens: 3 chosen at rate 0.15
    counts = {"mask": 0, "other": 0, "same": 0}
    for _ in range(300):
        inputs, labels = mask_tokens(ids, list(range(20)), 0.15, 100, 4, len(SPECIALS), generator)
        chosen = [i for i, label in enumerate(labels) if label != -100]
        assert len(chosen) == 3 and all(labels[i] == ids[i] for i in chosen)
        assert all(inputs[i] == ids[i] for i in range(20) if i not in chosen)
        for i in chosen:
            counts["mask" if inputs[i] == 4 else "same" if inputs[i] == ids[i] else "other"] += 1
    total = sum(counts.values())
    assert 0.75 < counts["mask"] / total < 0.85 and 0.06 < counts["other"] / total < 0.14


def test_whole_words_are_masked_whole(tmp_path):
    text = "信用卡怎么还款"  # jieba: 信用卡 / 怎么 / 还款
    words = token_words([(i, i + 1) for i in range(len(text))], jieba_words(text))
    assert words == [0, 0, 0, 1, 1, 2, 2]
    generator = torch.Generator().manual_seed(1)
    for _ in range(50):
        _, labels = mask_tokens(list(range(10, 17)), words, 0.4, 100, 4, 5, generator)  # 3 of 7 tokens at most
        chosen = {i for i, label in enumerate(labels) if label != -100}
        for word in set(words):
            members = {i for i, w in enumerate(words) if w == word}
            assert members <= chosen or not members & chosen  # a word is masked whole or not at all
    tokenizer = make_tokenizer(build_vocab(TEXTS), tmp_path)
    by_words = {whole: MaskedBatches([text], tokenizer, _options(whole_words=whole)).words for whole in (True, False)}
    assert by_words == {True: [words], False: [list(range(7))]}  # the batches' words: jieba's, or a token each


def test_vocab_from_the_text():
    vocab = build_vocab(["信用卡 abc", "信用 ab"], min_count=2)
    assert vocab[:5] == SPECIALS and {"信", "用", "a", "##b"} <= set(vocab) and "卡" not in vocab and "##c" not in vocab


@pytest.mark.parametrize("pairs", [False, True])
def test_interrupted_and_resumed_equals_uninterrupted(tmp_path, monkeypatch, pairs):
    def options(**changes):  # with or without sentence pairs (their partners come from the saved RNG too)
        return _options(**({"pairs": pairs} | changes))

    whole = pretrain(TEXTS, tmp_path / "whole", options())
    export = pretrain_module.write_bert_folder

    def killed_after_first_save(*args):
        monkeypatch.setattr(pretrain_module, "write_bert_folder", export)
        raise KeyboardInterrupt

    monkeypatch.setattr(pretrain_module, "write_bert_folder", killed_after_first_save)
    with pytest.raises(KeyboardInterrupt):
        pretrain(TEXTS, tmp_path / "resumed", options())
    with pytest.raises(ConfigError, match="--resume"):
        pretrain(TEXTS, tmp_path / "resumed", options())
    with pytest.raises(ConfigError, match="changed options"):
        pretrain(TEXTS, tmp_path / "resumed", options(lr=0.1), resume=True)
    resumed = pretrain(TEXTS, tmp_path / "resumed", options(), resume=True)
    a, b = load_file(tmp_path / "whole" / "model.safetensors"), load_file(tmp_path / "resumed" / "model.safetensors")
    assert a.keys() == b.keys() and [k for k in a if not torch.equal(a[k], b[k])] == []
    speed = "tokens_per_s"
    assert {**resumed, speed: 0} == {**whole, speed: 0} and whole["step"] == 6 and {"loss", "accuracy", "tokens"} <= set(whole["held_out"])
    log = [json.loads(line) for line in (tmp_path / "resumed" / "pretrain.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6]


class _Killed(BaseException):
    """The process dies here (as under SIGKILL: nothing after this point runs)."""


@pytest.mark.parametrize("fault", [1, 2, 3, 4, 5])
def test_a_kill_anywhere_in_a_state_save_resumes_bit_identical(tmp_path, monkeypatch, fault):
    """Kill the run at the 1st..4th file replacement of step 3's state (the weights, the trainer tensors,
    trainer.json, the commit) or at the first of the BERT folder written after it: --resume reaches the weights,
    the last record and the log of an uninterrupted run."""
    import os

    from pipeline.training.state import StateStore

    whole = pretrain(TEXTS, tmp_path / "whole", _options())
    real_save, real_replace, calls = StateStore.save, os.replace, []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == fault:
            raise _Killed
        return real_replace(src, dst)

    def save(store, number, write_model, trainer):
        monkeypatch.setattr(os, "replace", replace)  # from here on, the BERT folder's files included
        real_save(store, number, write_model, trainer)

    monkeypatch.setattr(StateStore, "save", save)
    with pytest.raises(_Killed):
        pretrain(TEXTS, tmp_path / "cut", _options())
    monkeypatch.setattr(os, "replace", real_replace)
    monkeypatch.setattr(StateStore, "save", real_save)
    assert (tmp_path / "cut" / "state" / "current.json").is_file() == (fault == 5)
    resumed = pretrain(TEXTS, tmp_path / "cut", _options(), resume=True)
    a, b = load_file(tmp_path / "whole" / "model.safetensors"), load_file(tmp_path / "cut" / "model.safetensors")
    assert a.keys() == b.keys() and [k for k in a if not torch.equal(a[k], b[k])] == []
    assert {**resumed, "tokens_per_s": 0} == {**whole, "tokens_per_s": 0}
    log = [json.loads(line) for line in (tmp_path / "cut" / "pretrain.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6]
    assert sorted(p.name for p in (tmp_path / "cut" / "state").iterdir()) == ["current.json", "step-0000006"]


def test_output_is_a_bert_folder_for_kwbert(tmp_path):
    from pipeline.rerank.bert import load_bert
    from pipeline.rerank.models.kwbert import KeywordBERT, KeywordBERTConfig
    from pipeline.rerank.pairs import Pair

    pretrain(TEXTS, tmp_path / "bert", _options(steps=2, save_every=2))
    bert, tokenizer = load_bert(str(tmp_path / "bert"))
    assert bert.config.num_hidden_layers == 1 and tokenizer.tokenize("信用卡") == ["信", "用", "卡"]
    model = KeywordBERT(KeywordBERTConfig(bert=str(tmp_path / "bert"), max_length=32)).eval()
    batch = model.prepare([Pair("a", "b", "信用卡怎么还款", "贷款利率怎么算")])
    assert model.score(model(**batch.tensors)).shape == (1,)


def test_noisy_copy_keeps_whole_words_in_order_but_for_drops_and_neighbour_swaps():
    from pipeline.training.mlm_examples import noisy_copy

    words = [0, 0, 1, 2, 2, 3]
    assert noisy_copy(words, torch.Generator().manual_seed(0), drop=0, swap=0) == [0, 1, 2, 3, 4, 5]
    assert noisy_copy(words, torch.Generator().manual_seed(0), drop=1, swap=0) == [0, 1]
    assert noisy_copy(words, torch.Generator().manual_seed(0), drop=0, swap=1) == [2, 3, 4, 5, 0, 1]  # carried on
    for seed in range(20):
        order = noisy_copy(words, torch.Generator().manual_seed(seed))
        kept = {words[p] for p in order}
        assert order and sorted(order) == [p for p, w in enumerate(words) if w in kept]  # whole words, once each
        assert all(order[i + 1] == order[i] + 1 for i in range(len(order) - 1) if words[order[i]] == words[order[i + 1]])


def test_pair_batches_pair_a_text_with_its_copy_or_another_text(tmp_path):
    from pipeline.training.mlm import make_tokenizer
    from pipeline.training.mlm_examples import MaskedBatches

    options = _options(pairs=True, max_length=32, mask_rate=0.0001)  # one token masked a side
    tokenizer = make_tokenizer(build_vocab(TEXTS), tmp_path)
    batches = MaskedBatches(TEXTS, tokenizer, options)
    batch = batches.batch(list(range(len(TEXTS))), torch.Generator().manual_seed(0))
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    assert 0 < int(batch["pair_labels"].sum()) < len(TEXTS)
    for row, (ids, types, mask, copy) in enumerate(zip(batch["input_ids"], batch["token_type_ids"],
                                                       batch["attention_mask"], batch["pair_labels"])):
        ids, types = ids[mask.bool()].tolist(), types[mask.bool()].tolist()
        first_sep = ids.index(sep)
        assert ids[0] == cls and ids[-1] == sep and types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
        labels = batch["labels"][row][mask.bool()].tolist()
        a = [l if l != -100 else i for i, l in zip(ids[1:first_sep], labels[1:first_sep])]
        b = [l if l != -100 else i for i, l in zip(ids[first_sep + 1:-1], labels[first_sep + 1:-1])]
        assert a == batches.ids[row] and 1 <= sum(l != -100 for l in labels) <= 2
        if copy:
            assert set(b) <= set(a)
        else:
            assert b in [batches.ids[i] for i in range(len(TEXTS))]


def test_pair_pretraining_logs_its_head_and_gives_a_bert_folder(tmp_path):
    from pipeline.rerank.bert import load_bert

    record = pretrain(TEXTS, tmp_path / "pairs", _options(pairs=True, steps=4, save_every=2))
    assert 0 <= record["pair_accuracy"] <= 1 and 0 <= record["held_out"]["pair_accuracy"] <= 1
    bert, _ = load_bert(str(tmp_path / "pairs"))
    assert bert.config.num_hidden_layers == 1 and bert.config.type_vocab_size == 2
    with pytest.raises(ConfigError, match="changed options"):
        pretrain(TEXTS, tmp_path / "pairs", _options(steps=4, save_every=2), resume=True)


def test_the_device_is_how_it_runs_not_what_it_trains(tmp_path):
    """A run saved on one device resumes on another (the recorded options leave the device out, as the threads); a
    CUDA device asked for where torch sees none is a ConfigError, before anything is written."""
    pretrain(TEXTS, tmp_path / "bert", _options(steps=6, device="cpu"), max_minutes=0)  # stops after its first step
    record = pretrain(TEXTS, tmp_path / "bert", _options(steps=6, device="auto"), resume=True)
    assert record["step"] == 6
    assert "device" not in json.loads((tmp_path / "bert" / "pretrain.json").read_text())["options"]
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="CUDA"):
            pretrain(TEXTS, tmp_path / "elsewhere", _options(device="cuda"))


def test_the_pretraining_recipe_names_how_a_finished_run_made_its_folder(tmp_path):
    """bert_recipe= (pipeline/rerank/integrity.py `pretraining_recipe`): the sha256 of pretrain.json -- options, corpus,
    vocabulary, what another CPU re-creates -- once the run saved its last step and while the folder holds those
    tensors; a run stopped early or a folder whose weights were replaced has none, and says why."""
    from pipeline.rerank.bert import pinned_bert_folder
    from pipeline.rerank.integrity import pretraining_recipe
    from pipeline.rerank.models.kwbert import KeywordBERT, KeywordBERTConfig

    folder = tmp_path / "bert"
    pretrain(TEXTS, folder, _options(steps=4, save_every=2), max_minutes=0)          # stopped after step 1 (saved)
    recipe, why = pretraining_recipe(folder)
    assert recipe is None and "saved step 1 of 4" in why
    pretrain(TEXTS, folder, _options(steps=4, save_every=2), resume=True)
    recipe, why = pretraining_recipe(folder)
    settings = json.loads((folder / "pretrain.json").read_text(encoding="utf-8"))
    assert why == "" and recipe == hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()
    other, _ = pretraining_recipe(_finished(tmp_path / "other", steps=5))               # one more step: another
    assert other not in (None, recipe)
    assert KeywordBERT(KeywordBERTConfig(bert=str(folder), bert_recipe=recipe)).bert.config.num_hidden_layers == 1
    with pytest.raises(ConfigError, match=f"its pretraining recipe is {other}, but bert_recipe={recipe}"):
        pinned_bert_folder(str(tmp_path / "other"), recipe=recipe)
    shutil.copy(tmp_path / "other" / "model.safetensors", folder / "model.safetensors")  # other weights, same record
    with pytest.raises(ConfigError, match="not the tensors its pretraining saved last"):
        pinned_bert_folder(str(folder), recipe=recipe)
    with pytest.raises(ConfigError, match="no finished `irpipe pretrain-mlm` run recorded there"):
        pinned_bert_folder(str(save_tiny_bert(tmp_path / "plain", layers=1)), recipe=recipe)


def _finished(folder, steps: int):
    pretrain(TEXTS, folder, _options(steps=steps, save_every=2))
    return folder


def test_pretrain_mlm_prints_the_recipe_an_experiment_file_pins(tmp_path, capsys):
    from pipeline.cli import main
    from pipeline.rerank.integrity import pretraining_recipe

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    out = tmp_path / "bert"
    assert main(["-q", "pretrain-mlm", "--corpus", str(corpus), "--output", str(out), "--layers", "1", "--hidden", "32",
                 "--batch-size", "4", "--steps", "2", "--held-out", "0.1", "--threads", "1", "--device", "cpu"]) == 0
    recipe, _ = pretraining_recipe(out)
    assert f"{out}: bert_recipe={recipe}" in capsys.readouterr().out

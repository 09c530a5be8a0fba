"""The BERT backbone (pipeline/rerank/bert.py): input layout and truncation, pooling, and the BERT folder a new
BERT is written to. A tokenizer over a ten-piece vocabulary is enough for the layouts."""
from __future__ import annotations

import shutil

import pytest
import torch

from pipeline.rerank.bert import (basic_tokens, fit_pair, load_bert, mean_pool, new_bert_config, new_tokenizer,
                                  pair_inputs, single_inputs, write_bert_folder)

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "信", "用", "##b"]
PAD, UNK, CLS, SEP, A, B, C = 0, 1, 2, 3, 5, 6, 7


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return new_tokenizer(VOCAB, tmp_path_factory.mktemp("vocab"))


def test_mean_pool_averages_the_weighted_positions():
    states = torch.arange(12, dtype=torch.float).view(1, 4, 3)  # (B=1, L=4, H=3)
    side = torch.tensor([[0, 1, 1, 2]])
    assert mean_pool(states, side == 1).tolist() == [[(3 + 6) / 2, (4 + 7) / 2, (5 + 8) / 2]]
    assert mean_pool(states, side == 2).tolist() == [[9, 10, 11]]
    assert mean_pool(states, side == 3).tolist() == [[0, 0, 0]]  # nothing to average: zeros, not NaN


def test_fit_pair_query_first_and_longest_first():
    room = 20 - 3                                                   # [CLS] A [SEP] B [SEP]
    assert fit_pair(3, 4, 20) == fit_pair(3, 4, 20, max_a=8) == (3, 4)
    assert fit_pair(10, 50, 20, max_a=4) == (4, room - 4)          # A to max_a, B the rest
    assert fit_pair(30, 50, 20, max_a=64) == (room - 1, 1)         # B keeps one piece
    assert fit_pair(10, 50, 20) == (room - room // 2, room // 2)   # longest first ends level, A one longer
    assert fit_pair(2, 50, 20) == (2, room - 2)                    # the short side is never cut


def test_pair_layout_segments_aligned_values_and_padding(tokenizer):
    a, b = [[A, B], [A]], [[C, C, C, C], [B]]
    tensors, cut = pair_inputs(tokenizer, a, b, 7, flag=([[1, 0], [1]], [[1, 1, 1, 0], [1]]))
    assert list(tensors) == ["input_ids", "token_type_ids", "flag", "attention_mask"] and cut == 1
    assert tensors["input_ids"].tolist() == [[CLS, A, B, SEP, C, C, SEP],       # 2 + 4 pieces cut to 2 + 2
                                             [CLS, A, SEP, B, SEP, PAD, PAD]]
    assert tensors["token_type_ids"].tolist() == [[0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 0, 0]]
    assert tensors["flag"].tolist() == [[0, 1, 0, 0, 1, 1, 0], [0, 1, 0, 1, 0, 0, 0]]
    assert tensors["attention_mask"].tolist() == [[1] * 7, [1] * 5 + [0] * 2]


def test_single_inputs_cut_and_empty_texts(tokenizer):
    ids, mask, cut = single_inputs(tokenizer, ["a b c a b", "b", ""], 4)
    assert ids.tolist() == [[CLS, A, B, SEP], [CLS, B, SEP, PAD], [CLS, SEP, PAD, PAD]] and cut == 1
    assert mask.sum(1).tolist() == [4, 3, 2]
    ids, _, _ = single_inputs(tokenizer, ["", "c"], 4, unk_if_empty=True)
    assert ids.tolist() == [[CLS, UNK, SEP], [CLS, C, SEP]]


def test_basic_tokens_are_what_the_tokenizer_splits(tokenizer):
    assert list(basic_tokens(["Äb, 信用c"])) == [["ab", ",", "信", "用", "c"]]  # accents and case off, CJK apart
    assert tokenizer.tokenize("Äb 信用") == ["a", "##b", "信", "用"]


def test_new_bert_config_heads_and_written_folder_loads(tmp_path, tokenizer):
    from transformers import BertModel

    assert new_bert_config(10, 256, 2, 128).num_attention_heads == 256 // 64
    assert new_bert_config(10, 96, 2, 128).num_attention_heads == 96 // 32
    config = new_bert_config(len(VOCAB), 32, 1, 16, heads=2, intermediate=64)
    assert (config.num_attention_heads, config.intermediate_size, config.max_position_embeddings) == (2, 64, 16)
    torch.manual_seed(0)
    bert = BertModel(config)
    folder = write_bert_folder(bert, tokenizer, tmp_path / "bert")
    assert not (folder / ".export").exists() and (folder / "model.safetensors").is_file()
    loaded, loaded_tokenizer = load_bert(str(folder))
    assert all(torch.equal(v, loaded.state_dict()[k]) for k, v in bert.state_dict().items() if k in loaded.state_dict())
    assert loaded_tokenizer.convert_tokens_to_ids(["a", "信"]) == [A, 8]


def test_the_default_bert_comes_from_the_mirror_where_its_package_is_not_installed(tmp_path, monkeypatch):
    """A bare machine (a GPU machine: torch, transformers, sentence-transformers only) finds all-MiniLM-L6-v2 at
    $IRPIPE_MIRROR/models/all-MiniLM-L6-v2; without it the error says what to place where."""
    import pipeline.rerank.bert as bert_module
    from pipeline.errors import MissingResourceError

    installed = bert_module.bert_folder("all-MiniLM-L6-v2")
    monkeypatch.setattr(bert_module, "find_spec", lambda name: None)                  # the package is not there
    monkeypatch.setenv("IRPIPE_MIRROR", str(tmp_path))
    with pytest.raises(MissingResourceError, match=f"place its model folder at .IRPIPE_MIRROR/models/all-MiniLM-L6-v2 "
                                                   f"\\(IRPIPE_MIRROR is {tmp_path}\\)"):
        bert_module.bert_folder("all-MiniLM-L6-v2")
    shutil.copytree(installed, tmp_path / "models" / "all-MiniLM-L6-v2")
    assert bert_module.bert_folder("all-MiniLM-L6-v2") == tmp_path / "models" / "all-MiniLM-L6-v2"
    assert bert_module.bert_folder("") == tmp_path / "models" / "all-MiniLM-L6-v2"

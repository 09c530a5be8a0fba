"""kwbert (keyword-attentive BERT): on a hand-built Chinese pair, the keyword attention mask is exactly the paper's
(both directions, the no-keyword fallback), a non-keyword token of B cannot reach A's keyword-branch output while a
keyword token of B does, the keyword layer starts as a copy of the last BERT layer, and the two fusions' shapes."""
from __future__ import annotations

import pytest
import torch

from pipeline.rerank.model import Batch
from pipeline.rerank.models.kwbert import KeywordBERT, KeywordBERTConfig, keyword_attention_mask
from pipeline.rerank.pairs import Pair
from pipeline.retrieve.keyword_dictionary import Keyword, KeywordDictionary
from support import save_tiny_bert


@pytest.fixture(scope="module")
def dictionary(tmp_path_factory):
    """信用卡 and 贷款 are keywords (bank domain); nothing else is."""
    entries = [Keyword("信用卡", "bank", 3.0, 5, 10, 0, 10), Keyword("贷款", "bank", 2.0, 4, 10, 0, 10)]
    return KeywordDictionary(entries, "zh").save(tmp_path_factory.mktemp("kw") / "bank.tsv")


@pytest.fixture(scope="module")
def one_layer_bert(tmp_path_factory):
    """A 1-layer random BERT: H^(N-1) is the embedding output, one row per token, so the branch isolation of the
    keyword layer shows through the whole model."""
    return save_tiny_bert(tmp_path_factory.mktemp("one-layer-bert"), layers=1, positions=128)


def _model(bert, dictionary, **config) -> KeywordBERT:
    torch.manual_seed(0)
    return KeywordBERT(KeywordBERTConfig(bert=str(bert), dict=str(dictionary), **config)).eval()


@pytest.mark.slow
def test_keyword_pieces_and_exact_mask_with_fallback(tiny_bert, dictionary):
    model = _model(tiny_bert, dictionary)
    pairs = [Pair("a", "b", "信用卡怎么办", "我要贷款"),     # keywords on both sides
             Pair("c", "d", "今天天气", "贷款利率")]          # A has none: B's rows attend to all of A
    batch = model.prepare(pairs)
    side, keyword = batch.tensors["side"], batch.tensors["keyword"]
    # [CLS] 信 用 卡 怎 么 办 [SEP] 我 要 贷 款 [SEP]: one piece per character
    assert side[0].tolist() == [0, 1, 1, 1, 1, 1, 1, 0, 2, 2, 2, 2, 0]
    assert keyword[0].tolist() == [0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0]
    # [CLS] 今 天 天 气 [SEP] 贷 款 利 率 [SEP] + 2 pads
    assert side[1].tolist() == [0, 1, 1, 1, 1, 0, 2, 2, 2, 2, 0, 0, 0]
    assert keyword[1].tolist() == [0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0]
    mask = keyword_attention_mask(side, keyword)
    expected = torch.zeros(2, 13, 13, dtype=torch.bool)
    for i in range(1, 7):                  # A -> keywords of B
        expected[0, i, [10, 11]] = True
    for i in range(8, 12):                 # B -> keywords of A
        expected[0, i, [1, 2, 3]] = True
    for i in range(1, 5):                  # A -> keywords of B
        expected[1, i, [6, 7]] = True
    for i in range(6, 10):                 # B -> all of A (A has no keyword)
        expected[1, i, 1:5] = True
    for row, others in ((0, [0, 7, 12]), (1, [0, 5, 10, 11, 12])):
        expected[row, others, others] = True  # [CLS], [SEP], padding: themselves only
    assert torch.equal(mask, expected)


def test_topic_keywords_replace_the_dictionary_for_a(tiny_bert, dictionary):
    model = _model(tiny_bert, dictionary)
    batch = model.prepare([Pair("a", "b", "信用卡怎么办", "我要贷款", query_fields={"keywords": ["怎么"]})])
    assert batch.tensors["keyword"][0, :8].tolist() == [0, 0, 0, 0, 1, 1, 0, 0]


def test_longest_first_truncation(tiny_bert, dictionary):
    model = _model(tiny_bert, dictionary, max_length=9)  # 6 pieces for A and B together
    batch = model.prepare([Pair("a", "b", "信用卡怎么办理", "我要贷款")])
    assert batch.tensors["side"][0].tolist() == [0, 1, 1, 1, 0, 2, 2, 2, 0] and batch.truncated == 1


def test_non_keyword_tokens_of_b_do_not_reach_a_keyword_branch(one_layer_bert, dictionary):
    model = _model(one_layer_bert, dictionary)
    texts = {"base": "我要贷款", "non-keyword changed": "你要贷款", "keyword changed": "我要贷钱"}
    outputs = {}
    for name, text in texts.items():
        tensors = model.prepare([Pair("a", "b", "信用卡怎么办", text)]).tensors
        with torch.no_grad():
            hidden = model.bert(**{k: tensors[k] for k in ("input_ids", "token_type_ids", "attention_mask")},
                                output_hidden_states=True).hidden_states[-2]
            outputs[name] = model.keyword_branch(hidden, tensors["side"], tensors["keyword"])[0]  # (L, H)
    a_rows = slice(1, 7)
    assert torch.allclose(outputs["non-keyword changed"][a_rows], outputs["base"][a_rows], atol=1e-6)
    assert not torch.allclose(outputs["non-keyword changed"][8], outputs["base"][8], atol=1e-4)  # B's own row moved
    assert not torch.allclose(outputs["keyword changed"][a_rows], outputs["base"][a_rows], atol=1e-4)


def test_keyword_layer_starts_as_a_copy_of_the_last_layer(tiny_bert, dictionary):
    model = _model(tiny_bert, dictionary)
    last, copy = model.bert.encoder.layer[-1].state_dict(), model.keyword_layer.state_dict()
    assert last.keys() == copy.keys() and all(torch.equal(last[k], copy[k]) for k in last)
    assert model.keyword_layer.attention.self.query.weight is not model.bert.encoder.layer[-1].attention.self.query.weight


@pytest.mark.parametrize("fusion, width", [("paper", 5 * 32), ("code", 2 * 32)])
def test_fusions_score_and_loss(tiny_bert, dictionary, fusion, width):
    model = _model(tiny_bert, dictionary, fusion=fusion)
    assert model.classifier.in_features == width
    batch = model.prepare([Pair("a", "b", "信用卡怎么办", "我要贷款", label=1.0), Pair("c", "d", "今天天气", "贷款利率")])
    output = model(**batch.tensors)
    assert output.shape == (2, 2) and model.score(output).shape == (2,)
    loss = model.loss(output, Batch({}, labels=torch.tensor([1.0, 0.0])))
    loss.total.backward()
    assert model.keyword_layer.attention.self.query.weight.grad.abs().sum() > 0

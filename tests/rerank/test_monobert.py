"""monobert: "[CLS] q [SEP] d [SEP]" inputs as the paper builds them, padding that changes no score (with the real
all-MiniLM-L6-v2 weights), truncation counted, and the two scores and the CE loss as defined."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pipeline.errors import ConfigError, MissingResourceError
from pipeline.rerank.bert import DEFAULT_BERT, bert_folder
from pipeline.rerank.config import make_config
from pipeline.rerank.model import Batch
from pipeline.rerank.models.monobert import MonoBERT, MonoBERTConfig
from support import make_pairs


@pytest.fixture(scope="module")
def minilm() -> MonoBERT:
    torch.manual_seed(0)  # the classifier head is freshly initialised
    return MonoBERT(MonoBERTConfig()).eval()


def test_inputs_are_cls_query_sep_doc_sep(tiny_bert):
    model = MonoBERT(MonoBERTConfig(bert=str(tiny_bert), max_length=12, max_query_length=3))
    tok = model.tokenizer
    batch = model.prepare(make_pairs(["red green blue white", "sky"], ["one two three four five six seven eight nine", "sea"]))
    ids, segments, mask = (batch.tensors[k] for k in ("input_ids", "token_type_ids", "attention_mask"))
    q = tok("red green blue", add_special_tokens=False)["input_ids"]
    d = tok("one two three four five six", add_special_tokens=False)["input_ids"]  # 12 - 3 specials - 3 query pieces
    assert ids[0].tolist() == [tok.cls_token_id, *q, tok.sep_token_id, *d, tok.sep_token_id]
    assert segments[0].tolist() == [0] * 5 + [1] * 7 and mask[0].tolist() == [1] * 12
    short = [tok.cls_token_id, *tok("sky", add_special_tokens=False)["input_ids"], tok.sep_token_id,
             *tok("sea", add_special_tokens=False)["input_ids"], tok.sep_token_id]
    assert ids[1].tolist() == short + [tok.pad_token_id] * (12 - len(short)) and mask[1].sum() == len(short)
    assert batch.truncated == 1 and batch.size == 2


def test_padding_does_not_change_a_score(minilm):
    query, doc = "what colour is the sky", "on a clear day the sky is blue"
    alone = minilm.prepare(make_pairs([query], [doc]))
    padded = minilm.prepare(make_pairs([query, "another question"], [doc, "a much longer passage " * 20]))
    assert padded.tensors["input_ids"].shape[1] > alone.tensors["input_ids"].shape[1]
    with torch.inference_mode():
        score_alone = minilm.score(minilm(**alone.tensors))[0]
        score_padded = minilm.score(minilm(**padded.tensors))[0]
    assert score_padded.item() == pytest.approx(score_alone.item(), abs=1e-5)


def test_scores_and_loss_are_as_defined(tiny_bert):
    logits = torch.tensor([[0.5, 2.0], [1.0, -1.0]])
    model = MonoBERT(MonoBERTConfig(bert=str(tiny_bert)))
    assert model.score(logits).tolist() == pytest.approx([2.0 - 0.5, -1.0 - 1.0])
    model.config.score = "prob"
    assert model.score(logits).tolist() == pytest.approx([1 / (1 + torch.e ** -1.5), 1 / (1 + torch.e ** 2.0)])
    batch = Batch({}, labels=torch.tensor([1.0, 0.0]))
    loss = model.loss(logits, batch)
    assert loss.total.item() == pytest.approx(F.cross_entropy(logits, torch.tensor([1, 0])).item())
    assert loss.parts == {"ce": loss.total}


def test_cls_pooling_has_no_pooler(tiny_bert):
    model = MonoBERT(MonoBERTConfig(bert=str(tiny_bert), pooling="cls"))
    assert not any(name.startswith("bert.pooler") for name in model.state_dict())


def test_config_and_folder_errors(tmp_path):
    assert (bert_folder(DEFAULT_BERT) / "config.json").is_file()
    with pytest.raises(MissingResourceError, match="not a BERT checkpoint folder"):
        bert_folder(str(tmp_path))
    with pytest.raises(ConfigError, match="monobert: pooling='mean'; choose one of pooler, cls") as caught:
        make_config(MonoBERTConfig, {"pooling": "mean"})
    assert caught.value.field == "pooling"
    with pytest.raises(ConfigError, match="max_length=4; expected an integer >= 5"):
        make_config(MonoBERTConfig, {"max_length": 4})


@pytest.mark.slow
def test_bf16_scores_of_a_dl19_query_do_not_tie(minilm, shared_data):
    """The score head runs in fp32 under bf16 autocast (layers.fp32_head): logits read in bf16 keep 8 significant
    bits, so 100 candidates' scores could tie; with the head in fp32 each candidate keeps a score of its own."""
    from pipeline.data.registry import get_dataset
    from pipeline.rerank.pairs import pairs_of
    from pipeline.rerank.scoring import predict

    dataset = get_dataset("dl19-passage")
    run = dataset.run()
    pairs = [p for p in pairs_of(dataset.topics(), run, run.texts) if p.qid == next(iter(run.ranking))][:100]
    scores = predict(minilm, pairs, amp="bf16").scores
    exact = predict(minilm, pairs, amp="none").scores
    assert len(set(scores)) == len(set(exact)) == 100
    assert max(abs(a - b) for a, b in zip(scores, exact)) < 0.05

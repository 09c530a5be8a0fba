"""biencoder (docs/models.md §0): cosine of mean-pooled embeddings; padding changes no score; the stored-encoding path
scores as the forward pass does; zero-shot as a stage with no checkpoint; the in-batch loss."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.errors import ConfigError
from pipeline.rerank.model import Batch
from pipeline.rerank.models.biencoder import BiEncoder, BiEncoderConfig
from pipeline.spec import SpecError, parse
from support import make_pairs

QUERIES = ["what colour is the sky", "who wrote the iron lady", "what colour is the sky"]
DOCS = ["on a clear day the sky is blue", "hugo young wrote a biography of margaret thatcher", "grass is green"]


@pytest.fixture(scope="module")
def minilm() -> BiEncoder:
    return BiEncoder(BiEncoderConfig()).eval()


def _forward_scores(model, queries, docs) -> torch.Tensor:
    with torch.inference_mode():
        return model.score(model(**model.prepare(make_pairs(queries, docs)).tensors))


def test_score_is_the_cosine_of_mean_pooled_embeddings(minilm):
    tok = minilm.tokenizer
    with torch.inference_mode():
        def mean_pooled(text):
            ids = torch.tensor([tok(text)["input_ids"]])  # "[CLS] text [SEP]", no padding
            return minilm.bert(input_ids=ids).last_hidden_state[0].mean(0)
        expected = [F.cosine_similarity(mean_pooled(q), mean_pooled(d), dim=0).item() for q, d in zip(QUERIES, DOCS)]
    assert _forward_scores(minilm, QUERIES, DOCS).tolist() == pytest.approx(expected, abs=1e-5)


def test_padding_does_not_change_a_score(minilm):
    alone = _forward_scores(minilm, QUERIES[:1], DOCS[:1])
    padded = _forward_scores(minilm, [QUERIES[0], "a much longer question " * 10], [DOCS[0], "a passage " * 60])
    assert padded[0].item() == pytest.approx(alone[0].item(), abs=1e-5)


def test_stored_encoding_path_scores_as_the_forward_pass(minilm):
    forward = _forward_scores(minilm, QUERIES, DOCS)
    with torch.inference_mode():
        documents = minilm.encode_documents(DOCS)
        queries = minilm.encode_queries(QUERIES)
        late = [minilm.score_encoded(q, [d]).item() for q, d in zip(queries, documents)]
    assert all(d.shape == (1, 384) for d in documents) and late == pytest.approx(forward.tolist(), abs=1e-5)


def test_zero_shot_stage_needs_no_checkpoint(tiny_bert):
    stage = parse(f"biencoder(bert={tiny_bert})")
    topics = Topics({"q": "what colour is the sky"})
    run = Run({"q": [("a", 2.0), ("b", 1.0)]}, {"a": "grass is green", "b": "the sky is blue"})
    before = repr(stage)
    output = stage(topics, run)
    assert {d for d, _ in output["q"]} == {"a", "b"} and repr(stage) == before
    with pytest.raises(SpecError, match="monobert needs a checkpoint folder"):
        parse("monobert()")
    with pytest.raises(SpecError, match="scores query and document together"):
        parse("monobert(ckpt=x, store=y)")


def test_in_batch_loss_uses_the_positives_only(tiny_bert):
    model = BiEncoder(BiEncoderConfig(bert=str(tiny_bert)))
    pairs = make_pairs(QUERIES, DOCS)
    batch = model.prepare(pairs)
    batch.labels, batch.groups = torch.tensor([1.0, 1.0, 0.0]), torch.tensor([0, 1, 2])
    output = model(**batch.tensors)
    loss = model.loss(output, batch)
    cos = F.normalize(output[:2, 0], dim=-1) @ F.normalize(output[:2, 1], dim=-1).T
    assert loss.total.item() == pytest.approx(F.cross_entropy(20 * cos, torch.tensor([0, 1])).item(), abs=1e-5)
    nothing = model.loss(output, Batch({}, pairs=pairs, labels=torch.zeros(3)))
    assert nothing.total.item() == 0.0 and nothing.parts.keys() == {"in_batch_ce"}


def test_config_errors_name_the_field():
    from pipeline.rerank.config import make_config

    with pytest.raises(ConfigError, match="biencoder: max_length=2; expected an integer >= 3"):
        make_config(BiEncoderConfig, {"max_length": 2})

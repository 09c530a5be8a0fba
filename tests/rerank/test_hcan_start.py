"""HCAN's residual start (`start=rm0`): the untrained model is exactly the parameter-free level-0 RM score -- each
query word's best cosine against the candidate's words, weighted by its IDF, averaged -- and training moves it."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pipeline.errors import ConfigError
from pipeline.rerank.models.hcan import HCAN, HCANConfig
from pipeline.training.optim import GradientStepper, make_optimizer
from support import make_pairs

QUERIES = ["who wrote the iron lady ?", "what is the capital of france ?", "who wrote the iron lady ?",
           "how tall is the eiffel tower in paris ?", "what is the capital of france ?"]
DOCS = ["hugo young wrote the iron lady , a biography of margaret thatcher .", "paris is the capital of france",
        "the iron lady is a film", "the eiffel tower is 324 metres tall", "a tower in paris"]
START = dict(embeddings="random", embedding_dim=8, filters=6, sm_hidden=10, max_query_length=12, max_doc_length=16,
             dropout=0.0, rm_softmax="raw", rm_similarity="cosine", start="rm0")


def build(**overrides) -> HCAN:
    torch.manual_seed(0)
    return HCAN.from_training_data(HCANConfig(**(START | overrides)), QUERIES, DOCS).eval()


def rm0_by_hand(model: HCAN, query: str, doc: str) -> float:
    """sum_i idf_i max_j cos(e_q,i, e_c,j) / sum_i idf_i over the query's words, from the model's own table."""
    t = model.prepare(make_pairs([query], [doc])).tensors
    q, c = t["query_ids"][0], t["doc_ids"][0]
    with torch.no_grad():
        eq, ec = F.normalize(model.embedding(q[q != 0]), dim=1), F.normalize(model.embedding(c[c != 0]), dim=1)
    idf = t["query_idf"][0, 0, :len(eq)]
    return float((idf * (eq @ ec.T).max(1).values).sum() / idf.sum())


def test_the_untrained_model_scores_sigmoid_of_rm0():
    """P(relevant) = sigmoid(1 x rm0 + 0): the MLP's correction is zero, so the ranking is rm0's."""
    model = build()
    with torch.inference_mode():
        scores = model.score(model(**model.prepare(make_pairs(QUERIES, DOCS)).tensors))
    expected = torch.sigmoid(torch.tensor([rm0_by_hand(model, q, d) for q, d in zip(QUERIES, DOCS)],
                                          dtype=torch.float64))
    torch.testing.assert_close(scores, expected, rtol=0, atol=1e-6)
    assert len(set(scores.tolist())) == len(DOCS)


def test_appending_padding_does_not_change_the_start():
    model = build()
    pairs = make_pairs(QUERIES, DOCS)
    with torch.inference_mode():
        scores = model.score(model(**model.prepare(pairs).tensors))
        alone = torch.cat([model.score(model(**model.prepare([pair]).tensors)) for pair in pairs])
    torch.testing.assert_close(alone, scores, rtol=0, atol=1e-6)


def test_the_random_start_is_not_rm0():
    """Without start=rm0 the untrained MLP's score is not that feature (the default is unchanged)."""
    model = build(start="random")
    with torch.inference_mode():
        scores = model.score(model(**model.prepare(make_pairs(QUERIES, DOCS)).tensors))
    expected = torch.sigmoid(torch.tensor([rm0_by_hand(model, q, d) for q, d in zip(QUERIES, DOCS)],
                                          dtype=torch.float64))
    assert not torch.allclose(scores, expected, atol=1e-3)


def test_a_step_moves_the_correction_and_the_weight():
    """One SGD step on the NLL changes w and the MLP's last layer away from their start."""
    model = build().train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batch = model.prepare(make_pairs(QUERIES, DOCS))
    batch.labels = torch.tensor([1, 1, 0, 1, 0])
    model.loss(model(**batch.tensors), batch).total.backward()
    optimizer.step()
    assert model.rm0_weight.item() != 1.0 and bool(model.classifier[-1].weight.abs().sum() > 0)


def test_start_rm0_needs_relevance_matching():
    with pytest.raises(ConfigError, match="start=rm0"):
        HCANConfig(**(START | {"sm_only": True})).check()


def test_the_listwise_loss_is_each_positives_softmax_over_its_questions_logits():
    """loss=listwise: questions as groups ("queries" sampling); each positive's cross-entropy against its own
    question's negatives on the logit z_1 - z_0, the other question's candidates left out."""
    model = build(loss="listwise")
    batch = model.prepare(make_pairs(QUERIES, DOCS))
    batch.labels, batch.groups = torch.tensor([1, 1, 0, 1, 0]), torch.tensor([0, 1, 0, 2, 1])
    with torch.inference_mode():
        output = model(**batch.tensors)
        loss = model.loss(output, batch)
    z = output[:, 1] - output[:, 0]
    expected = (torch.logaddexp(z[0], z[2]) - z[0] + torch.logaddexp(z[1], z[4]) - z[1]) / 2   # group 2: no negative
    assert model.batch_sampling() == "queries" and set(loss.parts) == {"listwise"}
    assert loss.total.item() == pytest.approx(expected.item(), rel=1e-6)


def test_start_lr_zero_keeps_w_and_trains_the_correction():
    """start_lr=0: w stays 1 (the start's feature at its own scale) and the MLP, zero at the start, learns."""
    model = build().train()
    optimizer = make_optimizer(model, "sgd", 0.1, 0.0, start=model.start_parameters(model.config), start_lr=0.0)
    batch = model.prepare(make_pairs(QUERIES, DOCS))
    batch.labels = torch.tensor([1, 1, 0, 1, 0])
    GradientStepper(model, optimizer).step(model.loss(model(**batch.tensors), batch).total)
    assert model.start_parameters(model.config) == ("rm0_weight",) and model.rm0_weight.item() == 1.0
    assert bool(model.classifier[-1].weight.abs().sum() > 0)

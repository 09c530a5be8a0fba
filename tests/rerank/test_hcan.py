"""HCAN (docs/models.md §1): masking (padding invariance), co-attention's transpose, IDF alignment, ablations,
assets."""
from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from pipeline.errors import ConfigError
from pipeline.rerank.model import Batch
from pipeline.rerank.models.hcan import HCAN, HCANConfig
from pipeline.rerank.models.hcan.network import CoAttention, relevance_matching
from pipeline.rerank.overlap import code_overlap_features, stopword_overlap_features
from pipeline.rerank.text import tokenize
from support import make_pairs

QUERIES = ["who wrote the iron lady ?", "what is the capital of france ?", "who wrote the iron lady ?",
           "how tall is the eiffel tower in paris ?"]
DOCS = ["hugo young wrote the iron lady , a biography of margaret thatcher .", "paris is the capital of france",
        "the iron lady is a film", "the eiffel tower is 324 metres tall"]
LABELS = torch.tensor([1, 1, 0, 1])


def tiny(**overrides) -> HCANConfig:
    fields = dict(embeddings="random", embedding_dim=8, filters=6, sm_hidden=10, max_query_length=12,
                  max_doc_length=16, dropout=0.0)
    return HCANConfig(**(fields | overrides))


def build(**overrides) -> HCAN:
    torch.manual_seed(0)
    return HCAN.from_training_data(tiny(**overrides), QUERIES, DOCS).eval()


def padded(tensors: dict, query: int, doc: int) -> dict:
    """The same batch with `query` / `doc` extra padding positions appended."""
    return tensors | {"query_ids": F.pad(tensors["query_ids"], (0, query)),
                      "doc_ids": F.pad(tensors["doc_ids"], (0, doc)), "query_idf": F.pad(tensors["query_idf"], (0, query))}


MODES = [dict(encoder=e, rm_softmax=s) for e in ("deep", "wide", "bilstm")
         for s in ("query", "context")] + [dict(external_features=True)] + [
    dict(rm_softmax=s, rm_similarity=sim) for s in ("padded", "raw") for sim in ("dot", "cosine")]


@pytest.mark.parametrize("options", MODES, ids=lambda o: "-".join(map(str, o.values())))
def test_appending_padding_does_not_change_a_score(options):
    model = build(**options)
    batch = model.prepare(make_pairs(QUERIES, DOCS))
    with torch.inference_mode():
        scores = model.score(model(**batch.tensors))
        more_padding = model.score(model(**padded(batch.tensors, 3, 7)))
        alone = torch.cat([model.score(model(**model.prepare(make_pairs([q], [d])).tensors)) for q, d in zip(QUERIES, DOCS)])
    torch.testing.assert_close(more_padding, scores, rtol=0, atol=1e-6)
    torch.testing.assert_close(alone, scores, rtol=0, atol=1e-6)  # each pair alone: no padding at all
    assert len(set(scores.tolist())) > 1


def test_coattention_uses_a_real_transpose():
    torch.manual_seed(1)
    B, n, m, f = 2, 3, 4, 5
    att = CoAttention(f).requires_grad_(False)
    uq, uc = torch.randn(B, n, f), torch.randn(B, m, f)
    qmask = torch.tensor([[True, True, True], [True, True, False]])
    cmask = torch.tensor([[True, True, True, True], [True, True, True, False]])
    uq, uc = uq * qmask[..., None], uc * cmask[..., None]
    h = att(uq, uc, qmask, cmask)                                           # (B, m, 4F)
    assert h.shape == (B, m, 4 * f)
    wq, wc, wb = att.w_q.weight[0], att.w_c.weight[0], att.w_b
    for b in range(B):
        nq, nc = int(qmask[b].sum()), int(cmask[b].sum())
        raw = torch.tensor([[float(uq[b, i] @ wq + uc[b, j] @ wc + uq[b, i] @ wb @ uc[b, j]) for j in range(nc)]
                            for i in range(nq)])                            # A_raw[i, j], real positions only
        a = torch.softmax(raw, 0)                                           # over the query axis, per column j
        uq_att = torch.stack([sum(a[i, j] * uq[b, i] for i in range(nq)) for j in range(nc)])  # Ũ_q[j] = Σ_i A_ij U_q[i]
        weights = torch.softmax(raw.max(0).values, 0)                      # softmax_m(max_n A_raw)
        uc_att = sum(weights[j] * uc[b, j] for j in range(nc))
        expected = torch.cat([uc[b, :nc], uq_att, uc[b, :nc] * uq_att, uc_att.expand(nc, f) * uq_att], 1)
        torch.testing.assert_close(h[b, :nc], expected, rtol=1e-5, atol=1e-6)
    # the authors' reshape of A (n x m) to (m x n) instead of transposing it gives something else
    full = torch.softmax(att.w_q(uq[:1]) + att.w_c(uc[:1]).transpose(1, 2) + uq[:1] @ wb @ uc[:1].transpose(1, 2), 1)
    assert not torch.allclose(full.reshape(1, m, n) @ uq[:1], h[:1, :, f:2 * f])


def test_relevance_matching_by_hand():
    c = tiny(max_query_length=4)
    uq = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]])               # 2 real query words + padding
    uc = torch.tensor([[[2.0, 0.0], [1.0, 1.0], [0.0, 0.0]]])               # 2 real doc words + padding
    qmask, cmask = torch.tensor([[True, True, False]]), torch.tensor([[True, True, False]])
    idf = torch.tensor([[0.5, 1.0, 0.0]])
    s = torch.tensor([[2.0, 1.0], [0.0, 1.0]])                             # S = U_q U_c^T on real positions
    by_query = torch.softmax(s, 0)                                          # per column, over the query words
    features = relevance_matching(uq, uc, qmask, cmask, idf, c)
    expected_max = by_query.max(1).values * torch.tensor([0.5, 1.0])
    expected_mean = by_query.mean(1) * torch.tensor([0.5, 1.0])
    torch.testing.assert_close(features[0], torch.cat([expected_max, torch.zeros(2), expected_mean, torch.zeros(2)]))
    by_context = relevance_matching(uq, uc, qmask, cmask, idf, dataclasses.replace(c, rm_softmax="context"))
    torch.testing.assert_close(by_context[0, :4], torch.cat([torch.softmax(s, 1).max(1).values * torch.tensor([0.5, 1.0]),
                                                             torch.zeros(2)]))


def test_padded_softmax_and_cosine_by_hand():
    """rm_softmax=padded: the query-axis softmax of a query padded to max_query_length with zero logits (the
    code's unmasked padding); rm_similarity=cosine with rm_softmax=raw: max cosine times IDF."""
    c = tiny(max_query_length=4, rm_softmax="padded")
    uq = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]])
    uc = torch.tensor([[[2.0, 0.0], [1.0, 1.0], [0.0, 0.0]]])
    qmask, cmask = torch.tensor([[True, True, False]]), torch.tensor([[True, True, False]])
    idf = torch.tensor([[0.5, 1.0, 0.0]])
    s = torch.tensor([[2.0, 1.0], [0.0, 1.0]])
    with_zero_rows = torch.softmax(torch.cat([s, torch.zeros(2, 2)]), 0)[:2]  # 4 query rows, 2 of them padding
    features = relevance_matching(uq, uc, qmask, cmask, idf, c)
    torch.testing.assert_close(features[0, :4], torch.cat([with_zero_rows.max(1).values * torch.tensor([0.5, 1.0]),
                                                           torch.zeros(2)]))  # the max half
    cosine = relevance_matching(uq, uc, qmask, cmask, idf, dataclasses.replace(c, rm_softmax="raw",
                                                                                rm_similarity="cosine"))
    torch.testing.assert_close(cosine[0, :4], torch.tensor([1.0 * 0.5, 2 ** -0.5, 0.0, 0.0]))


def test_prepare_aligns_idf_levels_with_query_positions():
    model = build()
    batch = model.prepare(make_pairs(["who wrote the iron lady ?", "capital of france"], DOCS[:2]))
    idf = batch.tensors["query_idf"]                                        # (B, N+1, n)
    assert idf.shape == (2, 5, 6)
    for i, query in enumerate(["who wrote the iron lady ?", "capital of france"]):
        words = tokenize(query)
        for level in range(5):
            expected = [model.idf.weight(" ".join(words[j:j + level + 1]), min(level + 1, len(words) - j))
                        for j in range(len(words))]
            assert idf[i, level, :len(words)].tolist() == pytest.approx(expected)
    assert (idf[1, :, 3:] == 0).all()                                       # padding weighs 0
    assert idf[0, 1, 4] == model.idf.weight("lady ?", 2) and model.idf.weight("unseen words", 2) == 1.0
    contextual = build(encoder="bilstm").prepare(make_pairs(["capital of france"], DOCS[:1])).tensors["query_idf"]
    assert (contextual[0] == contextual[0, :1]).all()                       # unigram IDF at every level


def test_truncation_is_counted_and_empty_texts_score():
    model = build(max_query_length=3, max_doc_length=4)
    batch = model.prepare(make_pairs(["a b", "a b c d", "", "a"], ["x y", "x", "x y z w", ""]))
    assert batch.truncated == 1 and batch.size == 4
    assert batch.tensors["query_ids"].shape == (4, 3) and batch.tensors["doc_ids"].shape == (4, 4)
    batch = model.prepare(make_pairs(["a b c d", "q"], ["x", "x y z w v"]))
    assert batch.truncated == 2
    with torch.inference_mode():
        assert torch.isfinite(model.score(model(**model.prepare(make_pairs(["", "a"], ["", ""])).tensors))).all()


@pytest.mark.parametrize("options, width", [
    (dict(), 5 * 2 * 12 + 4 * 10),
    (dict(rm_only=True), 5 * 2 * 12),
    (dict(sm_only=True), 4 * 10),
    (dict(levels=2, encoder="wide"), 3 * 2 * 12 + 2 * 10),
])
def test_ablations_and_modes_shape_the_classifier(options, width):
    """The MLP's input is [RM^0..N; SM^1..N] of the parts turned on, (8): the RM block is IDF-weighted, (3), so
    doubling the query IDF doubles it exactly and leaves the SM block as it was; the score is P(relevant), the
    MLP's second softmax output."""
    model = build(**options)
    c = model.config
    assert model.classifier[0].in_features == width
    assert len(model.sm) == (0 if options.get("rm_only") else c.levels)
    tensors = model.prepare(make_pairs(QUERIES, DOCS)).tensors
    inputs = []
    hook = model.classifier.register_forward_hook(lambda module, args, output: inputs.append(args[0]))
    with torch.inference_mode():
        output = model(**tensors)
        doubled = model(**tensors | {"query_idf": 2 * tensors["query_idf"]})
        hook.remove()
        x, x_doubled = inputs                                              # (4, width) each
        by_hand = torch.softmax(model.classifier(x), 1)[:, 1]             # P(relevant) of (8)
    assert output.shape == (4, 2) and x.shape == (4, width)
    torch.testing.assert_close(model.score(output), by_hand.double())
    rm = 0 if c.sm_only else (c.levels + 1) * c.max_query_length * 2
    torch.testing.assert_close(x_doubled[:, :rm], 2 * x[:, :rm])          # RM: times the IDF
    torch.testing.assert_close(x_doubled[:, rm:], x[:, rm:])              # SM: no IDF in it
    assert rm == 0 or (x[:, :rm] != 0).any(1).all()                       # (a doubling of zeros shows nothing)
    assert torch.equal(doubled, output) == bool(c.sm_only)                # the IDF reaches the score through RM only


def test_loss_is_nll_and_padding_row_stays_zero_and_frozen():
    model = build(dropout=0.3).train()
    before = model.embedding.weight.detach().clone()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, nesterov=True, weight_decay=1e-3)
    for _ in range(3):
        output = model(**model.prepare(make_pairs(QUERIES, DOCS)).tensors)
        loss = model.loss(output, Batch({}, labels=LABELS.float())).total
        torch.testing.assert_close(loss, -output[torch.arange(4), LABELS].mean())
        optimizer.zero_grad()
        loss.backward()
        assert (model.embedding.weight.grad[0] == 0).all()
        optimizer.step()
    assert (model.embedding.weight[0] == 0).all()
    assert not torch.equal(model.embedding.weight[2:], before[2:])         # the other rows do train
    frozen = build(freeze_embeddings=True)
    assert not frozen.embedding.weight.requires_grad


def test_from_training_data_fixes_the_embedding_width_and_vocabulary():
    model = build(embeddings="glove", embedding_dim=0, pretrained_vocab=10)
    assert model.config.embedding_dim == 50 and model.embedding.weight.shape == (len(model.vocab), 50)
    assert "thatcher" in model.vocab and "of" in model.vocab and "never-seen" not in model.vocab
    assert len(model.vocab) == 2 + len({w for t in QUERIES + DOCS for w in tokenize(t)} | {"the", ",", ".", "of", "to",
                                                                                          "and", "in", "a", '"', "'s"})


@pytest.mark.parametrize("options, message", [
    (dict(encoder="cnn"), "encoder='cnn'; choose one of deep, wide, bilstm"),
    (dict(rm_only=True, sm_only=True), "exclude each other"),
    (dict(sm_hidden=15), "even"),
    (dict(rm_softmax="row"), "query, context, padded, raw"),
    (dict(rm_similarity="euclid"), "dot, cosine"),
])
def test_bad_configs_fail_at_once(options, message):
    with pytest.raises(ConfigError, match=message):
        HCAN.from_training_data(tiny(**options), QUERIES, DOCS)


def test_assets_round_trip(tmp_path):
    model = build()
    model.save_assets(tmp_path)
    again = HCAN.load_assets(model.config, tmp_path)
    again.load_state_dict(model.state_dict())
    again.eval()
    assert again.vocab.words == model.vocab.words and again.idf.tables == model.idf.tables
    batch = model.prepare(make_pairs(QUERIES, DOCS))
    with torch.inference_mode():
        torch.testing.assert_close(again.score(again(**batch.tensors)), model.score(model(**batch.tensors)))


def test_trains_and_round_trips_through_the_framework(tiny_qa, tmp_path):
    from pipeline.rerank.checkpoint import load_checkpoint
    from pipeline.rerank.scoring import predict
    from pipeline.training.loop import train
    from pipeline.stages import get_stage_class

    overrides = dataclasses.asdict(tiny(dropout=0.1))
    result = train("hcan", tiny_qa, tmp_path / "hcan", dev=tiny_qa, options={"epochs": 2, "train_batch_size": 8,
                                                                            "lr": 0.1}, overrides=overrides)
    assert result.best_epoch in (1, 2) and (tmp_path / "hcan" / "vocab.txt").is_file()
    model = load_checkpoint(tmp_path / "hcan")
    assert isinstance(model, HCAN) and model.config.embedding_dim == 8 and not model.training
    queries = [tiny_qa.topics()[q] for q in ("q0", "q1")]
    docs = ["the sky is blue", "a cat sleeps on the warm mat"]
    again = load_checkpoint(tmp_path / "hcan")
    assert predict(model, make_pairs(queries, docs)).scores == predict(again, make_pairs(queries, docs)).scores
    stage = get_stage_class("hcan")(ckpt=str(tmp_path / "hcan"))
    reranked = stage(tiny_qa.topics(), tiny_qa.run())
    assert len(reranked) == 8 and reranked.num_hits() == 40


def test_overlap_features_by_hand():
    """overlap_mode=stopwords (our earlier reading): shares of the query's distinct words / IDF mass."""
    model = build(external_features=True, overlap_mode="stopwords")
    query, doc = tokenize("who wrote the iron lady ?"), tokenize("hugo young wrote the iron lady , a film .")
    idf = {w: model.idf.weight(w, 1) for w in set(query)}
    content = {"who", "wrote", "iron", "lady", "?"}                        # "the" is a Lucene stop word
    expected = [4 / 6, sum(idf[w] for w in ("wrote", "the", "iron", "lady")) / sum(idf.values()),
                3 / 5, sum(idf[w] for w in ("wrote", "iron", "lady")) / sum(idf[w] for w in content)]
    assert stopword_overlap_features(query, doc, model.idf) == pytest.approx(expected)
    assert stopword_overlap_features(["the"], ["a"], model.idf)[2:] == [0.0, 0.0]  # no content word: 0, not 0/0
    batch = model.prepare(make_pairs([" ".join(query)], [" ".join(doc)]))
    torch.testing.assert_close(batch.tensors["overlap"], torch.tensor([expected]), rtol=0, atol=1e-6)
    assert model.classifier[0].in_features == build().classifier[0].in_features + 4


def test_code_overlap_features_by_hand():
    """overlap_mode=code (the default): the authors' compute_overlap_feat over query positions, OOV words skipped."""
    model = build(external_features=True)
    query, doc = tokenize("who wrote the iron lady zzyzx"), tokenize("hugo young wrote the iron lady , a film .")
    assert "zzyzx" not in model.vocab and all(w in model.vocab for w in query[:5])
    w1 = {w: model.idf.weight(w, 1) for w in query}
    w2 = {b: model.idf.weight(b, 2) for b in ("who wrote", "wrote the", "the iron", "iron lady", "lady zzyzx")}
    found = ("wrote", "the", "iron", "lady")                                 # of the 5 known words
    bigrams = ("wrote the", "the iron", "iron lady")                         # of the 5 query bigrams
    expected = [4 / 5, sum(w1[w] for w in found) / sum(w1[w] for w in query[:5]),
                3 / (5 - 1), sum(w2[b] for b in bigrams) / sum(w2.values())]
    assert code_overlap_features(query, doc, model.idf, model.vocab) == pytest.approx(expected)
    assert code_overlap_features(["zzyzx"], ["a"], model.idf, model.vocab) == [0.0, 0.0, 0.0, 0.0]
    batch = model.prepare(make_pairs([" ".join(query)], [" ".join(doc)]))
    torch.testing.assert_close(batch.tensors["overlap"], torch.tensor([expected]), rtol=0, atol=1e-6)

def test_a_checkpoint_saved_before_newer_fields_loads_as_it_was_trained(tmp_path, caplog):
    """config.json without the fields HCAN gained later (migrations.ADDED) reads them as trained then: overlap features
    were ours (stopwords); any other missing field is still an error naming it."""
    import json
    import logging

    from pipeline.errors import CheckpointError
    from pipeline.rerank.checkpoint import load_checkpoint, save_checkpoint

    model = build(external_features=True, overlap_mode="stopwords")
    folder = save_checkpoint(model, tmp_path / "old")
    path = folder / "config.json"
    data = json.loads(path.read_text())
    from pipeline.rerank.migrations import added

    for name in set(added(HCANConfig)) & set(data["config"]) - {"external_features"}:  # saved with --ext, before
        del data["config"][name]
    for record in ("files", "digest"):  # and before checkpoints recorded their files' checksums
        data.pop(record, None)
    path.write_text(json.dumps(data))
    with caplog.at_level(logging.INFO, logger="irpipe"):
        again = load_checkpoint(folder)
    assert again.config == model.config and "overlap_mode=stopwords" in caplog.text
    pairs = make_pairs(QUERIES, DOCS)
    with torch.inference_mode():
        torch.testing.assert_close(again.score(again(**again.prepare(pairs).tensors)),
                                   model.score(model(**model.prepare(pairs).tensors)))
    del data["config"]["levels"]
    path.write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match="lacks the field.s. levels"):
        load_checkpoint(folder)


def test_a_retired_field_loads_at_the_value_computed_now_and_is_refused_otherwise(tmp_path, caplog):
    """migrations.RETIRED: a checkpoint saved while idf_stat, rm_mode, ... were options loads when they hold the value
    HCAN computes now (dropped, logged once); at another value it is a model irpipe no longer computes, refused with
    the file and field named. A spec or override naming one is refused with what HCAN computes now."""
    import json
    import logging

    from pipeline.errors import CheckpointError
    from pipeline.rerank.checkpoint import load_checkpoint, save_checkpoint
    from pipeline.rerank.config import make_config
    from pipeline.rerank.migrations import retired
    from pipeline.spec import parse
    from pipeline.training.options import split_options

    model = build()
    folder = save_checkpoint(model, tmp_path / "old")
    path = folder / "config.json"
    data = json.loads(path.read_text())
    data["config"] |= retired(HCANConfig)  # as saved before the retirement (every field at its default then)
    for record in ("files", "digest"):
        data.pop(record, None)
    path.write_text(json.dumps(data))
    with caplog.at_level(logging.INFO, logger="irpipe"):
        again = load_checkpoint(folder)
        load_checkpoint(folder)
    assert again.config == model.config
    assert caplog.text.count("retired config field(s)") == 1 and "idf_stat=df" in caplog.text
    for name, value in (("idf_stat", "cf"), ("rm_mode", "code"), ("kernel", 3), ("max_doc_trigrams", 50)):
        path.write_text(json.dumps(data | {"config": data["config"] | {name: value}}))
        with pytest.raises(CheckpointError, match=f"config.json.*trained with {name}={value}, which irpipe no longer "
                                                  f"computes; it was retired in .*2026-11-27.*Retrain"):
            load_checkpoint(folder)
    for name in retired(HCANConfig):
        with pytest.raises(ConfigError, match=f"{name} was retired in .*every hcan now computes {name}="):
            make_config(HCANConfig, {name: retired(HCANConfig)[name]})
        with pytest.raises(ConfigError, match=f"{name} was retired"):
            split_options("hcan", HCANConfig, {name: 1})
    with pytest.raises(ConfigError, match="hcan: rm_mode was retired in .*every hcan now computes rm_mode=paper"):
        parse("hcan(train=trecqa/train, rm_mode=code)")

"""MRNN (docs/models.md §2): distances, attention over real positions only, padding invariance, the batch-hard miner,
n-gram receptive fields, configs and checkpoints."""
from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from pipeline.errors import ConfigError
from pipeline.rerank.models.mrnn import MRNN, MRNNConfig
from pipeline.rerank.scoring import labelled
from pipeline.rerank.losses import hardest_triplets
from pipeline.training.optim import GradientStepper, make_optimizer
from pipeline.training.options import resolve_options
from support import make_pairs

QUERIES = ["who wrote the iron lady ?", "what is the capital of france ?", "who wrote the iron lady ?",
           "how tall is the eiffel tower in paris ?", "what is the capital of france ?"]
DOCS = ["hugo young wrote the iron lady , a biography of margaret thatcher .", "paris is the capital of france",
        "the iron lady is a film", "the eiffel tower is 324 metres tall", "lyon is a city in france"]
LABELS = [1.0, 1.0, 0.0, 1.0, 0.0]


def tiny(**overrides) -> MRNNConfig:
    fields = dict(embeddings="random", embedding_dim=8, filters=6, max_query_length=12, max_doc_length=24)
    return MRNNConfig(**(fields | overrides))


def build(tiny_bert=None, **overrides) -> MRNN:
    torch.manual_seed(0)
    if overrides.get("embeddings") == "contextual":
        overrides["bert"] = str(tiny_bert)
    return MRNN.from_training_data(tiny(**overrides), QUERIES, DOCS).eval()


def qa_pairs():
    """The pairs with ids by query text (a query's pairs share its qid) and labels."""
    qids = {q: f"q{i}" for i, q in enumerate(dict.fromkeys(QUERIES))}
    return [dataclasses.replace(p, qid=qids[p.query], label=label) for p, label in zip(make_pairs(QUERIES, DOCS), LABELS)]


def padded(tensors: dict, query: int, doc: int) -> dict:
    """The same batch with `query` / `doc` extra padding positions appended."""
    return tensors | {"query_ids": F.pad(tensors["query_ids"], (0, query)), "doc_ids": F.pad(tensors["doc_ids"], (0, doc))}


OPTIONS = [dict(doc_attention=a, pooling=p, summary=s) for a in ("fixed", "length_free") for p in ("identity", "max")
           for s in ("sum", "mean")] + [dict(attention_init="random"), dict(embeddings="contextual"), dict(idf_inputs=True),
                                        dict(embeddings="contextual", idf_inputs=True), dict(query_weights="idf"),
                                        dict(embeddings="contextual", query_weights="idf")]
IDS = lambda o: "-".join(map(str, o.values()))  # noqa: E731


@pytest.mark.parametrize("options", OPTIONS, ids=IDS)
def test_distances_are_eq8_and_scores_their_negation(options, tiny_bert):
    """A pair's distance is eq. (8) over its query's real positions, Σ_i w_i ‖Σ_j aw'_ij mra_d,j - mra_q,i‖ (the model's
    own MRA and attention weights, summed here one position at a time); all_distances' (query u, document b) is what
    that pair scores alone."""
    model = build(tiny_bert, **options)
    with torch.inference_mode():
        out = model(**model.prepare(qa_pairs()).tensors)
        every = model.all_distances(out)                                  # (3 queries, 5 documents)
        q, q_mask = out.queries[out.query_index], out.query_mask[out.query_index]
        _, weights = model.query_attention(q, q_mask, out.docs, out.doc_mask)  # aw' (5, n, m)
        alone = torch.tensor([[model(**model.prepare(make_pairs([query], [doc])).tensors).distance.item()
                               for doc in DOCS] for query in dict.fromkeys(QUERIES)])
    by_hand = torch.stack([sum(q_mask[b, i] * torch.linalg.vector_norm(weights[b, i] @ out.docs[b] - q[b, i])
                               for i in range(q.size(1)) if q_mask[b, i]) for b in range(5)])
    torch.testing.assert_close(out.distance, by_hand)
    torch.testing.assert_close(model.score(out), -out.distance)
    assert every.shape == (3, 5)
    torch.testing.assert_close(every, alone, rtol=0, atol=1e-5)
    torch.testing.assert_close(every[out.query_index, torch.arange(5)], out.distance)  # the pairs' own distances


@pytest.mark.parametrize("options", OPTIONS, ids=IDS)
def test_appending_padding_does_not_change_a_distance(options, tiny_bert):
    model = build(tiny_bert, **options)
    batch = model.prepare(qa_pairs())
    fresh = lambda tensors: model.score(model.eval()(**tensors))  # noqa: E731 (eval(): nothing remembered)
    with torch.inference_mode():
        scores = fresh(batch.tensors)
        more_padding = fresh(padded(batch.tensors, 3, 7))
        alone = torch.cat([fresh(model.prepare([p]).tensors) for p in qa_pairs()])
        model.train()                                          # BatchNorm on batch statistics: over real positions
        training = model(**batch.tensors).distance, model(**padded(batch.tensors, 3, 7)).distance
    torch.testing.assert_close(more_padding, scores, rtol=0, atol=1e-5)
    torch.testing.assert_close(alone, scores, rtol=0, atol=1e-5)  # each pair alone: no padding at all
    torch.testing.assert_close(training[1], training[0], rtol=0, atol=1e-5)
    assert len(set(scores.tolist())) > 1


@pytest.mark.parametrize("options", [{}, dict(embeddings="contextual")], ids=["static", "contextual"])
def test_evaluation_computes_each_texts_maps_once_with_the_same_distances(options, tiny_bert):
    model = build(tiny_bert, **options)
    batch = model.prepare(qa_pairs())
    with torch.enable_grad():                                            # eval mode, gradients on: nothing kept
        direct = model(**batch.tensors).distance.detach()
    assert not model._mra
    with torch.inference_mode():
        first = model(**batch.tensors).distance
        assert len(model._mra) == len(set(QUERIES)) + len(DOCS)          # 3 distinct queries + 5 documents
        kept = {row: mra.clone() for row, mra in model._mra.items()}
        again = model(**padded(model.prepare(qa_pairs()[::-1]).tensors, 2, 3)).distance.flip(0)  # from memory
    assert all(torch.equal(kept[row], mra) for row, mra in model._mra.items()) and len(model._mra) == 8
    torch.testing.assert_close(first, direct, rtol=0, atol=1e-5)
    torch.testing.assert_close(again, first, rtol=0, atol=1e-5)
    model.train()
    assert not model._mra                                                # new weights may follow: forgotten
    with torch.no_grad():
        model.train()(**batch.tensors)                                   # training mode: never remembered
    assert not model._mra


@pytest.mark.parametrize("options", [{}, dict(embeddings="contextual")], ids=["static", "contextual"])
def test_a_memory_bounded_below_one_text_gives_the_same_distances(options, tiny_bert):
    model = build(tiny_bert, **options)
    batch = model.prepare(qa_pairs())
    with torch.inference_mode():
        remembered = model.eval()(**batch.tensors).distance
        model.eval()
        model._mra.max_bytes = 1                                         # every text computed afresh, one kept
        if model.bert is not None:
            model._features.clear()
            model._features.max_bytes = 1
        bounded = model(**batch.tensors).distance
    assert len(model._mra) == 1
    torch.testing.assert_close(bounded, remembered, rtol=0, atol=1e-6)


@pytest.mark.parametrize("doc_attention", ["fixed", "length_free"])
def test_attention_weights_sum_to_one_over_real_positions_only(doc_attention):
    model = build(doc_attention=doc_attention)
    batch = model.prepare(qa_pairs())
    ids = padded(batch.tensors, 0, 4)["doc_ids"]
    with torch.inference_mode():
        g = model.feature_maps(*model.embed(ids))                         # (B, N, m, s)
        docs, resolution_weights = model.resolution_attention(g)          # (B, m, s), (B, m, N)
        queries, query_mask, _, _ = model.represent(batch.tensors["query_ids"], ids)
        index = batch.tensors["query_index"]
        _, weights = model.query_attention(queries[index], query_mask[index], docs, ids != 0)  # (B, n, m)
    torch.testing.assert_close(resolution_weights.sum(-1), torch.ones(5, ids.size(1)))
    real = (ids != 0).unsqueeze(1).expand_as(weights)
    assert (weights[~real] == 0).all() and (weights[real] > 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:2]))


@pytest.mark.parametrize("doc_attention", ["fixed", "length_free"])
def test_identity_init_starts_as_dot_product_attention(doc_attention):
    model = build(doc_attention=doc_attention, attention_logits="dot")
    torch.nn.init.ones_(model.query_attention.act.weight)                 # PReLU as the identity
    q, d = torch.randn(2, 3, 6), torch.randn(2, 5, 6)
    d_mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    with torch.inference_mode():
        _, weights = model.query_attention(q, torch.ones(2, 3, dtype=torch.bool), d, d_mask)
    expected = torch.softmax((q @ d.transpose(1, 2)).masked_fill(~d_mask[:, None], float("-inf")), -1)
    torch.testing.assert_close(weights, expected)


@pytest.mark.parametrize("filters", [8, 5])
def test_identity_start_passes_the_inputs_through(filters):
    """init=identity: MRA = P E at every real position (P the identity for s >= w, else orthonormal rows scaled
    by sqrt(w / s)), in evaluation, whatever the number of blocks."""
    model = build(init="identity", filters=filters, blocks=4)
    ids = model.prepare(make_pairs(QUERIES, DOCS)).tensors["doc_ids"]
    with torch.inference_mode():
        inputs, mask = model.embed(ids)
        mra, _ = model.multi_resolution(ids)
    projection = model.feature_maps.blocks[0].conv.weight[..., 0] / 4           # (s, w): the gain N undone
    if filters >= 8:
        torch.testing.assert_close(projection, torch.eye(filters, 8))
    else:
        torch.testing.assert_close(projection @ projection.T, torch.eye(filters) * 8 / filters)
    torch.testing.assert_close(mra[mask], inputs[mask] @ projection.T)


def test_identity_start_ranks_by_the_nearest_word_distance():
    """Sharpened attention on the inputs themselves: the untrained score orders a query's candidates as
    -sum_i min_j ||e_q,i - e_d,j|| does (one-hot inputs: how many of the query's words the candidate lacks)."""
    queries = ["alpha beta gamma"] * 4
    docs = ["alpha beta gamma delta", "alpha beta delta", "alpha delta epsilon", "delta epsilon zeta"]
    torch.manual_seed(0)
    model = MRNN.from_training_data(tiny(init="identity", filters=16, blocks=3), queries, docs).eval()
    with torch.no_grad():
        model.embedding.weight.copy_(torch.eye(*model.embedding.weight.shape) * 3)  # one-hot words
    scores = model.score(model(**{k: v for k, v in model.prepare(make_pairs(queries, docs)).tensors.items()}))
    assert scores.argsort(descending=True).tolist() == [0, 1, 2, 3]


def test_the_miner_picks_the_hardest_pair():
    distances = torch.tensor([[1.0, 3.0, 2.5, 0.5, 9.0],    # query 0: positives 0, 1; negatives 2, 3
                              [4.0, 0.2, 7.0, 6.0, 5.0],    # query 1: positive 2; negative 4 and 3
                              [1.0, 1.0, 1.0, 1.0, 1.0]])   # query 2: no negative -> no triplet
    positive = torch.tensor([[1, 1, 0, 0, 0], [0, 0, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    negative = torch.tensor([[0, 0, 1, 1, 0], [0, 0, 0, 1, 1], [0, 0, 0, 0, 0]], dtype=torch.bool)
    expected = (max(3.0 - 0.5 + 0.5, 0) + max(7.0 - 5.0 + 0.5, 0)) / 2  # hardest positive 3.0 vs negative 0.5, ...
    assert hardest_triplets(distances, positive, negative, 0.5).item() == pytest.approx(expected)
    assert hardest_triplets(distances, positive, torch.zeros_like(negative), 0.5).item() == 0.0


@pytest.mark.parametrize("own_negatives", [False, True])
def test_the_loss_mines_other_questions_positives_and_optionally_own_negatives(own_negatives):
    model = build(own_negatives=own_negatives)
    batch = labelled(model.prepare(qa_pairs()), "cpu")
    with torch.inference_mode():
        out = model(**batch.tensors)
        d = model.all_distances(out)                                      # (3 queries, 5 documents)
        loss = model.loss(out, batch)
    # q0 owns docs 0 (+), 2 (-); q1 owns 1 (+), 4 (-); q2 owns 3 (+); other questions' positives are negatives
    negatives = {0: [1, 3] + ([2] if own_negatives else []), 1: [0, 3] + ([4] if own_negatives else []), 2: [0, 1]}
    positives = {0: [0], 1: [1], 2: [3]}
    expected = sum(max(float(d[q, positives[q]].max() - d[q, negatives[q]].min()) + 0.5, 0) for q in range(3)) / 3
    assert loss.total.item() == pytest.approx(expected, rel=1e-5) and set(loss.parts) == {"triplet"}
    assert model.batch_sampling() == ("queries" if own_negatives else "positives")


def test_the_listwise_loss_softmaxes_each_positive_against_the_negatives_the_triplet_loss_mines():
    model = build(own_negatives=True, loss="listwise")
    batch = labelled(model.prepare(qa_pairs()), "cpu")
    with torch.inference_mode():
        out = model(**batch.tensors)
        d = model.all_distances(out)                                      # (3 queries, 5 documents)
        loss = model.loss(out, batch)
    negatives, positives = {0: [1, 3, 2], 1: [0, 3, 4], 2: [0, 1]}, {0: 0, 1: 1, 2: 3}
    expected = sum(float(torch.logsumexp(-d[q, [positives[q]] + negatives[q]], 0) + d[q, positives[q]])
                   for q in range(3)) / 3
    assert loss.total.item() == pytest.approx(expected, rel=1e-5) and set(loss.parts) == {"listwise"}


@pytest.mark.parametrize("blocks", [4, 6])
def test_block_n_sees_a_2n_minus_1_gram(blocks):
    model = build(blocks=blocks)
    x = torch.randn(1, 21, 8)
    mask = torch.ones(1, 21, dtype=torch.bool)
    changed = x.clone()
    changed[0, 10] += 1.0                                                 # perturb token 10 only
    with torch.inference_mode():
        g, g_changed = model.feature_maps(x, mask), model.feature_maps(changed, mask)   # (1, N, 21, s)
    for n in range(1, blocks + 1):
        moved = ((g_changed[0, n - 1] - g[0, n - 1]).abs().amax(-1) > 0).nonzero().flatten().tolist()
        assert moved == list(range(10 - (n - 1), 10 + n)), f"block {n}"   # positions 10 +- (n-1): 2n-1 tokens



@pytest.mark.parametrize("filters", [128, pytest.param(1024, marks=pytest.mark.slow)])
def test_the_resolution_softmax_is_not_saturated_at_the_papers_widths(filters):
    """Eq. (3) at initialisation over BatchNorm-ed maps: the default summary must leave the softmax over the N
    resolutions soft, so the conductor FC gets a gradient. The paper's feature sum grows with s (T ~ 0.3 s per
    position after BN + PReLU) and made aw one-hot with a ~1e-6 gradient at s = 128."""
    torch.manual_seed(0)
    model = build(embedding_dim=50, filters=filters).train()
    x, mask = torch.randn(8, 20, 50), torch.ones(8, 20, dtype=torch.bool)
    mra, aw = model.resolution_attention(model.feature_maps(x, mask))          # (8, 20, s), (8, 20, N)
    mra.pow(2).sum().backward()
    assert aw.amax(-1).mean() < 0.6                                            # uniform: 0.25; saturated: 1.0
    fc = model.resolution_attention.conductor[0].weight.grad.norm()
    conv = model.feature_maps.blocks[0].conv.weight.grad.norm()
    assert fc > 1e-3 * conv, f"conductor FC gradient {fc:.2e} vs block 1 conv {conv:.2e}"

def test_idf_inputs_silence_the_commonest_word_and_keep_unseen_words():
    model = build(idf_inputs=True)
    ids = torch.tensor([model.vocab.encode(["the", "iron", "zebra"])])    # "the" is in 4 of the 7 texts
    with torch.inference_mode():
        x, _ = model.embed(ids)
    weights = model.input_idf[ids[0]]
    assert weights[0] == 0 and 0 < weights[1] < 1 and weights[2] == 1       # zebra: unknown word, weight 1
    torch.testing.assert_close(x[0], model.embedding(ids)[0] * weights[:, None])
    assert not x[0, 0].any()


def test_idf_query_weights_weigh_each_question_word_by_its_idf():
    """query_weights=idf: w_i of eq. (8) is the question word's normalised IDF (the commonest word 0, so its
    distance counts for nothing), 0 on padding; the inputs themselves are not scaled."""
    model, uniform = build(query_weights="idf"), build()
    pairs = make_pairs(["who wrote the zebra"], ["hugo young wrote the iron lady"])
    tensors = model.prepare(pairs).tensors
    ids = tensors["query_ids"]
    with torch.inference_mode():
        out, plain = model(**tensors), uniform(**tensors)
    real = ids[0] != 0
    torch.testing.assert_close(out.query_mask[0], model.input_idf[ids[0]] * real)
    the = ids[0] == model.vocab.encode(["the"])[0]
    assert the.any() and out.query_mask[0, the].eq(0).all()                  # "the": in 4 of the 7 texts
    torch.testing.assert_close(out.queries, plain.queries)                    # the MRA is the uniform model's


@pytest.mark.parametrize("options", [{}, dict(embeddings="contextual")], ids=["static", "contextual"])
def test_truncation_is_counted_and_empty_texts_score(options, tiny_bert):
    """Rows fit the fixed document attention: contextual rows count [CLS] and [SEP] among max_doc_length."""
    model = build(tiny_bert, max_query_length=3, max_doc_length=4, **options)
    batch = model.prepare(make_pairs(["who wrote the iron lady", ""], ["the iron lady is a film", ""]))
    assert batch.truncated == 2 and batch.tensors["doc_ids"].shape == (2, 4)
    with torch.inference_mode():
        assert torch.isfinite(model.score(model(**batch.tensors))).all()


@pytest.mark.parametrize("options, message", [
    (dict(window=4), "odd"), (dict(pooling="avg"), "identity, max"), (dict(doc_attention="free"), "fixed"),
    (dict(filters=0), "filters"), (dict(attention_init="eye"), "identity, random"), (dict(embeddings="elmo"), "contextual"),
    (dict(embeddings="contextual", max_doc_length=2), "max_doc_length"),
    (dict(init="identity", attention_init="random"), "attention_init=identity"), (dict(init="eye"), "random, identity"),
])
def test_bad_configs_fail_at_once(options, message):
    with pytest.raises(ConfigError, match=message):
        MRNN.from_training_data(tiny(**options), QUERIES, DOCS)


@pytest.mark.parametrize("embeddings", ["random", pytest.param("contextual", marks=pytest.mark.slow)])
def test_trains_and_round_trips_through_the_framework(embeddings, tiny_bert, tiny_qa, tmp_path):
    from pipeline.rerank.checkpoint import load_checkpoint
    from pipeline.rerank.scoring import predict
    from pipeline.training.loop import train

    overrides = dataclasses.asdict(tiny(embeddings=embeddings, bert=str(tiny_bert), own_negatives=True))
    result = train("mrnn", tiny_qa, tmp_path / "mrnn", dev=tiny_qa, options={"epochs": 2, "train_batch_size": 4},
                   overrides=overrides)
    assert result.best_epoch in (1, 2) and "triplet" in result.history[0]["loss_parts"]
    model = load_checkpoint(tmp_path / "mrnn")
    assert isinstance(model, MRNN) and not model.training
    pairs = make_pairs([tiny_qa.topics()[q] for q in ("q0", "q1")], ["the sky is blue", "a cat sleeps on the mat"])
    assert predict(model, pairs).scores == predict(load_checkpoint(tmp_path / "mrnn"), pairs).scores
    if embeddings == "contextual":                                        # the frozen BERT did not move
        from pipeline.rerank.bert import load_bert

        original = load_bert(str(tiny_bert))[0].state_dict()
        assert all(torch.equal(v, original[k]) for k, v in model.bert.state_dict().items())


def test_the_start_benchmark_scores_each_start_and_the_identity_one_finds_the_answers(tiny_qa):
    """bench/mrnn_start.py: untrained MRNN, random and init=identity, at each width; on TinyQA (the
    answer repeats the question's thing, the fillers do not) the identity start ranks every answer first. A set's
    shipped candidates are in file order: no first-stage row."""
    from bench.mrnn_start import bench

    settings = {"embeddings": "random", "embedding_dim": 64, "max_query_length": 12, "max_doc_length": 24}
    result = bench(tiny_qa, tiny_qa, None, None, [32, 64], ["P@1", "AP"], settings)  # words nearly orthogonal
    assert result["queries"] == 8
    assert list(result["untrained"]) == ["random, s=32", "identity, s=32", "random, s=64", "identity, s=64"]
    assert result["untrained"]["identity, s=64"] == {"P@1": 1.0, "AP": 1.0}
    only = bench(tiny_qa, tiny_qa, None, 3, [64], ["P@1"], settings, starts=("identity",))
    assert only["queries"] == 3 and only["untrained"] == {"identity, s=64": {"P@1": 1.0}}


@pytest.mark.parametrize("start_lr", [0.0, 0.1])
def test_start_lr_slows_or_freezes_the_identity_starts_parameters_and_trains_the_rest(start_lr):
    """start_lr: block 1 and the attention (the start's distance) at lr x start_lr -- frozen at 0 --, the blocks that
    start off and the conductor at lr; at 1 the optimizer is the one it always was."""
    model = build(init="identity", own_negatives=True).train()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = make_optimizer(model, "adam", 0.01, 0.0, start=model.start_parameters(model.config), start_lr=start_lr)
    stepper = GradientStepper(model, optimizer, max_grad_norm=1.0)
    for _ in range(3):
        batch = labelled(model.prepare(qa_pairs()), "cpu")
        stepper.step(model.loss(model(**batch.tensors), batch).total)
    moved = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    start = {n for n in before if n.startswith(model.start_parameters(model.config))}
    assert start and "feature_maps.blocks.1.scale" in moved and "resolution_attention.conductor.0.weight" in moved
    if start_lr == 0:
        assert not moved & start
    else:
        assert moved & start
    rates = {group["lr"] for group in optimizer.param_groups}
    assert rates == ({0.01} if start_lr == 0 else {0.01, 0.01 * start_lr})
    fresh = build(init="identity")
    plain = make_optimizer(fresh, "adam", 0.01, 0.0, start=fresh.start_parameters(fresh.config), start_lr=1.0)
    always = make_optimizer(fresh, "adam", 0.01, 0.0)
    assert [[id(p) for p in g["params"]] for g in plain.param_groups] == \
        [[id(p) for p in g["params"]] for g in always.param_groups]


def test_start_lr_is_refused_where_there_is_no_ranking_start():
    """Before any work, as every option that would act on nothing (pipeline/declared.py check_applies)."""
    with pytest.raises(ConfigError, match=r"start_lr=0.0 acts only with a ranking start"):
        resolve_options(MRNN, tiny(init="random"), {"start_lr": 0.0})
    assert resolve_options(MRNN, tiny(init="identity"), {"start_lr": 0.0}).start_lr == 0.0

"""addax: the score bounded by the query length, padding that never wins a max, shapes under W1's fixed-length
padding, the sign loss vanishing as alpha grows, stored-encoding scores equal to on-the-fly ones (fp32 1e-5, fp16
1e-3 and the same ranking), each ablation switch removing exactly its part, the loss as its formula, training, and
init=identity (MAGS the identity, the denoiser a sign projection shared with the query side), a detached L2 target
that keeps the reconstruction's gradient out of the encoder, and those two as defaults that leave older recipes and
checkpoints (the paper's random start and live target) as they were."""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from pipeline.errors import ConfigError
from pipeline.rerank.checkpoint import checkpoint_config, load_checkpoint, save_checkpoint
from pipeline.rerank.config import config_to_dict, make_config, recipe_fields
from pipeline.rerank.models.addax import ABLATIONS, ADDAX, ADDAXConfig, MAGS, maxsim
from pipeline.rerank.scoring import labelled, predict
from pipeline.rerank.store import EncodingStore, score_late_interaction, write_store
from pipeline.training.loop import train
from support import make_pairs

QUERIES = ["what colour is the sky", "who wrote hamlet", "how tall is mount everest"]
DOCS = ["on a clear day the sky is blue", "hamlet is a tragedy written by william shakespeare around 1600",
        "mount everest is 8,849 metres high, the highest mountain above sea level"]


def _model(tiny_bert, seed: int = 0, **config) -> ADDAX:
    torch.manual_seed(seed)
    return ADDAX(make_config(ADDAXConfig, {"bert": str(tiny_bert), "max_query_length": 16, "max_doc_length": 24}
                             | config)).eval()


def _scores(model, pairs) -> torch.Tensor:
    with torch.inference_mode():
        return model.score(model(**model.prepare(pairs).tensors))


@pytest.fixture(scope="module")
def minilm() -> ADDAX:
    torch.manual_seed(0)  # the head is freshly initialised on the real all-MiniLM-L6-v2 encoder
    return ADDAX(ADDAXConfig(max_doc_length=64)).eval()


@pytest.mark.parametrize("ablation", ABLATIONS)
def test_score_lies_within_the_query_length(tiny_bert, ablation):
    model = _model(tiny_bert, ablation=ablation)
    u, v = torch.randn(4, 7, 32) * 5, torch.randn(4, 11, 32) * 5
    u_mask = torch.arange(7) < torch.tensor([[7], [3], [1], [5]])
    v_mask = torch.arange(11) < torch.tensor([[11], [2], [6], [1]])
    with torch.inference_mode():
        score = model.interact(u, u_mask, v, v_mask)["score"]
    rows = u_mask.sum(1).float()
    assert (score.abs() <= rows + 1e-5).all() and not torch.allclose(score, torch.zeros(4))
    same = model.interact(u, u_mask, v.clone(), v_mask)["score"]
    assert torch.equal(score, same)


def test_padding_never_wins_a_max():
    query = F.normalize(torch.tensor([[[1.0, 0.0], [0.0, 1.0]]]), dim=-1)        # (1, 2, 2)
    doc = torch.tensor([[[0.0, 1.0], [1.0, 0.0], [1.0, 0.0]]])                  # rows 2.. are padding: exact matches
    mask = torch.tensor([[True, False, False]])
    assert maxsim(query, torch.ones(1, 2, dtype=torch.bool), doc, mask).item() == pytest.approx(0.0 + 1.0)
    assert maxsim(query, torch.tensor([[False, True]]), doc, mask).item() == pytest.approx(1.0)  # padded query row


def test_appended_padding_changes_no_score(tiny_bert):
    model = _model(tiny_bert)
    alone = _scores(model, make_pairs(QUERIES[:1], DOCS[:1]))
    longer = make_pairs([QUERIES[0], "a much longer question about other things"], [DOCS[0], DOCS[2] * 3])
    padded = _scores(model, longer)
    assert padded[0].item() == pytest.approx(alone[0].item(), abs=1e-5)


def test_shapes_under_the_fixed_length_padding_of_w1(tiny_bert):
    model = _model(tiny_bert)
    assert model.query_mags.element_gate.weight.shape == (32, 24)   # W1: L_D x d (as a d x L_D Linear weight)
    assert model.doc_mags.element_gate.weight.shape == (32, 16)     # W1': L_Q x d
    assert model.query_mags.row_gate.weight.shape == (1, 24)        # w1 in R^{L_D}
    batch = model.prepare(make_pairs([QUERIES[0], QUERIES[1] + " " + "and more words " * 10],
                                     [DOCS[1] + " again" * 40, DOCS[0]]))
    assert batch.tensors["query_ids"].shape[1] == 16 and batch.tensors["doc_ids"].shape[1] == 24  # cut to L_Q, L_D
    assert batch.truncated == 2
    # S W1 on the unpadded S equals S zero-padded to the fixed L_D times the whole W1
    gate = model.query_mags.element_gate
    s = torch.randn(2, 5, 9)
    padded = F.pad(s, (0, 24 - 9)) @ gate.weight.T + gate.bias                  # (2, 5, 32)
    assert torch.allclose(F.linear(s, gate.weight[:, :9], gate.bias), padded, atol=1e-6)
    with torch.inference_mode():
        out = model(**batch.tensors)
    assert out["score"].shape == out["sign_loss"].shape == out["reconstruction_loss"].shape == (2,)
    with pytest.raises(ConfigError, match="exceed"):
        model.interact(torch.randn(1, 3, 32), torch.ones(1, 3, dtype=torch.bool), torch.randn(1, 25, 32),
                       torch.ones(1, 25, dtype=torch.bool))


def test_sign_loss_vanishes_as_alpha_grows(tiny_bert):
    batch = _model(tiny_bert).prepare(make_pairs(QUERIES, DOCS))
    losses = []
    for alpha in (1.0, 5.0, 50.0, 5e3, 5e5):
        model = _model(tiny_bert, code_sharpness=alpha)  # same seed: same weights, only alpha differs
        with torch.inference_mode():
            losses.append(model(**batch.tensors)["sign_loss"].sum().item())
    assert losses == sorted(losses, reverse=True) and losses[-1] < 1e-3 * losses[0]


@pytest.mark.parametrize("dtype, tolerance", [("fp32", 1e-5), ("fp16", 1e-3)])
def test_stored_encoding_scores_equal_on_the_fly_scores(minilm, tmp_path, dtype, tolerance):
    queries = ["what colour is the sky"] * 3 + ["who wrote hamlet"] * 3
    docs = [DOCS[0], DOCS[1], DOCS[2], DOCS[1], "hamlet is a small village", DOCS[0]]
    pairs = make_pairs(queries, docs)
    pairs = [p.__class__(p.qid[:1] + str(i // 3), f"doc{docs.index(p.text)}", p.query, p.text)
             for i, p in enumerate(pairs)]
    on_the_fly = predict(minilm, pairs, batch_size=4).scores              # the forward pass: BERT over each pair
    write_store(tmp_path / dtype, minilm, "digest", {p.docid: p.text for p in pairs}.items(), dtype=dtype)
    store = EncodingStore.open(tmp_path / dtype, "addax", "digest")
    assert len(store) == 4 and store.get("doc1").shape == (len(minilm.tokenizer(DOCS[1])["input_ids"]), 384)
    stored = score_late_interaction(minilm, pairs, store, batch_size=4, device=torch.device("cpu"))
    assert stored == pytest.approx(on_the_fly, abs=tolerance)
    for first in (0, 3):  # the same ranking within each query
        rank = lambda scores: sorted(range(3), key=lambda i: -scores[first + i])  # noqa: E731
        assert rank(stored) == rank(on_the_fly)


@pytest.mark.slow
def test_each_ablation_removes_exactly_its_part(tiny_bert):
    full = {name.split(".")[0] + "." + name.split(".")[1] for name, _ in _model(tiny_bert).named_parameters()
            if not name.startswith("bert.")}
    parts = lambda **c: {n for n, _ in _model(tiny_bert, **c).named_parameters() if not n.startswith("bert.")}  # noqa
    removed = {ablation: {n for n, _ in _model(tiny_bert).named_parameters()} - {n for n, _ in _model(
        tiny_bert, ablation=ablation).named_parameters()} for ablation in ABLATIONS}
    assert removed["none"] == set() and full
    assert {n.split(".")[0] for n in removed["no_mags"]} == {"query_mags", "doc_mags"}
    assert {n.split(".")[0] for n in removed["no_denoiser"]} == {"denoiser", "query_projection"}
    assert {n.split(".")[1] for n in removed["no_highway"]} == {"transform", "carry"}
    assert {n.split(".")[1] for n in removed["attention_only_mags"]} == {"element_gate", "row_gate"}
    assert not any(n.startswith("bert.") for names in removed.values() for n in names)
    assert parts(ablation="no_highway") | removed["no_highway"] == parts()

    # behaviour: the full model with its highway's carry gates shut (g = 0, x = F) scores as no_highway
    full_model, no_highway = _model(tiny_bert), _model(tiny_bert, ablation="no_highway")
    no_highway.load_state_dict(full_model.state_dict(), strict=False)
    for mags in (full_model.query_mags, full_model.doc_mags):
        torch.nn.init.constant_(mags.carry.bias, -1e4)
    pairs = make_pairs(QUERIES, DOCS)
    assert torch.allclose(_scores(full_model, pairs), _scores(no_highway, pairs), atol=1e-5)

    # no_denoiser: MaxSim on the MAGS outputs, no sign or reconstruction loss
    plain = _model(tiny_bert, ablation="no_denoiser")
    batch = labelled(plain.prepare(make_pairs(QUERIES, DOCS)), "cpu")
    assert set(plain.loss(plain(**batch.tensors), batch).parts) == {"hinge"}


def test_sign_codes_score_with_sgn_b(tiny_bert):
    model = _model(tiny_bert, codes="sign")
    pairs = make_pairs(QUERIES, DOCS)
    batch = model.prepare(pairs)
    with torch.inference_mode():
        u = model.encode(batch.tensors["query_ids"], batch.tensors["query_mask"])
        v = model.encode(batch.tensors["doc_ids"], batch.tensors["doc_mask"])
        u_mask, v_mask = batch.tensors["query_mask"].bool(), batch.tensors["doc_mask"].bool()
        s = u @ v.transpose(1, 2)
        h_q = model.query_mags(u, u_mask, v, v_mask, s)
        h_d = model.doc_mags(v, v_mask, u, u_mask, s.transpose(1, 2))
        codes = torch.sign(model.denoiser.encoder(h_d))
        expected = maxsim(torch.tanh(model.query_projection(h_q)), u_mask, codes, v_mask)
        assert torch.allclose(model.interact(u, u_mask, v, v_mask)["score"], expected, atol=1e-5)
        model.config.codes = "tanh"
        assert not torch.allclose(model.interact(u, u_mask, v, v_mask)["score"], expected, atol=1e-3)


def test_loss_is_hinge_plus_weighted_sign_and_reconstruction(tiny_bert):
    model = _model(tiny_bert, delta=0.5, gamma=0.25)
    output = {"score": torch.tensor([2.0, 1.5, 0.3, 0.9]), "sign_loss": torch.tensor([1.0, 2.0, 3.0, 4.0]),
              "reconstruction_loss": torch.tensor([10.0, 20.0, 30.0, 40.0])}
    batch = model.prepare(make_pairs(QUERIES[:2] * 2, DOCS[:2] * 2))
    batch.labels, batch.groups = torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.tensor([0, 0, 1, 1])  # two triplets
    loss = model.loss(output, batch)
    hinge = (max(0, 1 - 2.0 + 1.5) + max(0, 1 - 0.3 + 0.9)) / 2
    assert loss.parts["hinge"].item() == pytest.approx(hinge)
    assert loss.parts["sign"].item() == pytest.approx(0.5 * 10 / 2)
    assert loss.parts["reconstruction"].item() == pytest.approx(0.25 * 100 / 2)
    assert loss.total.item() == pytest.approx(hinge + 2.5 + 12.5)


@pytest.mark.slow
def test_trains_logs_its_loss_parts_and_reloads(tiny_bert, tiny_qa, tmp_path):
    result = train("addax", tiny_qa, tmp_path / "m", dev=tiny_qa,
                   options={"epochs": 1, "lr": 1e-3, "train_batch_size": 4, "seed": 1},
                   overrides={"bert": str(tiny_bert), "max_query_length": 16, "max_doc_length": 16})
    record = json.loads((tmp_path / "m" / "train.jsonl").read_text().splitlines()[0])
    assert set(record["loss_parts"]) == {"hinge", "sign", "reconstruction"}
    assert record["loss"] == pytest.approx(sum(record["loss_parts"].values()), rel=1e-5)
    assert result.best_epoch == 1 and "AP" in result.best
    model = load_checkpoint(tmp_path / "m")
    pairs = make_pairs(QUERIES, DOCS)
    save_checkpoint(model, tmp_path / "again")
    assert torch.equal(_scores(model, pairs), _scores(load_checkpoint(tmp_path / "again"), pairs))


@pytest.mark.parametrize("gates", [True, False])
def test_identity_init_starts_mags_as_the_identity(gates):
    torch.manual_seed(0)
    x, y = torch.randn(3, 5, 8), torch.randn(3, 7, 8)
    x_mask, y_mask = torch.arange(5) < torch.tensor([[5], [2], [4]]), torch.arange(7) < torch.tensor([[7], [3], [1]])
    s = x @ y.transpose(1, 2)
    plain, highway = MAGS(8, 9, gates, highway=False), MAGS(8, 9, gates, highway=True)
    for mags in (plain, highway):
        mags.start_as_identity()
    with torch.no_grad():
        assert torch.allclose(plain(x, x_mask, y, y_mask, s), x * x_mask.unsqueeze(-1), atol=1e-5)
        carried = highway(x, x_mask, y, y_mask, s)[x_mask]      # (1 - sigma(-4)) F + sigma(-4) ReLU(W3 F + b3)
        assert (carried - x[x_mask]).norm() < 0.1 * x[x_mask].norm()


def test_identity_init_codes_are_signs_of_the_query_projection(tiny_bert):
    model = _model(tiny_bert, init="identity")
    denoiser, project = model.denoiser, model.query_projection
    hidden, dims = denoiser.encoder[0].weight.shape
    k = min(hidden // 2, dims)
    a, p = denoiser.encoder[0].weight[:k], denoiser.encoder[4].weight[:, :k]
    assert torch.allclose(a @ a.T, torch.eye(k), atol=1e-5)
    assert torch.allclose(project.weight, p @ a)
    x = torch.randn(50, dims) * 0.3
    with torch.no_grad():
        assert torch.allclose(denoiser.encoder(x), torch.tanh(torch.tanh(x @ a.T) @ p.T), atol=1e-5)
    # the whole head then orders pairs as MaxSim over the encoder's own token vectors does
    u, v = torch.randn(64, 6, dims) * 0.3, torch.randn(64, 9, dims) * 0.3
    u_mask, v_mask = torch.ones(64, 6, dtype=torch.bool), torch.ones(64, 9, dtype=torch.bool)
    with torch.inference_mode():
        head = model.interact(u, u_mask, v, v_mask)["score"]
        random_head = _model(tiny_bert, init="random").interact(u, u_mask, v, v_mask)["score"]
    plain = maxsim(u, u_mask, v, v_mask)
    assert torch.corrcoef(torch.stack([head, plain]))[0, 1] > 0.8        # 0.91 here
    assert torch.corrcoef(torch.stack([random_head, plain]))[0, 1] < 0.5  # -0.12: a random head forgets it


@pytest.mark.parametrize("reconstruction", ["live", "detached"])
def test_reconstruction_target_reaches_the_encoder_only_when_live(tiny_bert, reconstruction):
    model = _model(tiny_bert, ablation="no_mags", reconstruction=reconstruction)   # H_D = V_D
    with torch.no_grad():
        model.denoiser.encoder[0].weight.zero_()   # the codes no longer depend on V_D: only the target path is left
    u, v = torch.randn(2, 4, 32), torch.randn(2, 6, 32, requires_grad=True)
    mask_u, mask_v = torch.ones(2, 4, dtype=torch.bool), torch.ones(2, 6, dtype=torch.bool)
    model.interact(u, mask_u, v, mask_v, losses=True)["reconstruction_loss"].sum().backward()
    assert (v.grad.abs().sum() > 0) == (reconstruction == "live")
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.denoiser.decoder.parameters())


def test_defaults_start_as_the_identity_with_a_detached_target_and_older_recipes_and_checkpoints_keep_theirs():
    default, papers = ADDAXConfig(), make_config(ADDAXConfig, {"init": "random", "reconstruction": "live"})
    assert (default.init, default.reconstruction) == ("identity", "detached")
    # a recipe that pins the paper's reading keys as before the two fields existed (its cached model stays valid) ...
    new_fields = ("init", "reconstruction")
    assert recipe_fields(papers) == {k: v for k, v in recipe_fields(default).items() if k not in new_fields}
    # ... and one that leaves them out now trains the new defaults, under a key of its own
    assert recipe_fields(default) == recipe_fields(papers) | {"init": "identity", "reconstruction": "detached"}
    saved_before = {k: v for k, v in config_to_dict(default).items() if k not in new_fields}
    older = checkpoint_config(ADDAXConfig, saved_before, "config.json")
    assert (older.init, older.reconstruction) == ("random", "live")


def test_config_errors():
    with pytest.raises(ConfigError, match="ablation='no_hashing'; choose one of none, no_mags") as caught:
        make_config(ADDAXConfig, {"ablation": "no_hashing"})
    assert caught.value.field == "ablation"
    with pytest.raises(ConfigError, match="init='zeros'; choose one of random, identity"):
        make_config(ADDAXConfig, {"init": "zeros"})
    with pytest.raises(ConfigError, match="reconstruction='off'; choose one of live, detached"):
        make_config(ADDAXConfig, {"reconstruction": "off"})
    with pytest.raises(ConfigError, match="codes='binary'"):
        make_config(ADDAXConfig, {"codes": "binary"})
    with pytest.raises(ConfigError, match="max_doc_length=2; expected an integer >= 3"):
        make_config(ADDAXConfig, {"max_doc_length": 2})

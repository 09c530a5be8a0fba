"""int8 schemes (pipeline/rerank/quantize.py): the scheme grammar and its errors, which linear layers stay fp32
and which run in int8 with which weight scales, scores of a real (tiny, seeded) monobert within bounds of fp32's,
and `--quantize` refusing a bad scheme with exit 2."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pipeline.cli import main as cli
from pipeline.errors import ConfigError
from pipeline.rerank.models.monobert import MonoBERT, MonoBERTConfig
from pipeline.rerank.pairs import pairs_of
from pipeline.rerank.quantize import Scheme, Smoothed, TokenInt8Linear, kept_linears, layer_norm_inputs, parse_scheme, \
    smoothing
from pipeline.rerank.scoring import check_quantize, is_quantized, predict, quantized

CPU = torch.device("cpu")
VNNI = torch.cpu._is_vnni_supported()
EVERY_GROUP = "int8-channel:qkv+attn-out+ffn-in+ffn-out+head"


@pytest.fixture(scope="module")
def qa_pairs(tiny_qa):
    run = tiny_qa.run()
    return pairs_of(tiny_qa.topics(), run, run.texts)


def _monobert(tiny_bert) -> MonoBERT:
    torch.manual_seed(0)
    return MonoBERT(MonoBERTConfig(bert=str(tiny_bert), max_length=48)).eval()


@pytest.mark.parametrize("value, scheme", [
    ("int8", Scheme(False)),
    ("int8-channel", Scheme(True)),
    ("int8-channel:ffn-out", Scheme(True, ("ffn-out",))),
    ("int8:ffn-out+head+last", Scheme(False, ("ffn-out", "head", "last"))),
    ("int8-token", Scheme(True, (), full_range=True, per_token=True)),
    ("int8-token:ffn-out", Scheme(True, ("ffn-out",), full_range=True, per_token=True)),
    ("int8-token-smooth:ffn-out", Scheme(True, ("ffn-out",), full_range=True, per_token=True, smooth=True)),
])
def test_a_scheme_is_a_base_then_the_groups_kept_in_fp32(value, scheme):
    assert parse_scheme(value) == scheme


@pytest.mark.parametrize("value, message", [
    ("int4", "the scheme is one of int8, int8-channel"),
    ("int8-channel:ffn", "unknown layer group 'ffn'; choose from ffn-out, ffn-in"),
    ("int8-channel:", "unknown layer group ''"),
    ("int8:ffn-out+", "unknown layer group ''"),
])
def test_a_bad_scheme_is_a_config_error_naming_the_choices(value, message):
    with pytest.raises(ConfigError, match=message):
        check_quantize(value)
    assert check_quantize("none") is None and check_quantize("int8-channel:ffn-out") == "int8-channel:ffn-out"


def test_kept_groups_stay_fp32_and_the_rest_runs_in_int8_with_per_channel_scales(tiny_bert):
    model = _monobert(tiny_bert)
    assert kept_linears(model, parse_scheme("int8-channel:ffn-out+head")) == [
        "bert.encoder.layer.0.output.dense", "bert.encoder.layer.1.output.dense", "bert.pooler.dense", "classifier"]
    assert kept_linears(model, parse_scheme("int8:last")) == [
        n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and n.startswith("bert.encoder.layer.1.")]
    int8 = quantized(model, "int8-channel:ffn-out+head", CPU)
    modules = dict(int8.named_modules())
    for name in ("bert.encoder.layer.0.output.dense", "bert.encoder.layer.1.output.dense", "classifier"):
        assert type(modules[name]) is torch.nn.Linear and modules[name].weight.dtype == torch.float32
    for name in ("bert.encoder.layer.0.intermediate.dense", "bert.encoder.layer.1.attention.self.query"):
        assert type(modules[name]).__module__.startswith("torch.ao.nn.quantized.dynamic")
        assert modules[name].weight().qscheme() == torch.per_channel_affine  # a scale per output row
    per_tensor = dict(quantized(_monobert(tiny_bert), "int8", CPU).named_modules())
    assert per_tensor["classifier"].weight().qscheme() == torch.per_tensor_affine  # one scale for the matrix


def test_scores_stay_within_bounds_of_fp32_and_keeping_every_layer_is_fp32_exactly(tiny_bert, qa_pairs):
    exact = predict(_monobert(tiny_bert), qa_pairs).scores
    errors = {}
    for scheme in ("int8", "int8-channel", "int8-channel:ffn-out+head"):
        scores = predict(quantized(_monobert(tiny_bert), scheme, CPU), qa_pairs).scores
        assert scores != exact                                     # int8 ran
        errors[scheme] = max(abs(a - b) for a, b in zip(scores, exact))
    # the seeded tiny model: int8 2.4e-3, per-channel 1.7e-3, its random head in fp32 too 2e-5 (2026-11-27)
    assert errors["int8"] < 0.01 and errors["int8-channel"] < errors["int8"]
    assert errors["int8-channel:ffn-out+head"] < errors["int8-channel"] / 10
    assert predict(quantized(_monobert(tiny_bert), EVERY_GROUP, CPU), qa_pairs).scores == exact


@pytest.mark.skipif(not VNNI, reason="int8-vnni needs a CPU with VNNI")
def test_int8_vnni_quantises_activations_over_8_bits(tiny_bert, qa_pairs):
    assert parse_scheme("int8-vnni:ffn-out") == Scheme(True, ("ffn-out",), full_range=True)
    exact = predict(_monobert(tiny_bert), qa_pairs).scores
    model = quantized(_monobert(tiny_bert), "int8-vnni", CPU)
    assert type(model.classifier).__name__ == "FullRangeLinear"
    assert model.classifier.weight().qscheme() == torch.per_channel_affine
    scores = predict(model, qa_pairs).scores
    seven_bits = predict(quantized(_monobert(tiny_bert), "int8-channel", CPU), qa_pairs).scores
    assert scores != seven_bits and 0 < max(abs(a - b) for a, b in zip(scores, exact)) < 0.01


def test_int8_vnni_is_refused_on_a_cpu_without_vnni(monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_vnni_supported", lambda: False)
    with pytest.raises(ConfigError, match="needs a CPU with VNNI .* use int8-channel"):
        check_quantize("int8-vnni")


def test_a_token_int8_linear_keeps_each_rows_range_so_an_offset_or_a_neighbour_costs_nothing():
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 32)
    int8 = TokenInt8Linear(linear)
    x = torch.randn(5, 7, 64)                                                        # (batch, tokens, K)
    with torch.no_grad():
        exact, error = linear(x), lambda y, x: (int8(x) - y).abs().max().item()
        plain = error(exact, x)
        assert 0 < plain < 0.02 and int8(x).shape == (5, 7, 32)
        # a row's midpoint is folded through the weight's row sums: an offset of 100 costs almost nothing (a range
        # symmetric about 0 would have spent its 8 bits on -100..100)
        assert error(linear(x + 100), x + 100) < 2 * plain
        # a token with a range 1,000 times wider changes no other token's result
        loud = x.clone()
        loud[0, 0] *= 1000
        assert torch.equal(int8(loud)[1:], int8(x)[1:]) and torch.equal(int8(loud)[0, 1:], int8(x)[0, 1:])


def test_int8_token_runs_every_unkept_linear_per_token_and_stays_close_to_fp32(tiny_bert, qa_pairs):
    exact = predict(_monobert(tiny_bert), qa_pairs).scores
    model = quantized(_monobert(tiny_bert), "int8-token:head", CPU)
    assert type(model.bert.encoder.layer[0].output.dense) is TokenInt8Linear and type(model.classifier) is \
        torch.nn.Linear
    assert is_quantized(model)                                                   # so amp=auto runs no autocast
    scores = predict(model, qa_pairs).scores
    assert scores != exact and max(abs(a - b) for a, b in zip(scores, exact)) < 0.01


def test_smooth_divides_the_layer_norm_fed_inputs_and_multiplies_the_weights_back(tiny_bert, qa_pairs):
    model = _monobert(tiny_bert)
    norms = {name: next(n for n, m in model.named_modules() if m is norm)
             for name, norm in layer_norm_inputs(model).items()}
    assert norms == {
        **{f"bert.encoder.layer.0.attention.self.{p}": "bert.embeddings.LayerNorm" for p in ("query", "key", "value")},
        **{f"bert.encoder.layer.1.attention.self.{p}": "bert.encoder.layer.0.output.LayerNorm"
           for p in ("query", "key", "value")},
        "bert.encoder.layer.0.intermediate.dense": "bert.encoder.layer.0.attention.output.LayerNorm",
        "bert.encoder.layer.1.intermediate.dense": "bert.encoder.layer.1.attention.output.LayerNorm"}
    linear, norm = model.bert.encoder.layer[1].intermediate.dense, model.bert.encoder.layer[1].attention.output.LayerNorm
    with torch.no_grad():
        norm.weight[3] = 40.0                                          # an outlier channel, as trained BERTs have
        scales = smoothing(linear, norm)
        assert scales.shape == (linear.in_features,) and scales.argmax() == 3
        x = norm(torch.randn(4, 9, linear.in_features))
        assert torch.allclose(Smoothed(linear, scales)(x), linear(x), atol=1e-5)  # the same product in fp32
        smoothed = Smoothed(linear, scales)
        smoothed.inner = TokenInt8Linear(smoothed.inner)
        error = lambda int8: (int8(x) - linear(x)).abs().mean().item()  # noqa: E731
        assert error(smoothed) < error(TokenInt8Linear(linear)) / 2   # channel 3 no longer sets every token's range
    exact = predict(_monobert(tiny_bert), qa_pairs).scores
    schemes = ["int8-token-smooth:head", *(["int8-vnni-smooth:head"] if VNNI else [])]
    for scheme, inner in zip(schemes, ("TokenInt8Linear", "FullRangeLinear")):
        layer = quantized(_monobert(tiny_bert), scheme, CPU).bert.encoder.layer[0]
        for module in (layer.attention.self.query, layer.intermediate.dense):
            assert type(module) is Smoothed and type(module.inner).__name__ == inner
        assert type(layer.attention.output.dense).__name__ == type(layer.output.dense).__name__ == inner
        int8 = quantized(_monobert(tiny_bert), scheme, CPU)
        assert max(abs(a - b) for a, b in zip(predict(int8, qa_pairs).scores, exact)) < 0.01


def test_quantize_flag_refuses_a_bad_scheme_with_exit_2(tmp_path, capsys):
    args = ["rerank", "--model", "monobert", "--dataset", "wikiqa/dev", "--output", str(tmp_path / "x.trec")]
    with pytest.raises(SystemExit) as exit_:
        cli([*args, "--quantize", "int8-channel:ffn"])
    assert exit_.value.code == 2 and "unknown layer group 'ffn'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        cli([*args, "--quantize", "int4"])
    assert exit_.value.code == 2 and "the scheme is one of int8, int8-channel" in capsys.readouterr().err


def test_amp_auto_is_bf16_for_inference_on_a_cpu_with_native_bf16_said_once(monkeypatch, caplog, tiny_bert, qa_pairs):
    import pipeline.rerank.scoring as scoring

    monkeypatch.setattr(scoring, "_told_cpu_bf16", False)
    monkeypatch.setattr(scoring, "native_bf16", lambda: False)
    assert scoring.resolve_amp("auto", CPU, inference=True) is None               # fp32 on other CPUs
    monkeypatch.setattr(scoring, "native_bf16", lambda: True)
    assert scoring.resolve_amp("auto", CPU) is None                                # training keeps fp32
    assert scoring.resolve_amp("none", CPU, inference=True) is None
    with caplog.at_level("INFO", logger="irpipe"):
        assert scoring.resolve_amp("auto", CPU, inference=True) == "bf16"
        assert scoring.resolve_amp("auto", CPU, inference=True) == "bf16"
    assert [r.getMessage() for r in caplog.records].count(
        "amp=auto: bf16 autocast on this CPU, which computes bf16 natively (AVX512-BF16 or AMX); --amp none keeps "
        "fp32 (docs/inference.md)") == 1
    model = _monobert(tiny_bert)
    auto = predict(model, qa_pairs).scores                                          # amp="auto", the default
    assert auto == predict(model, qa_pairs, amp="bf16").scores != predict(model, qa_pairs, amp="none").scores
    int8 = quantized(_monobert(tiny_bert), "int8-channel", CPU, amp="auto")        # auto: no autocast on int8
    assert scoring.is_quantized(int8) and not scoring.is_quantized(model)
    assert predict(int8, qa_pairs).scores == predict(int8, qa_pairs, amp="none").scores


def test_late_interaction_scoring_runs_bf16_under_auto_where_the_cpu_has_it_and_stores_stay_fp32(monkeypatch, tiny_bert,
                                                                                             qa_pairs):
    """The bi-encoder's and ADDAX's rerank encodes on the fly: amp="auto" is the precision the stage's fingerprint
    names (bf16 on a CPU with native bf16), as monobert's; a store's encodings are fp32 on any CPU."""
    import pipeline.rerank.scoring as scoring
    from pipeline.rerank.models.biencoder import BiEncoder, BiEncoderConfig
    from pipeline.rerank.store import encode_texts, score_late_interaction

    monkeypatch.setattr(scoring, "native_bf16", lambda: True)
    model = BiEncoder(BiEncoderConfig(bert=str(tiny_bert))).eval()

    def scores(amp):
        return score_late_interaction(model, qa_pairs, None, batch_size=4, device=CPU, amp=amp)
    assert scores("auto") == scores("bf16") != scores("none")
    texts = [pair.text for pair in qa_pairs]
    stored, fp32 = (torch.stack(encode_texts(model, texts, "document", amp=amp)) for amp in ("auto", "none"))
    assert torch.equal(stored, fp32)


def test_amp_auto_keeps_fp32_for_a_model_not_measured_in_bf16(monkeypatch, qa_pairs):
    """HCAN under bf16 autocast ranked TrecQA raw-dev at AP 0.40 against 0.70 in fp32 (an AVX512-BF16 EPYC): amp=auto
    runs bf16 only for the models measured to keep their rankings there (`auto_bf16`: the BERT encoders)."""
    import pipeline.rerank.scoring as scoring
    from pipeline.rerank import models
    from pipeline.rerank.models.hcan.config import HCANConfig
    from pipeline.rerank.models.hcan.network import HCAN

    monkeypatch.setattr(scoring, "native_bf16", lambda: True)
    measured = {name for name in models.model_names() if models.model_class(name).auto_bf16}
    assert measured == {"monobert", "biencoder", "addax", "kwbert"}
    torch.manual_seed(0)
    hcan = HCAN.from_training_data(HCANConfig(embeddings="random", embedding_dim=8, filters=6, max_query_length=12,
                                              max_doc_length=32), [p.query for p in qa_pairs], [p.text for p in qa_pairs])
    assert predict(hcan, qa_pairs).scores == predict(hcan, qa_pairs, amp="none").scores


def test_ray_workers_get_the_drivers_amp_not_their_own_cpus(monkeypatch):
    """The driver keys a stage's cache with amp="auto" resolved on its own CPU; the workers it sends the runtime to
    get that precision, not what "auto" would be on their CPUs (a worker without native bf16 would run fp32)."""
    import pipeline.rerank.scoring as scoring
    from pipeline.engine import EngineOptions
    from pipeline.rerank.on_cluster import worker_runtime
    from pipeline.rerank.scoring import Runtime

    cpu, gpus = EngineOptions("ray"), EngineOptions("ray", gpus_per_worker=1)
    monkeypatch.setattr(scoring, "native_bf16", lambda: True)
    assert worker_runtime(Runtime(), cpu).amp == "bf16"                               # scoring, on this CPU
    assert worker_runtime(Runtime(), cpu, inference=False).amp == "none"              # encoding stores: fp32
    assert worker_runtime(Runtime(quantize="int8"), cpu).amp == "none"                # int8: no autocast
    assert worker_runtime(Runtime(amp="fp16"), cpu).amp == "fp16"                     # asked for: as asked
    monkeypatch.setattr(scoring, "native_bf16", lambda: False)
    assert worker_runtime(Runtime(), cpu).amp == "none"
    assert worker_runtime(Runtime(), gpus).amp == worker_runtime(Runtime(), gpus, inference=False).amp == "bf16"


@pytest.mark.skipif(not Path("/proc/cpuinfo").is_file(), reason="reads Linux's /proc/cpuinfo")
def test_native_bf16_agrees_with_the_cpu_flags():
    import pipeline.rerank.scoring as scoring

    flags = set(Path("/proc/cpuinfo").read_text().split("\n\n")[0].split())
    assert scoring.torch_native_bf16() == bool(flags & {"avx512_bf16", "amx_bf16"})

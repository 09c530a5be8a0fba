"""The CPU runtimes a cross-encoder is deployed on, each built from the same weights (sentence-transformers'
CrossEncoder holding monobert's, bench/_inference_models.py) and each a function pairs -> raw scores (z_rel - z_nonrel,
no sigmoid), for bench/cpu_peers.py.

Every peer is fed as its own users feed it: the CrossEncoder's tokenizer (query, passage) truncated to max_length,
batches of 32 pairs sorted by characters (CrossEncoder.predict's defaults), each padded to its longest pair.
- crossencoder / crossencoder-bf16 / crossencoder-bf16-compiled: `CrossEncoder.predict`, plain, under
  `torch.autocast("cpu", torch.bfloat16)`, and so with its model's forward through torch.compile;
- ort-fp32: the classifier exported by `torch.onnx.export` and run by ONNX Runtime (graph optimisations on: the
  transformer fusions it applies by itself); ort-int8: that graph through `onnxruntime.quantization.quantize_dynamic`
  (int8 weights, activations quantised per batch: what optimum's dynamic ORTQuantizer calls);
- ov-fp32 / ov-bf16: the torch module converted by `openvino.convert_model` and compiled for the CPU with that
  inference precision; ov-int8: its weights compressed to int8 by `nncf.compress_weights` (optimum-intel's
  `--weight-format int8`), compiled in fp32;
- ct2-int8 / ct2-bf16: CTranslate2's `Encoder` on the converted BERT, the classifier head applied to its pooler
  output in numpy.
sentence-transformers' own `backend="onnx"|"openvino"` needs optimum-onnx / optimum-intel[openvino], whose releases
pin transformers < 5 (this project has 5.x), so the same runtimes are driven directly here.
A runtime that fails to load is a row with the reason, not a crash (`PEER_ERRORS`)."""
from __future__ import annotations

import tempfile
from pathlib import Path

PEERS = ("crossencoder", "crossencoder-bf16", "crossencoder-bf16-compiled", "ort-fp32", "ort-int8", "ov-fp32",
         "ov-bf16", "ov-int8", "ct2-int8", "ct2-bf16")
BATCH = 32                                                             # CrossEncoder.predict's default batch size


def batches(pairs: list, size: int = BATCH) -> tuple[list[int], list[list[int]]]:
    """The order CrossEncoder.predict scores pairs in (longest in characters first) and its batches of `size`."""
    order = sorted(range(len(pairs)), key=lambda i: -(len(pairs[i].query) + len(pairs[i].text)))
    return order, [order[i:i + size] for i in range(0, len(order), size)]


def _batched(tokenizer, max_length: int, run_batch):
    """pairs -> scores in input order, `run_batch(encoded numpy batch)` -> (B,) scores over CrossEncoder's batches."""
    def scores(pairs: list) -> list[float]:
        out = [0.0] * len(pairs)
        for chunk in batches(pairs)[1]:
            encoded = tokenizer([pairs[i].query for i in chunk], [pairs[i].text for i in chunk], padding=True,
                                truncation="longest_first", max_length=max_length, return_tensors="np")
            for i, value in zip(chunk, run_batch(encoded)):
                out[i] = float(value)
        return out
    return scores


def _crossencoder(ce, bf16: bool):
    import torch

    def scores(pairs: list) -> list[float]:
        texts = [(p.query, p.text) for p in pairs]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            values = ce.predict(texts, show_progress_bar=False, activation_fn=torch.nn.Identity(),
                                convert_to_numpy=True)
        return [float(v) for v in values]
    return scores


def _compiled_copy(ce):
    """A copy of CrossEncoder `ce` whose model's forward runs through torch.compile as irpipe's compile=true does
    (pipeline/rerank/scoring.py `compiled`, the same settings): what a user of sentence-transformers can do too."""
    import copy

    from pipeline.rerank.scoring import compiled

    ce = copy.deepcopy(ce)
    compiled(ce.model)
    return ce


INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _example(ce):
    return dict(ce.tokenizer(["a query"], ["a passage"], return_tensors="pt"))


def positional_module(hf, pick):
    """An HF model as a torch module of positional inputs (input_ids, attention_mask, token_type_ids) returning
    `pick(its outputs)`: what the exporters trace."""
    import torch

    class Positional(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hf = hf

        def forward(self, input_ids, attention_mask, token_type_ids):
            return pick(self.hf(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids))
    return Positional().eval()


def _logits_module(hf):
    """The HF classifier's (B,) logit."""
    return positional_module(hf, lambda outputs: outputs.logits[:, 0])


def onnx_export(module, example: tuple, path: Path, output: str, output_axes: dict) -> Path:
    """`module` (positional INPUTS) exported to `path` by `torch.onnx.export`, opset 17, batch and length dynamic."""
    import torch

    with torch.no_grad():
        torch.onnx.export(module, example, str(path), input_names=list(INPUTS), output_names=[output],
                          opset_version=17, dynamo=False,
                          dynamic_axes={k: {0: "batch", 1: "length"} for k in INPUTS} | {output: output_axes})
    return path


def ort_session(path: Path, threads: int):
    """An ONNX Runtime CPU session on `threads` intra-op threads, every graph optimisation on."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def openvino_compiled(module, example, threads: int, precision: str, int8: bool = False):
    """`module` converted by `openvino.convert_model` (weights compressed to int8 by nncf with `int8`) and compiled
    for the CPU at inference `precision` ("f32" or "bf16") on `threads` threads, for latency."""
    import openvino as ov
    import torch

    with torch.no_grad():
        model = ov.convert_model(module, example_input=example)
    if int8:
        import nncf

        model = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM)
    return ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": precision,
                                                  "INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"})


def _ort(ce, folder: Path, threads: int, int8: bool):
    path = folder / "model.onnx"
    if not path.is_file():                                             # made once per run
        example = _example(ce)
        onnx_export(_logits_module(ce[0].model.eval()), tuple(example[k] for k in INPUTS), path, "logits",
                    {0: "batch"})
    if int8:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantized = folder / "model-int8.onnx"
        quantize_dynamic(str(path), str(quantized), weight_type=QuantType.QInt8)
        path = quantized
    session = ort_session(path, threads)
    return _batched(ce.tokenizer, ce.max_length,
                    lambda encoded: session.run(["logits"], {k: encoded[k].astype("int64") for k in INPUTS})[0])


def _openvino(ce, threads: int, precision: str, int8: bool):
    compiled = openvino_compiled(_logits_module(ce[0].model.eval()), _example(ce), threads, precision, int8)
    return _batched(ce.tokenizer, ce.max_length,
                    lambda encoded: compiled({k: encoded[k].astype("int64") for k in INPUTS})[0])


def _ctranslate2(ce, folder: Path, threads: int, compute_type: str):
    import ctranslate2
    import numpy as np

    hf = ce[0].model
    converted = folder / "ct2"
    if not converted.is_dir():
        source = folder / "hf"
        hf.bert.save_pretrained(source)                                 # BertModel: the encoder CTranslate2 converts
        ce.tokenizer.save_pretrained(source)
        ctranslate2.converters.TransformersConverter(str(source)).convert(str(converted), force=True)
    encoder = ctranslate2.Encoder(str(converted), device="cpu", compute_type=compute_type, intra_threads=threads)
    weight = hf.classifier.weight.detach().float().numpy()[0]          # (H,)
    bias = float(hf.classifier.bias.detach().float()[0])

    def run_batch(encoded) -> list[float]:
        lengths = encoded["attention_mask"].sum(1)
        ids = [row[:n].tolist() for row, n in zip(encoded["input_ids"], lengths)]
        types = [row[:n].tolist() for row, n in zip(encoded["token_type_ids"], lengths)]
        output = encoder.forward_batch(ids, token_type_ids=types)
        pooled = np.asarray(output.pooler_output, dtype=np.float32)     # (B, H): tanh(W h_[CLS] + b)
        return list(pooled @ weight + bias)
    return _batched(ce.tokenizer, ce.max_length, run_batch)


def peer_scorers(ce, peers: list[str], threads: int) -> tuple[dict, dict]:
    """(peer -> scorer, peer -> why it did not load) for each of `peers`, built from CrossEncoder `ce`; the exported
    files live in a scratch folder removed once every runtime has loaded its model into memory."""
    with tempfile.TemporaryDirectory(prefix="irpipe-peers-") as scratch:
        return _built(ce, peers, threads, Path(scratch))


def _built(ce, peers: list[str], threads: int, folder: Path) -> tuple[dict, dict]:
    build = {"crossencoder": lambda: _crossencoder(ce, bf16=False),
             "crossencoder-bf16": lambda: _crossencoder(ce, bf16=True),
             "crossencoder-bf16-compiled": lambda: _crossencoder(_compiled_copy(ce), bf16=True),
             "ort-fp32": lambda: _ort(ce, folder, threads, int8=False),
             "ort-int8": lambda: _ort(ce, folder, threads, int8=True),
             "ov-fp32": lambda: _openvino(ce, threads, "f32", int8=False),
             "ov-bf16": lambda: _openvino(ce, threads, "bf16", int8=False),
             "ov-int8": lambda: _openvino(ce, threads, "f32", int8=True),
             "ct2-int8": lambda: _ctranslate2(ce, folder, threads, "int8"),
             "ct2-bf16": lambda: _ctranslate2(ce, folder, threads, "bfloat16")}
    scorers, errors = {}, {}
    for peer in peers:
        try:
            scorers[peer] = build[peer]()
        except Exception as error:  # noqa: BLE001 -- a runtime that cannot load this model is a row, not a crash
            errors[peer] = f"{type(error).__name__}: {str(error)[:300]}"
    return scorers, errors

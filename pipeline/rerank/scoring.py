"""Running a model: devices, autocast, int8 quantisation, and batched scoring of pairs (`predict`) shared by
reranking and training.

`predict` scores pairs through the one batched path (pipeline/rerank/batching.py): sorted by length (the model's
`input_lengths`, word pieces for the BERT models), cut into batches of at most `batch_size` pairs and
`batch_tokens` padded positions, tokenised on a background thread while the model computes, scores gathered on the
device and copied back once, in input order; a CUDA out-of-memory halves the batch. The model is told the batches
first (`plan_batches`: MRNN keeps a text's maps only while a later batch needs them). It runs in eval mode under
`torch.inference_mode` (and autocast: `amp`, by default bf16 on CUDA and on a CPU with native bf16, none on other
CPUs and for a quantised model or `with_loss`), counts the pairs the
model had to truncate, and, with `with_loss=True`, also returns the mean of the model's own loss over labelled
pairs (dev loss; pairs of one query form one group).

How a model runs (not what it computes) is a `Runtime`: batch limits, device, autocast, int8 quantisation (CPU:
`quantize="int8"` or another scheme of pipeline/rerank/quantize.py, the linear layers dynamically quantised), threads.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from pipeline.declared import option
from pipeline.errors import ConfigError
from pipeline.log import logger
from pipeline.rerank.batching import PREFETCH, batch_limits, group_cuts, group_order, in_input_order, run_batches
from pipeline.rerank.model import Batch, RerankModel
from pipeline.rerank.pairs import Pair
from pipeline.rerank.quantize import TokenInt8Linear, parse_scheme, quantize_linears

AMP_DTYPES = ("bf16", "fp16")
AMP_CHOICES = ("auto", "none", *AMP_DTYPES)   # auto: bf16 on CUDA and on a CPU with native bf16, else none
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class Runtime:
    """How a model runs (not what it computes): at most `batch_size` pairs and `batch_tokens` padded positions a
    batch (None: the device's defaults, pipeline/rerank/batching.py `batch_limits`), device ("auto": CUDA when
    present), autocast ("auto": bf16 on CUDA and, for inference, on a CPU with native bf16; else none), int8 quantisation (CPU), torch CPU threads (None:
    torch's default)."""

    batch_size: int | None = option(None, "pairs a batch at most; none: the device's default (batching.py)",
                                    at_least=1, integer=True, optional=True)
    device: str = option("auto", "auto: CUDA when present; cpu, cuda, cuda:N", check=lambda owner, v: check_device(v))
    amp: str | None = option("auto", "autocast: auto (bf16 on CUDA and, for inference, on a CPU with native bf16, "
                             "else none), none, bf16, fp16; changes scores a little",
                             check=lambda owner, v: check_amp(v))
    threads: int | None = option(None, "torch CPU threads; none: torch's default (all cores)", at_least=1,
                                 integer=True, optional=True)
    batch_tokens: int | None = option(None, "padded positions a batch at most; 0: no budget; none: the device's "
                                      "default", at_least=0, integer=True, optional=True)
    quantize: str | None = option(None, "an int8 scheme of the linear layers (quantize.py), CPU; changes scores a "
                                  "little", check=lambda owner, v: check_quantize(v))
    compile: bool = option(False, "torch.compile the model's forward (inductor, dynamic shapes): tens of seconds to "
                           "compile a process, then a few percent faster on a 2-core CPU; moves bf16 scores a little "
                           "(docs/inference.md)")

    def start(self) -> torch.device:
        """Set the thread count; the device to run on."""
        if self.threads:
            torch.set_num_threads(self.threads)
        return resolve_device(self.device)

    def place(self, model: RerankModel, device: torch.device) -> RerankModel:
        """`model` on `device`, int8-quantised when asked (for inference only), its forward compiled when asked."""
        model = quantized(model.to(device), self.quantize, device, self.amp)
        return compiled(model) if self.compile else model


def resolve_device(device: str = "auto") -> torch.device:
    """"auto": the first CUDA device when there is one, else the CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError:
        raise ConfigError(f"unknown device {device!r}; expected auto, cpu, cuda or cuda:N", field="device") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} asked for, but torch sees no CUDA device here; use device=cpu or auto",
                          field="device")
    return resolved


def check_device(device: str) -> str:
    """auto, cpu, cuda or cuda:N (a ConfigError naming the choices else)."""
    if device not in DEVICES and not str(device).startswith("cuda:"):
        raise ConfigError(f"device={device!r}; choose one of auto, cpu, cuda, cuda:N", field="device")
    return device


def check_amp(amp: str | None) -> str:
    """"auto" (not given: None, "" or "auto"), "none" (off: "none", "no", false) or a dtype (bf16, fp16)."""
    if amp in (None, "", "auto"):
        return "auto"
    if amp in ("none", "no", False):
        return "none"
    if amp not in AMP_DTYPES:
        raise ConfigError(f"amp={amp!r}; choose one of {', '.join(AMP_CHOICES)}", field="amp")
    return amp


def native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX tiles), as torch's own CPU checks see it (the
    test suite sets it false, so that its fp32 expectations hold on any CPU)."""
    return torch_native_bf16()


def torch_native_bf16() -> bool:
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


_told_cpu_bf16 = False


def resolve_amp(amp: str | None, device: torch.device, inference: bool = False) -> str | None:
    """The autocast dtype a model runs under (None: none). "auto" is bf16 on CUDA; on the CPU it is none, except
    for `inference` on a CPU with native bf16 (`native_bf16`), where bf16 is the fast mode that keeps the ranking
    to bf16's rounding (docs/inference.md: DL19/DL20 nDCG@10 within 0.001 of fp32 on AMX and on 10 queries each on
    AVX512-BF16, +0.0021 / -0.0016 on all 43 / 54; without native bf16 it is slower than fp32): said
    once in the log. `inference` is false for a model not measured to keep its ranking in bf16 (RerankModel
    `auto_bf16`), and in training and the pretraining loop: fp32 on any CPU. "none" is off."""
    global _told_cpu_bf16
    amp = check_amp(amp)
    if amp != "auto":
        return None if amp == "none" else amp
    if device.type == "cuda":
        return "bf16"
    if not (inference and native_bf16()):
        return None
    if not _told_cpu_bf16:
        _told_cpu_bf16 = True
        logger.info("amp=auto: bf16 autocast on this CPU, which computes bf16 natively (AVX512-BF16 or AMX); "
                    "--amp none keeps fp32 (docs/inference.md)")
    return "bf16"


def is_quantized(model: torch.nn.Module) -> bool:
    """Whether `model` has int8 linear layers (torch's dynamic ones or int8-token's): amp="auto" then runs no
    autocast."""
    from torch.ao.nn.quantized.dynamic import Linear

    return any(isinstance(m, (Linear, TokenInt8Linear)) for m in model.modules())


def autocast(device: torch.device, amp: str | None):
    """torch.autocast for `amp` (a dtype) on `device`, or a no-op context (None, "none"; "auto" too: resolve it
    first with `resolve_amp`). fp16 needs CUDA; bf16 works on both."""
    if check_amp(amp) in ("none", "auto"):
        return contextlib.nullcontext()
    if amp == "fp16" and device.type != "cuda":
        raise ConfigError("fp16 autocast needs a CUDA device; use amp=bf16 or no amp on the CPU", field="amp")
    return torch.autocast(device.type, dtype=torch.bfloat16 if amp == "bf16" else torch.float16)


def check_quantize(quantize: str | None) -> str | None:
    """None (not given: None, "", "none", false) or an int8 scheme (a ConfigError naming the choices else)."""
    if quantize in (None, "", "none", False):
        return None
    parse_scheme(quantize)
    return quantize


def quantized(model: RerankModel, quantize: str | None, device: torch.device, amp: str | None = None) -> RerankModel:
    """`model` with its linear layers dynamically quantised to int8 as scheme `quantize` says (weights int8,
    activations quantised per batch; pipeline/rerank/quantize.py), in place, for CPU inference; unchanged when
    `quantize` is None."""
    if check_quantize(quantize) is None:
        return model
    if device.type != "cpu":
        raise ConfigError(f"quantize={quantize} is for the CPU (int8 linears); on CUDA use amp=bf16", field="quantize")
    if resolve_amp(amp, device) is not None:
        raise ConfigError(f"quantize={quantize} runs the linear layers in int8: it does not combine with amp={amp}",
                          field="quantize")
    return quantize_linears(model, quantize)


def compiled(model: torch.nn.Module) -> torch.nn.Module:
    """`model` with its forward compiled by torch.compile (inductor; dynamic shapes, so batches of other lengths do not
    compile again): the same module in place, every method and attribute as before. Only `forward` changes: a model
    scored by its own encoders (late interaction) is not compiled (the stage refuses compile= for it). The CPU
    benchmark compiles its CrossEncoder peer's model through here too, so both sides compile alike."""
    model.forward = torch.compile(model.forward, dynamic=True)
    return model


def labelled(batch: Batch, device: torch.device | str, groups: list[int] | None = None) -> Batch:
    """`batch` with its pairs' labels and groups (what a pairwise loss compares) as tensors; default groups: one
    per query, numbered in order of appearance."""
    if groups is None:
        numbers: dict[str, int] = {}
        groups = [numbers.setdefault(p.qid, len(numbers)) for p in batch.pairs]
    batch.labels = torch.tensor([p.label for p in batch.pairs], dtype=torch.float32, device=device)
    batch.groups = torch.tensor(groups, device=device)
    return batch


@dataclass
class Scored:
    """What `predict` returns: one score per pair (input order), how many pairs were truncated, and the mean loss
    (with_loss) and its parts."""

    scores: list[float]
    truncated: int
    loss: float | None = None
    loss_parts: dict[str, float] | None = None


def scoring_batches(model: RerankModel, pairs: list[Pair], batch_size: int,
                    batch_tokens: int) -> tuple[list[int], list[slice]]:
    """The order `predict` scores `pairs` in (query by query, each query's pairs longest first, by the model's
    `input_lengths`) and its batches (slices of that order, never two queries in one): the ray engine cuts its
    shards from them."""
    lengths = model.input_lengths(pairs)
    order = pair_order(pairs, lengths)
    return order, query_batches(pairs, order, lengths, batch_size, batch_tokens)


def pair_order(pairs: list[Pair], lengths: list[int]) -> list[int]:
    """Query by query (in order of first appearance), each query's pairs longest first, pairs of one length by
    document id: a query's batches and each pair's row in its batch are the same whatever order its candidates come
    in (a compiled graph's or GEMM's kernels may round a row by its place)."""
    return group_order([pair.qid for pair in pairs], lengths, [pair.docid for pair in pairs])


def query_batches(pairs: list[Pair], order: list[int], lengths: list[int], batch_size: int,
                  batch_tokens: int) -> list[slice]:
    """The batches of `pairs` taken in `order`: `batch_cuts` within each query's run of pairs. A batch holds one
    query's pairs, the same ones whichever queries are scored with it, so each pair's score is computed by the same
    kernels on the same rows: a score is a function of the query, its candidates and the model, bit for bit."""
    return group_cuts([pairs[i].qid for i in order], [lengths[i] for i in order], batch_size, batch_tokens)


def predict(model: RerankModel, pairs: list[Pair], batch_size: int | None = None,
            device: torch.device | str = "cpu", amp: str | None = "auto", with_loss: bool = False,
            desc: str = "scoring", order: list[int] | None = None, batch_tokens: int | None = None,
            prefetch: int = PREFETCH) -> Scored:
    """Score pairs with `model` in length-sorted batches of one query each (`order`, default `scoring_batches`'
    order, cut by `query_batches`; limits None: the device's defaults; batch_tokens 0: no budget), in eval mode and under
    inference_mode (see the module docstring)."""
    device = torch.device(device) if isinstance(device, str) else device
    batch_size, batch_tokens = batch_limits(device, batch_size, batch_tokens)
    lengths = model.input_lengths(pairs)
    order = pair_order(pairs, lengths) if order is None else order
    cuts = query_batches(pairs, order, lengths, batch_size, batch_tokens)
    truncated = 0

    def prepare(chunk: list[Pair]) -> Batch:
        batch = model.prepare(chunk)
        return labelled(batch, "cpu") if with_loss else batch

    def compute(batch: Batch):
        nonlocal truncated
        cut, batch = batch.truncated, batch.to(device, non_blocking=True)
        output = model(**batch.tensors)
        scores = model.score(output).float()                                  # (B,), left on the device
        if with_loss:
            loss, size = model.loss(output, batch), len(batch.pairs)
            scores = scores, loss.total.detach().float() * size, {k: v.detach().float() * size
                                                                  for k, v in loss.parts.items()}
        truncated += cut  # once the batch is scored (a batch cut in halves after running out of memory counts once)
        return scores

    model.eval().to(device)
    model.plan_batches([pairs[i] for i in order[cut]] for cut in cuts)
    amp = resolve_amp(amp, device, inference=not with_loss and not is_quantized(model) and model.auto_bf16)
    with torch.inference_mode(), autocast(device, amp):
        pieces = run_batches(pairs, order, cuts, prepare, compute, device, desc=desc, unit="pair", prefetch=prefetch,
                             lengths=lengths)
    if not with_loss:
        return Scored(in_input_order(pieces, len(pairs)).cpu().tolist(), truncated)
    scores = in_input_order([(indices, out[0]) for indices, out in pieces], len(pairs)).cpu().tolist()
    if not pairs:
        return Scored(scores, truncated)
    loss = float(sum(out[1] for _, out in pieces)) / len(pairs)
    parts = {name: float(sum(out[2][name] for _, out in pieces)) / len(pairs) for name in pieces[0][1][2]}
    return Scored(scores, truncated, loss, parts)

"""What the inference benchmarks share (inference_speed.py on the CPU, _inference_gpu.py on a GPU): the CPU's name,
monobert (a checkpoint, or MiniLM with a seeded head), sentence-transformers' CrossEncoder with monobert's weights,
and the pairs of a DL dataset's shipped top-100."""
from __future__ import annotations

from pathlib import Path


def _cpu_fields() -> dict[str, str] | None:
    """CPU 0's fields of /proc/cpuinfo (name -> value), or None without it."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.split("\n\n")[0].splitlines() if ":" in line)  # CPU 0
    return {k.strip(): v.strip() for k, v in fields.items()}


def cpu_name() -> str:
    """The CPU's model name and the vector extensions that decide bf16 / int8 speed, from /proc/cpuinfo."""
    fields = _cpu_fields()
    if fields is None:
        import platform

        return platform.processor() or "unknown CPU"
    flags = set(fields.get("flags", "").split())
    extensions = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8") if f in flags]
    return (f"{fields.get('model name', 'unknown')} (family {fields.get('cpu family', '?')} model "
            f"{fields.get('model', '?')}; {', '.join(extensions) or 'no AVX2'})")


def encoder_flops(lengths, hidden: int, inner: int, layers: int) -> float:
    """FLOPs of a full BERT pass over inputs of `lengths` word pieces: per layer 2 n (4 H^2 + 2 H I) for the linear
    layers and 4 n^2 H for attention scores and sums (embeddings, pooler and heads are negligible)."""
    return sum(layers * (2 * n * (4 * hidden * hidden + 2 * hidden * inner) + 4 * n * n * hidden) for n in lengths)


def model_flops(model, pairs) -> float:
    """FLOPs of a full pass of `model`'s BERT over each pair's real word pieces (`encoder_flops`)."""
    config = model.bert.config
    return encoder_flops(model.input_lengths(pairs), config.hidden_size, config.intermediate_size,
                         config.num_hidden_layers)


def fp32_peak_flops(threads: int) -> tuple[float | None, str]:
    """An estimate of `threads` cores' fp32 peak: cores x /proc/cpuinfo's "cpu MHz" x FLOPs per cycle of two FMA
    units at the width the core executes (`_fma_width`: 512-bit FMAs 64, 256-bit 32); with how it was estimated.
    None without /proc/cpuinfo. An upper bound: the clock under an all-core AVX load is often lower than the one
    reported."""
    fields = _cpu_fields()
    if fields is None:
        return None, "no /proc/cpuinfo"
    per_cycle = 2 * 2 * _fma_width(fields) // 32                         # 2 FMA units x 2 FLOPs x fp32 lanes
    mhz = float(fields.get("cpu MHz", 0) or 0)
    if not mhz:
        return None, "no cpu MHz in /proc/cpuinfo"
    return threads * mhz * 1e6 * per_cycle, f"{threads} core(s) x {mhz:.0f} MHz x {per_cycle} fp32 FLOP/cycle"


def _fma_width(fields: dict[str, str]) -> int:
    """The bits an FMA unit multiplies at once: 512 with AVX-512, but on AMD Zen 4 (family 25, `avx512f` in its flags)
    which splits a 512-bit FMA over its 256-bit units; 256 with AVX2 and FMA; else 64."""
    flags = set(fields.get("flags", "").split())
    if "avx512f" in flags:
        return 256 if (fields.get("vendor_id"), fields.get("cpu family")) == ("AuthenticAMD", "25") else 512
    return 256 if {"avx2", "fma"} <= flags else 64


def achieved(flops: float, seconds: float | None, peak: float | None) -> tuple[float | None, float | None]:
    """(GFLOP/s, share of `peak`) of `flops` done in `seconds`: None where either is unknown."""
    if not seconds:
        return None, None
    rate = flops / seconds
    return round(rate / 1e9, 1), round(rate / peak, 3) if peak else None


def peak_fields(threads: int) -> tuple[float | None, dict]:
    """(the fp32 peak estimate of `threads` cores, the record's fields that state it)."""
    peak, how = fp32_peak_flops(threads)
    return peak, {"fp32_peak_gflops": round(peak / 1e9, 1) if peak else None, "peak_estimate": how}


def default_tokenizer():
    """The tokenizer of the default BERT (all-MiniLM-L6-v2: the bi-encoder's, ADDAX's and monobert's)."""
    from transformers import AutoTokenizer

    from pipeline.rerank.bert import DEFAULT_BERT, bert_folder

    return AutoTokenizer.from_pretrained(str(bert_folder(DEFAULT_BERT)))


def default_encoder_flops(lengths) -> float:
    """`encoder_flops` at the default BERT's shape, read from its config (MiniLM-L6: H 384, I 1536, 6 layers)."""
    from transformers import AutoConfig

    from pipeline.rerank.bert import DEFAULT_BERT, bert_folder

    config = AutoConfig.from_pretrained(str(bert_folder(DEFAULT_BERT)))
    return encoder_flops(lengths, config.hidden_size, config.intermediate_size, config.num_hidden_layers)


def load_monobert(checkpoint: str | None, max_length: int):
    """A trained monobert checkpoint, else monobert on all-MiniLM-L6-v2 with a seeded head."""
    import torch

    from pipeline.rerank.checkpoint import load_checkpoint
    from pipeline.rerank.models.monobert import MonoBERT, MonoBERTConfig

    if checkpoint:
        return load_checkpoint(checkpoint).eval()
    torch.manual_seed(0)
    return MonoBERT(MonoBERTConfig(max_length=max_length)).eval()


def cross_encoder(model, device: str = "cpu", dtype=None):
    """sentence-transformers' CrossEncoder on all-MiniLM-L6-v2's folder, num_labels=1, with `model`'s weights."""
    import torch
    from sentence_transformers import CrossEncoder

    from pipeline.errors import ConfigError
    from pipeline.rerank.bert import DEFAULT_BERT, bert_folder

    if (model.config.pooling, model.config.score) != ("pooler", "logit"):
        raise ConfigError("the CrossEncoder comparison needs monobert with pooling=pooler and score=logit")
    kwargs = {"model_kwargs": {"dtype": dtype}} if dtype is not None else {}
    ce = CrossEncoder(str(bert_folder(DEFAULT_BERT)), num_labels=1, max_length=model.config.max_length,
                      device=device, **kwargs)
    hf = ce[0].model                                                   # BertForSequenceClassification
    hf.bert.load_state_dict(model.bert.state_dict())
    weight, bias = model.classifier.weight.detach(), model.classifier.bias.detach()
    with torch.no_grad():
        hf.classifier.weight.copy_((weight[1] - weight[0])[None])      # (1, H): z_rel - z_nonrel
        hf.classifier.bias.copy_((bias[1] - bias[0])[None])
    return ce


def dl_pairs(name: str, queries: int | None = None):
    """A DL dataset and the pairs of its shipped top-100; with `queries` (N), of its first N judged queries only."""
    from pipeline.data.registry import get_dataset
    from pipeline.rerank.pairs import pairs_of

    dataset = get_dataset(name)
    run = dataset.run()
    pairs = pairs_of(dataset.topics(), run, run.texts)
    if queries is not None:
        judged = dataset.qrels()                                       # qid -> docid -> label
        kept = set([qid for qid in dict.fromkeys(p.qid for p in pairs) if qid in judged][:queries])
        pairs = [p for p in pairs if p.qid in kept]
    return dataset, pairs

"""int8 schemes for CPU inference: which linear layers run in int8, with what weight scales and activation range.

A scheme is a name (`int8`, `int8-channel`, `int8-vnni`, `int8-token`, and the last two with `-smooth`), optionally
followed by `:` and the groups of linear layers kept in fp32, joined by `+`: `int8-channel:ffn-out+head`. Every other
`nn.Linear` runs in int8. int8, int8-channel and int8-vnni are torch's dynamic quantisation
(`torch.ao.quantization.quantize_dynamic`: int8 weights, a batch's activations quantised with one scale from their
min and max, so a pair's score depends on its batch neighbours):

    int8           weights one scale per matrix (per tensor), as `quantize=int8` always was
    int8-channel   weights one scale per output channel (per_channel_dynamic_qconfig)
    int8-vnni      as int8-channel, and activations over all 8 bits (0..255): torch's dynamic linear keeps them to
                   7 (reduce_range), as fbgemm's AVX2 kernel sums pairs of u8 x s8 products in 16 bits, which can
                   saturate; AVX512-VNNI / AVX-VNNI sum in 32 bits, so only a CPU with VNNI takes this scheme
    int8-token     weights per output channel (symmetric, -127..127); activations per token (each row of the
                   batch gets its own range, min..max over 8 bits: the zero point is the row's midpoint, folded
                   back through the weight's row sums), multiplied by oneDNN's int8 GEMM (`torch._int_mm`, exact
                   int32 sums). A token's range no longer depends on the other tokens of its batch: an outlier token
                   costs only its own row's precision. The (de)quantisation around the GEMM runs as separate torch
                   operations, not fused into it as fbgemm's is: on the 2-core Xeon of docs/inference.md it is
                   1.3x fp32, a little under int8-vnni
    -smooth        (int8-vnni-smooth, int8-token-smooth) the linears that read a LayerNorm (BERT's qkv and
                   ffn-in) smoothed first (SmoothQuant, Xiao et al. 2023, alpha 0.5): an input channel j is divided by
                   s_j = sqrt(max|x_j| / max_n |W_nj|) and the weight's column multiplied by it (the product is the
                   same; the activations' outlier channels shrink, the weight takes a share). max|x_j| is not
                   calibrated on data but read from the LayerNorm's own parameters, |beta_j| + 6 |gamma_j| (its
                   output is gamma * z + beta with z normalised): no sample, the same scales for every run

Groups (BERT's module names; a model without such a layer keeps nothing for that group):

    ffn-out    each layer's feed-forward output (`encoder.layer.N.output.dense`, its input is GELU's, with outliers)
    ffn-in     each layer's feed-forward input (`intermediate.dense`)
    attn-out   each layer's attention output (`attention.output.dense`)
    qkv        each layer's query, key and value
    head       what follows the encoder (the pooler, the classifier: any linear outside `encoder.layer`)
    first      every linear of the first layer
    last       every linear of the last layer
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

import torch

from pipeline.errors import ConfigError

BASES = {"int8": {}, "int8-channel": {"per_channel": True},   # Scheme's fields for each base name
         "int8-vnni": {"per_channel": True, "full_range": True},
         "int8-token": {"per_channel": True, "full_range": True, "per_token": True},
         "int8-vnni-smooth": {"per_channel": True, "full_range": True, "smooth": True},
         "int8-token-smooth": {"per_channel": True, "full_range": True, "per_token": True, "smooth": True}}
SMOOTH_ALPHA, LAYER_NORM_REACH = 0.5, 6.0   # -smooth: s_j = max|x_j|^a / max|W_j|^(1-a); max|x_j| ~ |b| + 6|g|
_LAYER = re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\.(.+)$")
GROUPS = {
    "ffn-out": lambda index, rest, last: rest == "output.dense",
    "ffn-in": lambda index, rest, last: rest == "intermediate.dense",
    "attn-out": lambda index, rest, last: rest == "attention.output.dense",
    "qkv": lambda index, rest, last: rest.startswith("attention.self."),
    "first": lambda index, rest, last: index == 0,
    "last": lambda index, rest, last: index == last,
}


@dataclass(frozen=True)
class Scheme:
    """A parsed scheme: per-channel weight scales or not, the groups of linears kept in fp32, whether activations
    use all 8 bits, whether they are scaled per token (int8-token) rather than per batch, and whether the linears
    that read a LayerNorm are smoothed first (-smooth)."""

    per_channel: bool = False
    keep: tuple[str, ...] = ()
    full_range: bool = False
    per_token: bool = False
    smooth: bool = False

    def kept(self, name: str, last_layer: int) -> bool:
        """Whether the linear layer `name` (a `named_modules` name) stays fp32."""
        match = _LAYER.search(name)
        if match is None:
            return "head" in self.keep
        index, rest = int(match.group(1)), match.group(2)
        return any(GROUPS[group](index, rest, last_layer) for group in self.keep if group != "head")


def parse_scheme(value: str, field: str = "quantize") -> Scheme:
    """"int8-channel:ffn-out+head" -> Scheme(True, ("ffn-out", "head")); a ConfigError naming the choices else."""
    base, colon, groups = str(value).partition(":")
    if base not in BASES:
        raise ConfigError(f"{field}={value!r}: the scheme is one of {', '.join(BASES)} (then optionally "
                          f"':' and layers kept in fp32, joined by '+': {', '.join([*GROUPS, 'head'])})", field=field)
    keep = tuple(groups.split("+")) if colon else ()
    unknown = [g for g in keep if g not in GROUPS and g != "head"]
    if unknown:
        raise ConfigError(f"{field}={value!r}: unknown layer group {unknown[0]!r}; choose from "
                          f"{', '.join([*GROUPS, 'head'])}", field=field)
    scheme = Scheme(keep=keep, **BASES[base])
    if scheme.full_range and not scheme.per_token and not torch.cpu._is_vnni_supported():
        raise ConfigError(f"{field}={value!r} needs a CPU with VNNI (AVX512-VNNI or AVX-VNNI), which this one lacks: "
                          "use int8-channel (activations in 7 bits)", field=field)
    return scheme


def kept_linears(model: torch.nn.Module, scheme: Scheme) -> list[str]:
    """The names of `model`'s linear layers that `scheme` keeps in fp32."""
    names = [name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)]
    layers = [int(m.group(1)) for m in map(_LAYER.search, names) if m]
    last = max(layers, default=-1)
    return [name for name in names if scheme.kept(name, last)]


def _full_range_linear():
    """torch's dynamic int8 linear with activations quantised over 0..255 (its own forward passes
    reduce_range=True, 0..127)."""
    from torch.ao.nn.quantized.dynamic import Linear

    class FullRangeLinear(Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.ops.quantized.linear_dynamic(x, self._packed_params._packed_params,
                                                      reduce_range=False).to(x.dtype)
    return FullRangeLinear


class TokenInt8Linear(torch.nn.Module):
    """`linear` in int8 with a range per token (int8-token): y = s_x * (q_x @ q_W^T) * s_W + c * sum_k W + b, where
    a token's row x (K,) is c + s_x * q_x (c its midpoint, q_x in -127..127), W (N, K) is s_W * q_W (s_W one
    scale per output row) and sum_k W is the fp32 weight's row sum (the midpoint's product is exact)."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        weight = linear.weight.detach().float()                                    # (N, K)
        scale = weight.abs().amax(1).clamp(min=1e-12) / 127                        # (N,)
        q = (weight / scale[:, None]).round().clamp(-127, 127).to(torch.int8)      # (N, K)
        self.register_buffer("q_weight_t", q.t())                                  # (K, N): _int_mm's fast layout
        self.register_buffer("weight_scale", scale)
        self.register_buffer("weight_sum", weight.sum(1))                          # (N,)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().float())
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).float()                             # (T, K)
        high, low = rows.amax(1, keepdim=True), rows.amin(1, keepdim=True)
        middle, scale = (high + low) / 2, ((high - low) / 254).clamp(min=1e-12)     # (T, 1) each
        q = rows.sub(middle).div_(scale).round_().to(torch.int8)                  # (T, K) in -127..127
        sums = torch._int_mm(q, self.q_weight_t)                                   # (T, N) int32
        y = sums.view(torch.float32).copy_(sums)   # converted where it lies: no second (T, N) buffer to allocate
        y.mul_(scale).mul_(self.weight_scale).addr_(middle[:, 0], self.weight_sum)
        if self.bias is not None:
            y.add_(self.bias)
        return y.reshape(*x.shape[:-1], self.out_features).to(x.dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 per token"


def layer_norm_inputs(model: torch.nn.Module) -> dict[str, torch.nn.LayerNorm]:
    """linear name -> the LayerNorm whose output is its input, in BERT's layout: layer N's query, key and value read
    layer N-1's output LayerNorm (layer 0: the embeddings'), its intermediate.dense its attention output's. Other
    models: none."""
    modules, found = dict(model.named_modules()), {}
    for name in modules:
        match = _LAYER.search(name)
        if match is None or not isinstance(modules[name], torch.nn.Linear):
            continue
        prefix = name[:match.start(1) - len("encoder.layer.")]                     # "bert." or ""
        index, rest = int(match.group(1)), match.group(2)
        if rest.startswith("attention.self."):
            source = f"{prefix}encoder.layer.{index - 1}.output.LayerNorm" if index else f"{prefix}embeddings.LayerNorm"
        elif rest == "intermediate.dense":
            source = f"{prefix}encoder.layer.{index}.attention.output.LayerNorm"
        else:
            continue
        if isinstance(modules.get(source), torch.nn.LayerNorm):
            found[name] = modules[source]
    return found


class Smoothed(torch.nn.Module):
    """-smooth: `linear` (K -> N) with its input channels divided by `scales` (K,) and its weight's columns multiplied
    by them: the same product in exact arithmetic, x W^T = (x / s)(W s)^T, with smaller outliers to quantise in
    x / s. `inner` is quantised afterwards like any other linear."""

    def __init__(self, linear: torch.nn.Linear, scales: torch.Tensor):
        super().__init__()
        self.inner = torch.nn.Linear(linear.in_features, linear.out_features, linear.bias is not None)
        with torch.no_grad():
            self.inner.weight.copy_(linear.weight * scales)
            if linear.bias is not None:
                self.inner.bias.copy_(linear.bias)
        self.register_buffer("inverse", 1 / scales)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x * self.inverse)


def smoothing(linear: torch.nn.Linear, norm: torch.nn.LayerNorm) -> torch.Tensor:
    """-smooth's per-input-channel scales (K,) for `linear`, which reads `norm`'s output."""
    reach = norm.bias.detach().abs() + LAYER_NORM_REACH * norm.weight.detach().abs()      # ~ max|x_j|
    weight = linear.weight.detach().float().abs().amax(0)                                  # max_n |W_nj|
    return (reach.clamp(min=1e-5) ** SMOOTH_ALPHA / weight.clamp(min=1e-5) ** (1 - SMOOTH_ALPHA)).clamp(min=1e-5)


def _replace(model: torch.nn.Module, name: str, module: torch.nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent), child, module)


def quantize_linears(model: torch.nn.Module, value: str) -> torch.nn.Module:
    """`model` (in eval mode) with the linear layers that scheme `value` does not keep quantised to int8 (int8-token:
    `TokenInt8Linear`; the others dynamically, by torch), those that read a LayerNorm `Smoothed` first (-smooth), in
    place."""
    from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig, quantize_dynamic

    scheme = parse_scheme(value)
    kept = set(kept_linears(model.eval(), scheme))
    if scheme.smooth:
        for name, norm in layer_norm_inputs(model).items():
            if name not in kept:
                linear = model.get_submodule(name)
                _replace(model, name, Smoothed(linear, smoothing(linear, norm)))
    if scheme.per_token:
        for name, module in list(model.named_modules()):
            if isinstance(module, torch.nn.Linear) and name not in kept:
                _replace(model, name, TokenInt8Linear(module))
        return model
    qconfig = per_channel_dynamic_qconfig if scheme.per_channel else default_dynamic_qconfig
    spec = {name: qconfig for name, module in model.named_modules()
            if isinstance(module, torch.nn.Linear) and name not in kept}
    with warnings.catch_warnings():  # torch 2.13 marks torch.ao.quantization deprecated (for torchao); it works
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        mapping = {torch.nn.Linear: _full_range_linear()} if scheme.full_range else None
        return quantize_dynamic(model.eval(), spec, dtype=torch.qint8, mapping=mapping, inplace=True)

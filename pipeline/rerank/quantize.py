"""int8 schemes for CPU inference: which linear layers run in int8, with what weight scales and activation range.

A scheme is a name, `int8` or `int8-channel`, optionally followed by `:` and the groups of linear layers kept in
fp32, joined by `+`: `int8-channel:ffn-out+head`. Every other `nn.Linear` is dynamically quantised
(`torch.ao.quantization.quantize_dynamic`: int8 weights, activations quantised per batch from their min and max):

    int8           weights one scale per matrix (per tensor), as `quantize=int8` always was
    int8-channel   weights one scale per output channel (per_channel_dynamic_qconfig)
    int8-vnni      as int8-channel, and activations over all 8 bits (0..255): torch's dynamic linear keeps them to
                   7 (reduce_range), as fbgemm's AVX2 kernel sums pairs of u8 x s8 products in 16 bits, which can
                   saturate; AVX512-VNNI / AVX-VNNI sum in 32 bits, so only a CPU with VNNI takes this scheme

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

BASES = {"int8": (False, False), "int8-channel": (True, False), "int8-vnni": (True, True)}  # (per channel, 8 bits)
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
    """A parsed scheme: per-channel weight scales or not, the groups of linears kept in fp32, and whether
    activations use all 8 bits."""

    per_channel: bool
    keep: tuple[str, ...] = ()
    full_range: bool = False

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
    per_channel, full_range = BASES[base]
    if full_range and not torch.cpu._is_vnni_supported():
        raise ConfigError(f"{field}={value!r} needs a CPU with VNNI (AVX512-VNNI or AVX-VNNI), which this one lacks: "
                          "use int8-channel (activations in 7 bits)", field=field)
    return Scheme(per_channel, keep, full_range)


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


def quantize_linears(model: torch.nn.Module, value: str) -> torch.nn.Module:
    """`model` (in eval mode) with the linear layers that scheme `value` does not keep dynamically quantised to
    int8, in place."""
    from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig, quantize_dynamic

    scheme = parse_scheme(value)
    qconfig = per_channel_dynamic_qconfig if scheme.per_channel else default_dynamic_qconfig
    kept = set(kept_linears(model, scheme))
    spec = {name: qconfig for name, module in model.named_modules()
            if isinstance(module, torch.nn.Linear) and name not in kept}
    with warnings.catch_warnings():  # torch 2.13 marks torch.ao.quantization deprecated (for torchao); it works
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        mapping = {torch.nn.Linear: _full_range_linear()} if scheme.full_range else None
        return quantize_dynamic(model.eval(), spec, dtype=torch.qint8, mapping=mapping, inplace=True)

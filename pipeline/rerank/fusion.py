"""Fusing runs: the sum of their weighted, per query normalised scores, or of reciprocal ranks -- what the `Fusion`
stage (`a + b`, `0.7 * a + 0.3 * b`, `rrf(a, b)`, `fusion(...)`; pipeline/stage.py) computes, and what a benchmark
uses on runs made elsewhere."""
from __future__ import annotations

import math
from typing import Iterable, Sequence, Sized

from pipeline.data.runs import Run
from pipeline.validate import at_least, choice, problem


def fuse(runs: Iterable[Run], method: str = "rrf", k: float = 60, weights: Sequence[float] | None = None,
         depth: int | None = 1000, norm: str = "none") -> Run:
    """`runs` fused as the `Fusion` stage (pipeline/stage.py) fuses its stages' runs (its docstring; the same
    options), for runs made elsewhere: e.g. a benchmark's BM25 and model scores of one candidate list,
    `fuse([bm25, model], method="weighted", weights=[1, w], norm="zscore")`. The runs are read one at a time."""
    if weights is None:
        runs = list(runs)
    weights = fusion_weights(len(runs) if isinstance(runs, Sized) else len(weights), method, k, weights, depth, norm)
    fused: dict[str, dict[str, float]] = {}
    texts: dict[str, str] = {}
    fields: dict[str, dict] = {}
    for output, weight in zip(runs, weights, strict=True):
        texts.update(output.texts)
        fields.update(output.doc_fields)
        for qid, hits in output.ranking.items():
            scores = fused.setdefault(qid, {})
            hits = hits[:depth]
            gains = [1.0 / (k + rank) for rank in range(1, len(hits) + 1)] if method == "rrf" else \
                NORMS[norm]([score for _, score in hits])
            for (docid, _), gain in zip(hits, gains):
                scores[docid] = scores.get(docid, 0.0) + weight * gain
    return Run.from_scores(fused, texts, tag=method, doc_fields=fields)


def norm_name(norm: str | None) -> str:
    """A per-query normalisation's name (NORMS); None, how a spec reads `norm=none`, is "none"."""
    return "none" if norm is None else norm


def fusion_weights(count: int, method: str, k: float, weights: Sequence[float] | None, depth: int,
                   norm: str) -> tuple[float, ...]:
    """The weights of `count` fused runs (1 each unless given), once the fusion options are checked."""
    choice("fusion", "method", method, ("rrf", "weighted"))
    choice("fusion", "norm", norm, NORMS)
    if norm != "none" and method != "weighted":
        raise problem("fusion", "norm", f"norm={norm!r} applies to method=weighted (reciprocal rank fusion uses "
                                           "ranks, not scores)")
    if weights is not None and len(weights) != count:
        raise problem("fusion", "weights", f"{len(weights)} weights for {count} fused stages")
    at_least("fusion", "k", k, 0)
    if depth is not None:  # None: every hit
        at_least("fusion", "depth", depth, 1, integer=True)
    return tuple(weights) if weights is not None else (1.0,) * count


def _minmax(scores: list[float]) -> list[float]:
    low, high = min(scores, default=0.0), max(scores, default=0.0)
    return [(s - low) / (high - low) if high > low else 0.0 for s in scores]


def _zscore(scores: list[float]) -> list[float]:
    mean = math.fsum(scores) / len(scores) if scores else 0.0
    std = math.sqrt(math.fsum((s - mean) ** 2 for s in scores) / len(scores)) if scores else 0.0
    return [(s - mean) / std if std > 0 else 0.0 for s in scores]


NORMS = {"none": list, "minmax": _minmax, "zscore": _zscore}  # per-query score normalisation for weighted fusion

"""The CPU peer benchmark's verdicts (bench/cpu_peers.py): which modes keep fp32's nDCG@10 within 0.002 on every
dataset, and irpipe's fastest such mode against the fastest such peer, from the speedups of the same rounds."""
from __future__ import annotations

from bench.cpu_peers import preserving, ratio_vs_best_peer


def _quality(deltas: dict[str, tuple[float, float]]) -> dict:
    return {name: {"modes": {mode: {"delta_nDCG@10_vs_fp32": pair[i]} for mode, pair in deltas.items()}}
            for i, name in enumerate(("dl19-passage", "dl20-passage"))}


def test_a_mode_preserves_quality_only_within_the_tolerance_on_both_datasets():
    quality = _quality({"fp32": (0, 0), "bf16": (0.002, -0.0015), "ort-int8": (0.001, -0.0035)})
    assert preserving(quality) == {"bf16": True, "fp32": True, "ort-int8": False}


def test_the_ratio_is_irpipes_fastest_preserving_mode_over_the_fastest_preserving_peer():
    speed = {"fp32": {"speedup_vs_crossencoder": 1.6}, "bf16": {"speedup_vs_crossencoder": 3.0},
             "crossencoder": {"speedup_vs_crossencoder": 1.0}, "ov-bf16": {"speedup_vs_crossencoder": 2.0},
             "ort-int8": {"speedup_vs_crossencoder": 4.0}}           # fastest, but not quality-preserving
    keeps = {"fp32": True, "bf16": True, "crossencoder": True, "ov-bf16": True, "ort-int8": False}
    assert ratio_vs_best_peer(speed, keeps) == {"ratio_vs_best_peer": 3.0 / 2.0, "irpipe_mode": "bf16",
                                                "best_peer": "ov-bf16"}
    assert ratio_vs_best_peer(speed, keeps | {"bf16": False}) == {"ratio_vs_best_peer": 0.8,
                                                                      "irpipe_mode": "fp32", "best_peer": "ov-bf16"}
    assert ratio_vs_best_peer(speed, {"fp32": True})["ratio_vs_best_peer"] is None


def test_the_docs_tables_are_the_records_as_printed():
    import json

    from bench import REPO
    from bench.cpu_peers import markdown

    docs = (REPO / "docs" / "inference.md").read_text()
    for name in ("cpu-peers-1t", "cpu-peers-2t", "cpu-peers-zen4-1t", "cpu-peers-zen4-2t"):
        record = json.loads((REPO / "eval" / "benchmarks" / f"{name}.json").read_text())
        assert markdown(record) in docs, f"docs/inference.md: regenerate with python -m bench.cpu_peers --table {name}"
        assert record["ratio_vs_best_peer"] == ratio_vs_best_peer(record["speed"], record["quality_preserving"])[
            "ratio_vs_best_peer"]

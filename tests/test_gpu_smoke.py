"""The GPU issue's one prepared command, eval/gpu/run.sh, in its smoke form on the CPU (`--smoke`: the GPU benchmark
with `--gpu-device cpu` at smoke-test sizes): the call a lent GPU runs must not fail there on a path or an import, so CI
runs it and checks that every section is measured and that the step's JSON lands in $OUT; and `--prepare` makes what
travels under the 64 MiB a device call carries, with all-MiniLM-L6-v2 loading in fp32 from its fp16 copy."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from support import REPO, SHARED_DATA, needs_shared_data

SCRIPT = REPO / "eval" / "gpu" / "run.sh"


@pytest.mark.slow
@needs_shared_data
def test_the_gpu_script_runs_every_section_on_the_cpu_and_returns_its_json(tmp_path):
    out = tmp_path / "out"
    env = os.environ | {"OUT": str(out), "IRPIPE_MIRROR": str(SHARED_DATA), "IRPIPE_CACHE": str(tmp_path / "cache")}
    subprocess.run(["bash", str(SCRIPT), "--smoke"], env=env, check=True, capture_output=True, timeout=900)
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    log = (out / "gpu-inference-smoke.log").read_text()
    assert steps[0]["step"] == "gpu-inference-smoke" and steps[0]["exit"] == 0, log
    assert steps[1] == {"step": "gpu-wikiqa-monobert", "skipped": True}
    recorded = json.loads((out / "gpu-inference-smoke.json").read_text())
    gpu = recorded["gpu"]
    assert gpu["device"] == "cpu (smoke test)" and recorded["gpu_finished"] is True
    sections = ("side_by_side", "token_budgets", "dev_small", "dl_ndcg", "training")
    assert [s for s in sections if not gpu.get(s) or "error" in gpu[s]] == [], log
    assert gpu["token_budgets"]["4096"] > 0 and gpu["training"]
    assert not (REPO / "eval" / "benchmarks" / "gpu-inference-smoke.json").exists()     # the record removed


def test_the_minilm_that_travels_loads_in_fp32_with_the_fp16_rounded_weights(tmp_path, monkeypatch):
    """`--prepare`'s all-MiniLM-L6-v2 (bench/_gpu_carry.py): half the bytes, found where bert.py looks
    without the package, loaded as fp32 by transformers, each weight the original's fp16 rounding."""
    import torch

    import pipeline.rerank.bert as bert_module
    from bench._gpu_carry import fp16_copy

    original, _ = bert_module.load_bert("all-MiniLM-L6-v2")
    fp16_copy(bert_module.bert_folder("all-MiniLM-L6-v2"), tmp_path / "models" / "all-MiniLM-L6-v2")
    assert (tmp_path / "models" / "all-MiniLM-L6-v2" / "model.safetensors").stat().st_size < 46_000_000
    monkeypatch.setattr(bert_module, "find_spec", lambda name: None)
    monkeypatch.setenv("IRPIPE_MIRROR", str(tmp_path))
    carried, _ = bert_module.load_bert("all-MiniLM-L6-v2")
    weights = dict(carried.named_parameters())
    for name, parameter in original.named_parameters():
        assert weights[name].dtype == torch.float32
        assert torch.equal(weights[name], parameter.half().float()), name


@needs_shared_data
def test_a_failing_section_keeps_the_others_each_recorded_as_it_ends(monkeypatch):
    from argparse import Namespace

    from bench import _inference_gpu as gpu

    for name in ("side_by_side", "budget_sweep", "dev_small", "gpu_vs_cpu"):
        monkeypatch.setattr(gpu, name, lambda *args, name=name, **kwargs: {"measured": name})
    monkeypatch.setattr(gpu, "training_speed", lambda *args: 1 / 0)
    seen = []
    out = gpu.gpu_measurements(Namespace(gpu_device="cpu", checkpoint=None, max_length=64,
                                         gpu_sections=list(gpu.SECTIONS)), None,
                               lambda so_far: seen.append(list(so_far)))
    assert out["training"] == {"error": "ZeroDivisionError: division by zero"}
    assert out["dl_ndcg"] == {"measured": "gpu_vs_cpu"}
    assert [keys[-1] for keys in seen] == ["side_by_side", "token_budgets", "dev_small", "dl_ndcg", "training"]


@needs_shared_data
def test_gpu_sections_measures_the_named_sections_alone_for_a_call_after_a_cut_off_one(monkeypatch):
    from argparse import Namespace

    from bench import _inference_gpu as gpu

    for name in ("side_by_side", "budget_sweep", "dev_small", "gpu_vs_cpu", "training_speed"):
        monkeypatch.setattr(gpu, name, lambda *args, name=name, **kwargs: {"measured": name})
    out = gpu.gpu_measurements(Namespace(gpu_device="cpu", checkpoint=None, max_length=64,
                                         gpu_sections=["dl_ndcg", "training"]), None)
    assert [key for key in out if key in gpu.SECTIONS] == ["dl_ndcg", "training"]
    assert out["training"] == {"measured": "training_speed"}

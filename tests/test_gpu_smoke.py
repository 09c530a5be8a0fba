"""The GPU measurements' code path on the CPU, small (`--gpu-device cpu`): the one command a lent GPU runs
(pipeline/benchmarks/_inference_gpu.py; `python -m pipeline.benchmarks.inference_speed --gpu-only ...`) must not fail
there on a path or an import, so CI runs it with the sizes of a smoke test and checks every section is measured."""
from __future__ import annotations

import pytest

from support import needs_shared_data


@pytest.mark.slow
@needs_shared_data
def test_the_gpu_benchmark_runs_every_section_on_the_cpu(monkeypatch):
    from pipeline.benchmarks import inference_speed

    recorded = {}
    monkeypatch.setattr(inference_speed, "record", lambda name, module, argv, payload: recorded.update(payload))
    assert inference_speed.main(["--gpu-only", "--gpu-device", "cpu", "--dev-queries", "2", "--dev-candidates", "20",
                                 "--gpu-rounds", "1", "--train-steps", "1", "--gpu-budgets", "4096",
                                 "--gpu-batch-size", "16", "--threads", "1", "--record", "--output", "smoke"]) == 0
    gpu = recorded["gpu"]
    assert gpu["device"] == "cpu (smoke test)" and "skipped" not in gpu
    assert {"side_by_side", "token_budgets", "dev_small", "dl_ndcg", "training"} <= gpu.keys()
    assert gpu["side_by_side"] and gpu["token_budgets"]["4096"] > 0
    assert gpu["dev_small"]["monobert_seconds"] >= 0 and gpu["training"]

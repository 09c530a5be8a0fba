"""The main job's time split (bench/main_job_time.py) and the FLOP counts the CPU benchmarks report beside their
speeds (bench/_inference_models.py)."""
from __future__ import annotations

import json

from bench import REPO
from bench._inference_models import _fma_width, achieved, encoder_flops, fp32_peak_flops
from bench.main_job_time import split

LOG = ["10:00:01 INFO addax: training on dl20-passage (recipe not in the cache yet) into /tmp/x",
       "10:00:02 INFO training addax on dl20-passage (queries 10, pairs 1000, positives 76): adam",
       "10:00:30 INFO candidates(): start: 43 queries, 4300 input hits",
       "10:00:30 INFO candidates(): 43 queries, 4300 hits, computed in 0.00s (120943.8 queries/s)",
       "10:00:30 INFO addax(seed=0): start: 43 queries, 4300 input hits",
       "10:02:00 INFO addax(seed=0): 43 queries, 4300 hits, computed in 90.00s (0.5 queries/s)",
       "10:02:00 INFO biencoder(): start: 43 queries, 4300 input hits",
       "10:03:10 INFO biencoder(): 43 queries, 4300 hits, computed in 70.00s (0.6 queries/s)",
       "main-job       43   0.6550        0.8353     0.3235        0.4910"]
AT = [2.0, 2.5, 30.0, 30.0, 30.0, 120.0, 120.0, 190.0, 193.0]


def test_the_wall_time_splits_into_start_up_training_each_computed_stage_and_the_rest():
    parts = split(195.0, list(zip(AT, LOG)))
    assert parts == {"start-up": 2.0, "training (model load included)": 28.0, "addax(seed=0)": 90.0,
                     "biencoder()": 70.0, "the rest (set-up, evaluation, t-tests, plot, files)": 5.0}
    assert sum(parts.values()) == 195.0


def test_a_job_without_training_has_no_training_part():
    parts = split(100.0, list(zip(AT[2:], LOG[2:])))
    assert "training (model load included)" not in parts and parts["start-up"] == 30.0


def test_encoder_flops_count_the_linear_layers_and_attention_of_every_layer():
    # one layer, H = 2, I = 4, n = 3: 2*3*(4*4 + 2*2*4) + 4*9*2 = 6*32 + 72 = 264
    assert encoder_flops([3], hidden=2, inner=4, layers=1) == 264
    assert encoder_flops([3, 3], hidden=2, inner=4, layers=2) == 4 * 264


def test_the_peak_estimate_names_how_it_was_made():
    peak, how = fp32_peak_flops(2)
    assert (peak is None) or (peak > 0 and how.startswith("2 core(s) x "))


def test_the_fma_width_is_what_the_core_executes_not_the_widest_flag():
    zen4 = {"vendor_id": "AuthenticAMD", "cpu family": "25", "flags": "avx avx2 fma avx512f avx512_bf16"}
    xeon = {"vendor_id": "GenuineIntel", "cpu family": "6", "flags": "avx avx2 fma avx512f amx_tile"}
    zen3 = {"vendor_id": "AuthenticAMD", "cpu family": "25", "flags": "avx avx2 fma"}
    assert [_fma_width(cpu) for cpu in (zen4, xeon, zen3, {"flags": "sse4_2"})] == [256, 512, 256, 64]
    assert achieved(4e9, 2.0, 4e9) == (2.0, 0.5) and achieved(4e9, None, 4e9) == (None, None)


def test_the_main_job_time_record_has_its_command_split_and_floor():
    record = json.loads((REPO / "eval" / "benchmarks" / "main-job-time.json").read_text())
    assert record["command"].startswith("python -m bench.main_job_time")
    for run in record["runs"].values():
        assert abs(sum(run["parts_seconds"].values()) - run["wall_seconds"]) < 0.5
        assert run["load_average_start"] and run["cpu"]
        for stage in run["encoders"]["stages"].values():
            assert stage["tflop"] > 1 and stage["seconds"] > 0


def test_the_docs_table_holds_the_recorded_times():
    record = json.loads((REPO / "eval" / "benchmarks" / "main-job-time.json").read_text())["runs"]["before"]
    docs = (REPO / "docs" / "inference.md").read_text()
    section = docs[docs.index("### The main job's time"):]
    for seconds in [record["wall_seconds"], *record["parts_seconds"].values()]:
        assert f"| {seconds} |" in section or f"| **{seconds}** |" in section, seconds

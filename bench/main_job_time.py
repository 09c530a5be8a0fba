"""Benchmark: the main job's wall time from a fresh cache, and where it goes.

    IRPIPE_MIRROR=../shared/data python -m bench.main_job_time --label before --record

Runs `irpipe run` (eval/main-job.yaml) as a user does, in a subprocess with an empty temporary IRPIPE_CACHE (the
datasets come from the mirror, ADDAX's quick recipe is trained, every stage is computed), stamps each line of its
log as it arrives, and splits the wall time: start-up (to the first log line), training (from "training ... on" to
the trained stage's start), each stage's own "computed in" seconds, and the rest (stage set-up, evaluation, the
t-tests, the plot, writing files). `--record` keeps the run in eval/benchmarks/main-job-time.json under `--label`
(other labels are kept), with the CPU, the load before and after, and `wall_seconds`. Time it on an idle machine:
the load average is recorded beside it, and a busy machine's run says so.

Beside the time, the encoders' work: the FLOPs of MiniLM's passes over DL19's 4,300 candidates and 43 queries at
each reranker's lengths (ADDAX: L_Q 32, L_D 180 as the job sets it; the bi-encoder: 256), the FLOP/s each stage
achieved, and the seconds the two would take at the CPU's fp32 peak (bench/_inference_models.py `fp32_peak_flops`,
an estimate from the reported clock): a floor no fp32 kernel goes below on this machine.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from bench import REPO, machine, record, run_main
from bench._inference_models import cpu_name

STAGE_START = re.compile(r"INFO (?P<stage>.+): start: \d+ queries")
STAGE_DONE = re.compile(r"INFO (?P<stage>.+): \d+ queries, \d+ hits, computed in (?P<seconds>[0-9.]+)s")
TRAINING = re.compile(r"INFO \w+: training on ")


def timeline(command: list[str], environment: dict) -> tuple[float, list[tuple[float, str]], int]:
    """Run `command`; (wall seconds, [(seconds since the start, log line)], exit status)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=environment, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    lines = [(time.perf_counter() - start, line.rstrip("\n")) for line in process.stdout]
    status = process.wait()
    return time.perf_counter() - start, lines, status


def split(wall: float, lines: list[tuple[float, str]]) -> dict[str, float]:
    """The wall time by part: start-up, training, each stage that computed, and the rest."""
    parts: dict[str, float] = {"start-up": lines[0][0] if lines else wall}
    trained_at = next((at for at, line in lines if TRAINING.search(line)), None)
    if trained_at is not None:
        first_stage = next((at for at, line in lines if at >= trained_at and STAGE_START.search(line)), wall)
        parts["training (model load included)"] = first_stage - trained_at
    for _, line in lines:
        done = STAGE_DONE.search(line)
        if done and float(done["seconds"]) >= 0.05:
            parts[done["stage"]] = float(done["seconds"])
    parts["the rest (set-up, evaluation, t-tests, plot, files)"] = wall - sum(parts.values())
    return {part: round(seconds, 1) for part, seconds in parts.items()}


def encoding_work(parts: dict[str, float], threads: int) -> dict:
    """The main job's encoder FLOPs per reranking stage, the FLOP/s it achieved, and the fp32 floor on this CPU."""
    from bench._inference_models import achieved, default_encoder_flops, default_tokenizer, dl_pairs, peak_fields
    from pipeline.rerank.bert import single_lengths
    from pipeline.rerank.models.biencoder import BiEncoderConfig

    tokenizer = default_tokenizer()
    _, pairs = dl_pairs("dl19-passage")
    documents, queries = [p.text for p in pairs], list(dict.fromkeys(p.query for p in pairs))
    lengths = {"addax": (32, 180), "biencoder": (BiEncoderConfig().max_length,) * 2}     # (queries, documents)
    peak, stated = peak_fields(threads)
    out = {**stated, "stages": {}}
    for name, (query_length, document_length) in lengths.items():
        flops = sum(default_encoder_flops(single_lengths(tokenizer, texts, length))
                    for texts, length in ((documents, document_length), (queries, query_length)))
        seconds = next((s for part, s in parts.items() if part.startswith(name + "(")), None)
        gflops, share = achieved(flops, seconds, peak)
        out["stages"][name] = {"tflop": round(flops / 1e12, 2), "seconds": seconds, "achieved_gflops": gflops,
                               "share_of_peak": share, "seconds_at_peak": round(flops / peak, 1) if peak else None}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="now", help="the run's name in the record (e.g. before, after)")
    parser.add_argument("--record", action="store_true", help="keep it in eval/benchmarks/main-job-time.json")
    args = parser.parse_args(argv)
    if not os.environ.get("IRPIPE_MIRROR"):
        print("python -m bench.main_job_time: error: set IRPIPE_MIRROR to the dataset mirror (e.g. ../shared/data): "
              "a fresh cache has no datasets", file=sys.stderr)
        return 2
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="irpipe-main-job-") as cache:
        wall, lines, status = timeline([sys.executable, "-m", "pipeline.cli", "run"],
                                       os.environ | {"IRPIPE_CACHE": cache})
    if status != 0:
        print("\n".join(line for _, line in lines[-20:]), file=sys.stderr)
        print(f"python -m bench.main_job_time: error: irpipe run exited {status}", file=sys.stderr)
        return 1
    run = {"wall_seconds": round(wall, 1), "parts_seconds": split(wall, lines), "cpu": cpu_name(),
           "load_average_start": [round(x, 2) for x in load_start],
           "load_average_end": [round(x, 2) for x in os.getloadavg()], "date": time.strftime("%Y-%m-%d"),
           "result": [line.strip() for _, line in lines if line.lstrip().startswith("main-job ")][-1:]}
    import torch

    run["encoders"] = encoding_work(run["parts_seconds"], torch.get_num_threads())     # the job's own default
    print(f"{run['cpu']}, load {load_start[0]:.1f} at the start: the main job took {wall:.1f} s from a fresh cache")
    for part, seconds in run["parts_seconds"].items():
        print(f"  {seconds:7.1f} s  {part}")
    encoders = run["encoders"]
    for name, work in encoders["stages"].items():
        print(f"  {name}: {work['tflop']} TFLOP in {work['seconds']} s = {work['achieved_gflops']} GFLOP/s "
              f"({work['share_of_peak']} of the fp32 peak estimate, {encoders['peak_estimate']}); "
              f"{work['seconds_at_peak']} s at that peak")
    if args.record:
        path = REPO / "eval" / "benchmarks" / "main-job-time.json"
        runs = json.loads(path.read_text())["runs"] if path.exists() else {}
        record("main-job-time", __spec__.name, argv, {"runs": runs | {args.label: run | {"machine": machine()}}})
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))

"""Benchmark: irpipe's CPU modes beside the runtimes users deploy a cross-encoder on, same weights and pairs, one run.

    python -m bench.cpu_peers --checkpoint CKPT --threads 1 --pairs 200 --repeats 3 --quality-queries 10 \
        --output cpu-peers-1t --record

Peers (bench/_peer_runtimes.py, installed by the `bench` extra: `pip install -e ".[bench]"`): CrossEncoder fp32 and
under bf16 autocast, ONNX Runtime fp32 and dynamic int8, OpenVINO fp32 / bf16 / int8 weights, CTranslate2 int8 /
bf16; beside them irpipe fp32 and bf16 (`predict`, amp none / bf16). All on the same weights (monobert's, a trained
checkpoint with `--checkpoint`), the same threads, the same `--pairs` DL19 pairs, timed interleaved over
`--repeats` rounds (bench/inference_speed.py `timed`: pairs/s and the ratio to CrossEncoder fp32 in the same round,
medians). Per mode: the FLOP/s it achieved (a full BERT pass over each pair's word pieces, bench/_inference_models.py
`encoder_flops`) and its share of the CPU's fp32 peak estimate (`fp32_peak_flops`: the reported clock x two FMA
units, for the threads used; int8 and bf16 modes can exceed it); max |score - irpipe fp32| on the timed pairs;
and, with `--checkpoint`, DL19 and DL20 nDCG@10, RR@10, AP and top-10 overlap against fp32 on the shipped BM25
top-100 (`--quality-queries N`: the first N judged queries of each, for a busy machine; `--quality-from NAME`: the
quality of an earlier record, e.g. a slow quality run's for the timed runs of an idle machine, since scores do not
depend on threads or load beyond float noise).
`ratio_vs_best_peer`: irpipe's fastest quality-preserving mode / the fastest quality-preserving peer (quality-
preserving: within 0.002 nDCG@10 of fp32 on DL19 and DL20), from the per-round ratios to CrossEncoder.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from bench import REPO, positive, record, record_name, run_main
from bench._inference_models import achieved, cpu_name, cross_encoder, dl_pairs, load_monobert, model_flops, peak_fields
from bench._peer_runtimes import PEERS, peer_scorers
from bench.inference_speed import MEASURES, quality_by_mode, timed

IRPIPE_MODES = ("fp32", "bf16", "bf16-compiled")
TOLERANCE = 0.002                                                       # nDCG@10 from fp32, DL19 and DL20


def irpipe_scorers(model) -> dict:
    """irpipe's modes: `predict` with amp none (fp32) and bf16, its default batches on the CPU, and bf16 on a copy of
    the model whose forward is compiled (compile=true: scoring.compiled)."""
    import copy

    from pipeline.rerank.scoring import compiled, predict

    fast = compiled(copy.deepcopy(model))
    scorer = lambda model, amp: lambda pairs: predict(model, pairs, amp=amp, desc="timed").scores  # noqa: E731
    return {"fp32": scorer(model, "none"), "bf16": scorer(model, "bf16"), "bf16-compiled": scorer(fast, "bf16")}


def preserving(quality: dict) -> dict[str, bool]:
    """mode -> within TOLERANCE nDCG@10 of fp32 on every dataset of `quality` (quality_by_mode's output)."""
    modes = set.intersection(*(set(q["modes"]) for q in quality.values()))
    return {mode: all(abs(q["modes"][mode]["delta_nDCG@10_vs_fp32"]) <= TOLERANCE for q in quality.values())
            for mode in sorted(modes)}


def ratio_vs_best_peer(speed: dict, keeps: dict[str, bool]) -> dict:
    """irpipe's fastest quality-preserving mode against the fastest quality-preserving peer (speedups over
    CrossEncoder fp32 in the same rounds, so a slow phase of the machine falls on both)."""
    ok = lambda names: [n for n in names if n in speed and keeps.get(n)]  # noqa: E731
    ours, peers = ok(IRPIPE_MODES), ok(PEERS)
    if not ours or not peers:
        return {"ratio_vs_best_peer": None, "why": "no quality-preserving mode on one side"}
    best = max(ours, key=lambda n: speed[n]["speedup_vs_crossencoder"])
    peer = max(peers, key=lambda n: speed[n]["speedup_vs_crossencoder"])
    return {"ratio_vs_best_peer": round(speed[best]["speedup_vs_crossencoder"]
                                        / speed[peer]["speedup_vs_crossencoder"], 3),
            "irpipe_mode": best, "best_peer": peer}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", metavar="DIR", help="a trained monobert (default: MiniLM, seeded head; "
                        "no quality rows then)")
    parser.add_argument("--pairs", type=positive, default=200, help="DL19 pairs timed (default 200)")
    parser.add_argument("--threads", type=positive, default=1, help="CPU threads, every runtime (default 1)")
    parser.add_argument("--repeats", type=positive, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--peers", nargs="*", choices=PEERS, default=list(PEERS), metavar="PEER",
                        help=f"peers: {', '.join(PEERS)} (default all)")
    parser.add_argument("--quality-queries", type=positive, metavar="N",
                        help="the first N judged queries of DL19 and DL20 (default all: 43 and 54)")
    parser.add_argument("--quality-from", type=record_name, metavar="NAME",
                        help="take the DL quality rows from eval/benchmarks/NAME.json instead of measuring them")
    parser.add_argument("--keep-scores", metavar="DIR", help="keep each mode's DL scores in DIR and reuse them")
    parser.add_argument("--max-length", type=int, default=256, help="word pieces (default 256; a checkpoint's own)")
    parser.add_argument("--output", default="cpu-peers", type=record_name, help="eval/benchmarks/<NAME>.json")
    parser.add_argument("--record", action="store_true", help="write eval/benchmarks/<--output>.json")
    parser.add_argument("--table", type=record_name, metavar="NAME", help="print eval/benchmarks/NAME.json's rows as "
                        "a Markdown table (docs/inference.md's) and measure nothing")
    args = parser.parse_args(argv)
    if args.table:
        print(markdown(json.loads((REPO / "eval" / "benchmarks" / f"{args.table}.json").read_text())))
        return 0

    import torch

    from pipeline import log

    log.configure(quiet=True)
    torch.set_num_threads(args.threads)
    model = load_monobert(args.checkpoint, args.max_length)
    ce = cross_encoder(model)
    peers, failed = peer_scorers(ce, args.peers, args.threads)
    functions = irpipe_scorers(model) | peers
    _, pairs = dl_pairs("dl19-passage")
    pairs = pairs[:args.pairs]
    payload = {"cpu": cpu_name(), "threads": args.threads, "load_average_start": os.getloadavg(),
               "torch": torch.__version__, "runtimes": _versions(), "checkpoint": args.checkpoint,
               "max_length": model.config.max_length, "pairs": len(pairs), "repeats": args.repeats,
               "not_loaded": failed}
    last = {}                                                          # mode -> its scores of the last call
    speed = timed({name: _remembered(function, name, last) for name, function in functions.items()}, pairs,
                  args.repeats)
    flops = model_flops(model, pairs)
    peak, stated = peak_fields(args.threads)
    for name in functions:
        speed[name]["max_abs_vs_fp32"] = max(abs(a - b) for a, b in zip(last[name], last["fp32"]))
        gflops, share = achieved(flops, len(pairs) / speed[name]["pairs_per_s"], peak)
        speed[name] |= {"gflops": gflops, "share_of_fp32_peak": share}
    payload |= {"speed": speed, "model_tflop": round(flops / 1e12, 3)} | stated
    if args.quality_from:
        quality = json.loads((REPO / "eval" / "benchmarks" / f"{args.quality_from}.json").read_text())["quality"]
        payload["quality_from"] = args.quality_from
    elif args.checkpoint:
        quality = quality_by_mode(functions, [m for m in functions if m != "fp32"], keep=args.keep_scores,
                                  queries=args.quality_queries)
        payload["quality_queries"] = {name: q["modes"]["fp32"]["queries"] for name, q in quality.items()}
    else:
        quality = {}
    if quality:
        keeps = preserving(quality)
        payload |= {"quality": quality, "quality_preserving": keeps} | ratio_vs_best_peer(speed, keeps)
    payload["load_average_end"] = os.getloadavg()
    _print(payload)
    if args.record:
        record(args.output, __spec__.name, argv, payload)
    return 0


def markdown(payload: dict) -> str:
    """A record's rows as docs/inference.md shows them: speed, score change and, where measured, DL quality."""
    quality = payload.get("quality", {})
    keeps = payload.get("quality_preserving", {})
    flops = "gflops" in next(iter(payload["speed"].values()))         # records before the FLOP/s field lack it
    head = ["mode", "pairs/s", "× CrossEncoder fp32", *(["GFLOP/s (share of fp32 peak)"] if flops else []),
            "max \\|score − fp32\\|",
            *(f"{name.split('-')[0].upper()} nDCG@10 (Δ; top-10 overlap)" for name in quality), "within 0.002"]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 2) + " :---: |"]
    for mode, row in payload["speed"].items():
        cells = [f"{q['modes'][mode]['nDCG@10']:.4f} ({q['modes'][mode]['delta_nDCG@10_vs_fp32']:+.4f}; "
                 f"{q['modes'][mode]['top10_overlap_vs_fp32']:.3f})" if mode in q["modes"] else "—"
                 for q in quality.values()]
        verdict = {True: "yes", False: "**no**"}.get(keeps.get(mode), "—")
        work = [f"{row['gflops']} ({row['share_of_fp32_peak']})"] if flops else []
        lines.append(f"| {mode} | {row['pairs_per_s']} | {row['speedup_vs_crossencoder']} | "
                     + " | ".join([*work, f"{row['max_abs_vs_fp32']:.1e}", *cells, verdict]) + " |")
    lines += [f"| {mode} | not loaded: {why} |" + " |" * (len(head) - 2) for mode, why in payload["not_loaded"].items()]
    return "\n".join(lines)


def _remembered(function, name: str, last: dict):
    """`function`, its latest scores kept in `last[name]` (the timed pairs' scores, compared without a second pass)."""
    def scores(pairs):
        last[name] = function(pairs)
        return last[name]
    return scores


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in ("sentence-transformers", "transformers", "onnxruntime", "openvino", "nncf", "ctranslate2"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "not installed"
    return out


def _print(payload: dict) -> None:
    print(f"{payload['cpu']}, {payload['threads']} thread(s), {payload['pairs']} DL19 pairs, "
          f"{payload['repeats']} rounds, load average {payload['load_average_start'][0]:.1f} at the start")
    quality = payload.get("quality", {})
    print(f"{'mode':<18} {'pairs/s':>8} {'x CE fp32':>9} {'max |d| fp32':>12}  "
          + "  ".join(f"{name[:4]} nDCG@10 (overlap)" for name in quality))
    for mode, row in payload["speed"].items():
        cells = [f"{q['modes'][mode]['nDCG@10']:.4f} ({q['modes'][mode]['top10_overlap_vs_fp32']:.3f})"
                 if mode in q["modes"] else "-" for q in quality.values()]
        print(f"{mode:<18} {row['pairs_per_s']:>8} {row['speedup_vs_crossencoder']:>9} "
              f"{row['max_abs_vs_fp32']:>12.2e}  " + "  ".join(f"{c:>22}" for c in cells))
    for mode, why in payload["not_loaded"].items():
        print(f"{mode:<18} not loaded: {why}")
    if "ratio_vs_best_peer" in payload:
        print(f"ratio_vs_best_peer {payload['ratio_vs_best_peer']} ({payload.get('irpipe_mode')} / "
              f"{payload.get('best_peer')}); measures {', '.join(MEASURES)} in the JSON")


if __name__ == "__main__":
    sys.exit(run_main(main))

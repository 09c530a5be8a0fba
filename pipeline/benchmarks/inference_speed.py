"""Benchmark: irpipe's batched inference beside sentence-transformers' CrossEncoder, in one run.

    python -m pipeline.benchmarks.inference_speed --checkpoint models/monobert-dl19 --threads 1 --repeats 3 --record

CPU, always. The same `--pairs` DL19 pairs (the first of dl19-passage's shipped BM25 top-100: real query and passage
texts), the same weights (monobert's; CrossEncoder gets the all-MiniLM-L6-v2 folder with a num_labels=1 head, then
monobert's state dict: BERT as is, head weight w_rel - w_nonrel, so it outputs monobert's score z_rel - z_nonrel),
256 word pieces, the same torch threads. One pass over the pairs per mode, the modes interleaved (their order
rotated each round), `--repeats` rounds; pairs/s and the ratio to CrossEncoder in the same round, medians:
- crossencoder: `CrossEncoder.predict` as a user runs it (defaults: fp32, batches of 32 sorted by characters);
- fp32 (`amp=none`): irpipe's default on the CPU; fp32-b64: the same in batches of 64 pairs, no token budget;
  fp32-all-layers: the same without running the last layer for [CLS] alone (what each part is worth);
  fp32-old: irpipe before the token budget (sorted by characters, 64 pairs a batch, every layer over every position);
- bf16 (`amp=bf16`) and int8 (`quantize=int8`): irpipe's fast CPU options.
Scores: max |difference| of each mode from CrossEncoder's raw scores (fp32 aims at <= 1e-4). With `--checkpoint` (a
trained monobert) also each mode's nDCG@10 on DL19 and DL20 (all 43 / 54 queries' top-100) beside fp32's.
GPU (only when CUDA is present; here skipped with the reason): pipeline/benchmarks/_inference_gpu.py.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time

from pipeline.benchmarks import record, run_main
from pipeline.benchmarks._inference_gpu import add_gpu_args, gpu_measurements
from pipeline.benchmarks._inference_models import cpu_name, cross_encoder, dl_pairs, load_monobert

MODES = ("crossencoder", "fp32", "fp32-b64", "fp32-all-layers", "bf16", "int8", "fp32-old")


def scorers(model, ce, device: str = "cpu") -> dict:
    """mode -> (pairs -> scores) of each mode on the CPU; crossencoder's as a user calls it (sigmoid included)."""
    from pipeline.rerank.scoring import predict, quantized

    import torch

    every_layer, int8 = copy.deepcopy(model), quantized(copy.deepcopy(model), "int8", torch.device("cpu"))
    every_layer.cls_only = False
    run = lambda m, **kw: lambda pairs: predict(m, pairs, device=device, desc="timed", **kw).scores  # noqa: E731

    def old(pairs):  # the batches irpipe scored in before the token budget: by characters, 64 at a time
        by_chars = sorted(range(len(pairs)), key=lambda i: -(len(pairs[i].query) + len(pairs[i].text)))
        return predict(every_layer, pairs, 64, device, "none", desc="timed", order=by_chars, batch_tokens=0).scores

    return {"fp32-old": old, "crossencoder": lambda pairs: ce.predict([(p.query, p.text) for p in pairs], show_progress_bar=False),
            "fp32": run(model, amp="none"), "fp32-b64": run(model, amp="none", batch_size=64, batch_tokens=0),
            "fp32-all-layers": run(every_layer, amp="none"), "bf16": run(model, amp="bf16"), "int8": run(int8)}


def timed(functions: dict, pairs: list, repeats: int) -> dict:
    """Each function over `pairs`, interleaved: `repeats` rounds, the order rotated every round (a slow phase of a
    busy machine falls on every mode alike). -> name -> {seconds per round, pairs/s (median), ratio to crossencoder
    in the same round (median)}."""
    names = list(functions)
    for function in functions.values():  # warm-up: first calls allocate, load kernels
        function(pairs[:16])
    seconds = {name: [] for name in names}
    for round_ in range(repeats):
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            start = time.perf_counter()
            functions[name](pairs)
            seconds[name].append(time.perf_counter() - start)
    out = {}
    for name in names:
        row = {"seconds": [round(s, 2) for s in seconds[name]],
               "pairs_per_s": round(len(pairs) / statistics.median(seconds[name]), 2)}
        if "crossencoder" in seconds:
            row["speedup_vs_crossencoder"] = round(statistics.median(
                c / s for c, s in zip(seconds["crossencoder"], seconds[name])), 3)
        out[name] = row
    return out


def score_differences(ce, functions: dict, modes: list[str], pairs: list) -> dict:
    """Max |score - CrossEncoder's raw score| of each irpipe mode on `pairs`, and of each mode from fp32."""
    import torch

    reference = [float(s) for s in ce.predict([(p.query, p.text) for p in pairs], show_progress_bar=False,
                                               activation_fn=torch.nn.Identity())]
    scores = {name: functions[name](pairs) for name in dict.fromkeys(["fp32", *modes]) if name != "crossencoder"}
    return {name: {"max_abs_vs_crossencoder": max(abs(a - b) for a, b in zip(values, reference)),
                   "max_abs_vs_fp32": max(abs(a - b) for a, b in zip(values, scores["fp32"]))}
            for name, values in scores.items()}


def _docids(run, qid: str) -> list[str]:
    return [docid for docid, _ in run.ranking[qid]]


def ndcg_by_mode(functions: dict, modes: list[str]) -> dict:
    """nDCG@10 (and top-10 agreement with fp32) of each mode reranking DL19 and DL20's shipped top-100."""
    from pipeline.data.runs import Run
    from pipeline.evaluate import evaluate
    from pipeline.rerank.pairs import scores_by_query

    out = {}
    for name in ("dl19-passage", "dl20-passage"):
        dataset, pairs = dl_pairs(name)
        runs, rows, scores = {}, {}, {}
        for mode in modes:
            start = time.perf_counter()
            scores[mode] = functions[mode](pairs)
            runs[mode] = Run.from_scores(scores_by_query(pairs, scores[mode]))
            value = evaluate(runs[mode], dataset.qrels(), ["nDCG@10"], rel_level=dataset.rel_level)
            rows[mode] = {"nDCG@10": round(next(iter(value.values())), 4), "seconds": round(time.perf_counter() - start)}
        top = {mode: {q: {d for d, _ in hits[:10]} for q, hits in run.ranking.items()} for mode, run in runs.items()}
        for mode in modes:
            rows[mode]["delta_vs_fp32"] = round(rows[mode]["nDCG@10"] - rows["fp32"]["nDCG@10"], 4)
            rows[mode]["max_abs_score_vs_fp32"] = max(abs(a - b) for a, b in zip(scores[mode], scores["fp32"]))
            rows[mode]["same_ranking_queries"] = sum(_docids(runs[mode], q) == _docids(runs["fp32"], q)
                                                     for q in runs["fp32"].ranking)
            rows[mode]["top10_overlap_vs_fp32"] = round(statistics.mean(
                len(top[mode][q] & top["fp32"][q]) / 10 for q in top["fp32"]), 4)
        out[name] = rows
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", metavar="DIR", help="a trained monobert (default: MiniLM, seeded head)")
    parser.add_argument("--pairs", type=int, default=800, help="DL19 pairs timed (default 800)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads, both libraries (default 1)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--modes", nargs="*", choices=MODES, default=list(MODES)[:-1],
                        help="modes timed (default all but fp32-old; none: no timing)")
    parser.add_argument("--ndcg-modes", nargs="*", choices=MODES[1:], default=["fp32", "bf16", "int8"],
                        help="modes evaluated on DL19/DL20 with --checkpoint (default fp32 bf16 int8; none: skip)")
    parser.add_argument("--ndcg-threads", type=int, help="torch threads for the nDCG reranks (default: --threads)")
    parser.add_argument("--max-length", type=int, default=256, help="word pieces (default 256; a checkpoint's own)")
    parser.add_argument("--gpu-only", action="store_true", help="only the GPU measurements (_inference_gpu.py)")
    parser.add_argument("--output", default="inference-speed", help="eval/benchmarks/<NAME>.json (with --record)")
    parser.add_argument("--record", action="store_true", help="write eval/benchmarks/<--output>.json")
    add_gpu_args(parser)
    args = parser.parse_args(argv)

    import torch

    from pipeline import log

    log.configure(quiet=True)
    torch.set_num_threads(args.threads)
    model = load_monobert(args.checkpoint, args.max_length)
    payload = {"cpu": cpu_name(), "threads": args.threads, "torch": torch.__version__,
               "checkpoint": args.checkpoint, "max_length": model.config.max_length}
    if not args.gpu_only:
        import sentence_transformers

        ce = cross_encoder(model)
        functions = scorers(model, ce)
        _, pairs = dl_pairs("dl19-passage")
        pairs = pairs[:args.pairs]
        payload |= {"sentence_transformers": sentence_transformers.__version__, "pairs": len(pairs),
                    "repeats": args.repeats}
        if args.modes:
            payload |= {"speed": timed({m: functions[m] for m in args.modes}, pairs, args.repeats),
                        "scores": score_differences(ce, functions, args.modes, pairs)}
        if args.checkpoint and args.ndcg_modes:
            torch.set_num_threads(args.ndcg_threads or args.threads)
            payload["ndcg_threads"] = torch.get_num_threads()
            payload["ndcg"] = ndcg_by_mode(functions, list(dict.fromkeys(["fp32", *args.ndcg_modes])))
        _print_cpu(payload)
    payload["gpu"] = gpu_measurements(args, model)
    print("gpu:", payload["gpu"].get("skipped", "see the JSON"))
    if args.record:
        record(args.output, __spec__.name, argv, payload)
    return 0


def _print_cpu(payload: dict) -> None:
    print(f"{payload['cpu']}, {payload['threads']} thread(s), {payload['pairs']} DL19 pairs, {payload['repeats']} rounds")
    print(f"{'mode':<16} {'pairs/s':>8} {'x CrossEncoder':>15} {'max |d| vs CE':>14} {'max |d| vs fp32':>16}")
    for mode, row in payload.get("speed", {}).items():
        diff = payload["scores"].get(mode, {})
        print(f"{mode:<16} {row['pairs_per_s']:>8} {row.get('speedup_vs_crossencoder', ''):>15} "
              f"{diff.get('max_abs_vs_crossencoder', 0):>14.2e} {diff.get('max_abs_vs_fp32', 0):>16.2e}")
    for dataset, rows in payload.get("ndcg", {}).items():
        print(dataset, ", ".join(f"{m} nDCG@10 {r['nDCG@10']} ({r['delta_vs_fp32']:+.4f}, top-10 overlap "
                                 f"{r['top10_overlap_vs_fp32']})" for m, r in rows.items()))


if __name__ == "__main__":
    sys.exit(run_main(main))

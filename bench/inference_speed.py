"""Benchmark: irpipe's batched inference beside sentence-transformers' CrossEncoder, in one run.

    python -m bench.inference_speed --checkpoint models/monobert-dl19 --threads 1 --repeats 3 --record

CPU, always. The same `--pairs` DL19 pairs (the first of dl19-passage's shipped BM25 top-100: real query and passage
texts), the same weights (monobert's; CrossEncoder gets the all-MiniLM-L6-v2 folder with a num_labels=1 head, then
monobert's state dict: BERT as is, head weight w_rel - w_nonrel, so it outputs monobert's score z_rel - z_nonrel),
256 word pieces, the same torch threads. One pass over the pairs per mode, the modes interleaved (their order
rotated each round), `--repeats` rounds; pairs/s and the ratio to CrossEncoder in the same round, medians:
- crossencoder: `CrossEncoder.predict` as a user runs it (defaults: fp32, batches of 32 sorted by characters);
- fp32 (`amp=none`): irpipe's default on the CPU; fp32-b64: the same in batches of 64 pairs, no token budget;
  fp32-all-layers: the same without running the last layer for [CLS] alone (what each part is worth);
  fp32-old: irpipe before the token budget (sorted by characters, 64 pairs a batch, every layer over every position);
- bf16 (`amp=bf16`) and int8 (`quantize=int8`): irpipe's fast CPU options; any other int8 scheme by its name
  (int8-channel, int8-vnni:ffn-out, ...: pipeline/rerank/quantize.py).
Scores: max |difference| of each mode from CrossEncoder's raw scores (fp32 aims at <= 1e-4), and from its own scores
of the first half of the pairs scored alone (other batches: how much a mode amplifies fp32's ~1e-6). With
`--checkpoint` (a trained monobert) also each of `--quality-modes`' nDCG@10, RR@10 and AP on DL19 and DL20 (all
43 / 54 queries' top-100) beside fp32's, with what moved a ranking (`quality_by_mode`); `--modes` with no value
skips the timing:

    python -m bench.inference_speed --checkpoint CKPT --modes --quality-modes fp32 bf16 int8 \
        --output inference-quality --record
`--keep-scores DIR` keeps each quality mode's scores in DIR and reuses them (fp32's computed once for several runs);
`--batch-tokens N` scores every irpipe mode in batches of at most N padded positions (default the CPU's 2,048).
GPU (only when CUDA is present; here skipped with the reason): bench/_inference_gpu.py.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

from bench import record, record_name, run_main
from bench._inference_gpu import add_gpu_args, gpu_measurements
from bench._inference_models import cpu_name, cross_encoder, dl_pairs, load_monobert

MODES = ("crossencoder", "fp32", "fp32-b64", "fp32-all-layers", "bf16", "int8", "fp32-old")


def scorers(model, ce, modes, device: str = "cpu", batch_tokens: int | None = None) -> dict:
    """mode -> (pairs -> scores) of each of `modes` (fp32 always) on the CPU; crossencoder's as a user calls it
    (sigmoid included); an int8 scheme (pipeline/rerank/quantize.py: int8, int8-channel:ffn-out, ...) on a copy;
    irpipe's modes in batches of at most `batch_tokens` padded positions (None: the device's default)."""
    from pipeline.rerank.quantize import quantize_linears
    from pipeline.rerank.scoring import predict

    every_layer = copy.deepcopy(model)
    every_layer.cls_only = False
    run = lambda m, **kw: lambda pairs: predict(  # noqa: E731
        m, pairs, device=device, desc="timed", **({"batch_tokens": batch_tokens} | kw)).scores

    def old(pairs):  # the batches irpipe scored in before the token budget: by characters, 64 at a time
        by_chars = sorted(range(len(pairs)), key=lambda i: -(len(pairs[i].query) + len(pairs[i].text)))
        return predict(every_layer, pairs, 64, device, "none", desc="timed", order=by_chars, batch_tokens=0).scores

    fixed = {"fp32-old": old, "crossencoder": lambda pairs: ce.predict([(p.query, p.text) for p in pairs],
                                                                       show_progress_bar=False),
             "fp32": run(model, amp="none"), "fp32-b64": run(model, amp="none", batch_size=64, batch_tokens=0),
             "fp32-all-layers": run(every_layer, amp="none"), "bf16": run(model, amp="bf16")}
    return {mode: fixed[mode] if mode in fixed else run(quantize_linears(copy.deepcopy(model), mode))
            for mode in dict.fromkeys(["fp32", *modes])}


NONE = "none"  # --modes none / --quality-modes none: the same as the flag with no value (that part skipped)


def mode(value: str) -> str:
    """A --modes value: one of MODES, an int8 scheme (checked here, so a typo stops before any model runs), or
    `none` (nothing: `without_none` turns ["none"] into [])."""
    from pipeline.rerank.quantize import parse_scheme

    if value not in (*MODES, NONE):
        try:
            parse_scheme(value)
        except Exception as error:
            raise argparse.ArgumentTypeError(f"{value!r} is neither one of {', '.join(MODES)} nor an int8 scheme "
                                             f"({error})") from None
    return value


def without_none(parser: argparse.ArgumentParser, flag: str, values: list[str]) -> list[str]:
    """`values` of `flag` with `none` read as no modes; `none` beside a mode is argparse's exit 2."""
    if NONE in values and len(values) > 1:
        parser.error(f"{flag}: 'none' means no modes, so it stands alone (got {' '.join(values)})")
    return [] if values == [NONE] else values


def timed(functions: dict, pairs: list, repeats: int, reference: str = "crossencoder") -> dict:
    """Each function over `pairs`, interleaved: `repeats` rounds, the order rotated every round (a slow phase of a
    busy machine falls on every mode alike). -> name -> {seconds per round, pairs/s (median), ratio to `reference`
    in the same round (median), as speedup_vs_<reference>}."""
    names = list(functions)
    for function in functions.values():  # warm-up, a whole pass: first calls allocate and load kernels, and a compiled
        function(pairs)                  # mode compiles for the batch shapes the timed rounds meet
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
        if reference in seconds:
            row[f"speedup_vs_{reference}"] = round(statistics.median(
                c / s for c, s in zip(seconds[reference], seconds[name])), 3)
        out[name] = row
    return out


def score_differences(ce, functions: dict, modes: list[str], pairs: list) -> dict:
    """Max |score - CrossEncoder's raw score| of each irpipe mode on `pairs`, of each mode from fp32, and from the
    mode's own scores of the first half of `pairs` scored alone (other batch neighbours, other padding: fp32 moves
    by ~1e-6 there; a mode that amplifies that much noise cannot keep near-ties in order)."""
    import torch

    reference = [float(s) for s in ce.predict([(p.query, p.text) for p in pairs], show_progress_bar=False,
                                               activation_fn=torch.nn.Identity())]
    scores = {name: functions[name](pairs) for name in dict.fromkeys(["fp32", *modes]) if name != "crossencoder"}
    half = len(pairs) // 2
    return {name: {"max_abs_vs_crossencoder": max(abs(a - b) for a, b in zip(values, reference)),
                   "max_abs_vs_fp32": max(abs(a - b) for a, b in zip(values, scores["fp32"])),
                   "max_abs_other_batches": max(abs(a - b) for a, b in zip(functions[name](pairs[:half]), values))}
            for name, values in scores.items()}


MEASURES = ("nDCG@10", "RR@10", "AP")  # RR and AP at the datasets' relevance level (2 for DL)


def _docids(run, qid: str) -> list[str]:
    return [docid for docid, _ in run.ranking[qid]]


def swaps(run, fp32_run, fp32_scores: dict, depth: int = 10) -> tuple[int, float]:
    """The pairs of documents in either run's top `depth` (per query) that `run` orders the other way round from
    fp32, and the largest fp32 score gap among them (a swap of a near-tie has a gap within the mode's score error)."""
    count, widest = 0, 0.0
    for qid, hits in fp32_run.ranking.items():
        fp32_rank = {d: i for i, d in enumerate(_docids(fp32_run, qid))}
        rank = {d: i for i, d in enumerate(_docids(run, qid))}
        docs = sorted({d for d, _ in hits[:depth]} | set(_docids(run, qid)[:depth]), key=fp32_rank.get)
        for i, a in enumerate(docs):
            for b in docs[i + 1:]:
                if rank[a] > rank[b]:
                    count += 1
                    widest = max(widest, fp32_scores[qid][a] - fp32_scores[qid][b])
    return count, widest


def adjacent_gap(run, depth: int = 10) -> float:
    """The median score gap between neighbours in the runs' top `depth`: how close a typical pair of ranks lies."""
    return statistics.median(a[1] - b[1] for hits in run.ranking.values() for a, b in zip(hits[:depth], hits[1:depth]))


def saved_scores(function, path):
    """`function` (pairs -> scores), its scores kept in JSON file `path` (None: not kept): a later run that names
    the same folder reuses them (fp32's, 25 minutes at 1 thread, measured once for every mode compared with it)."""
    import json

    def scores(pairs):
        if path is not None and Path(path).is_file():
            return json.loads(Path(path).read_text())
        values = function(pairs)
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(f"{path}.tmp").write_text(json.dumps(values))
            Path(f"{path}.tmp").replace(path)
        return values
    return scores


def quality_by_mode(functions: dict, modes: list[str], done=lambda quality: None, keep: str | None = None,
                    queries: int | None = None) -> dict:
    """nDCG@10, RR@10 and AP of each mode reranking DL19 and DL20's shipped top-100, beside fp32's: the measures'
    differences, the largest score difference, rankings and top 10s that agree, queries whose nDCG@10 moved, and the
    swapped top-10 pairs with their widest fp32 gap (is a change a near-tie?). Mode by mode, fp32 first, on both
    datasets; `done(quality so far)` after each (a slow mode's rows come last, the others' are kept meanwhile); with
    `keep` (a folder), each mode's scores are kept there and reused (`saved_scores`: "reused" for its seconds); with
    `queries` (N), only the first N judged queries of each dataset (a slow set of modes on a busy machine)."""
    data = {name: dl_pairs(name, queries) for name in ("dl19-passage", "dl20-passage")}
    out = {name: {"rel_level": dataset.rel_level, "modes": {}} for name, (dataset, _) in data.items()}
    fp32 = {}
    for mode in dict.fromkeys(["fp32", *modes]):
        for name, (dataset, pairs) in data.items():
            start, path = time.perf_counter(), keep and f"{keep}/{name}/{mode}.json"
            reused = bool(path) and Path(path).is_file()
            scores, run, table = _reranked(saved_scores(functions[mode], path), dataset, pairs)
            if mode == "fp32":
                fp32[name] = scores, run, table
                out[name]["median_adjacent_top10_gap_fp32"] = adjacent_gap(run)
            out[name]["modes"][mode] = _row(scores, run, table, *fp32[name]) | {
                "seconds": "reused" if reused else round(time.perf_counter() - start)}
            print(f"{name} {mode}: " + ", ".join(f"{m} {out[name]['modes'][mode][m]}" for m in MEASURES), flush=True)
            done(out)
    return out


def _reranked(function, dataset, pairs) -> tuple[dict, object, dict]:
    """qid -> docid -> score of `function` on `pairs`, the run, and measure -> qid -> value."""
    from pipeline.data.runs import Run
    from pipeline.evaluation import per_query
    from pipeline.rerank.pairs import scores_by_query

    scores = scores_by_query(pairs, function(pairs))
    run = Run.from_scores(scores)
    table = per_query(run, dataset.qrels(), list(MEASURES), rel_level=dataset.rel_level)
    table = {measure: {q: v for q, v in values.items() if q in scores} for measure, values in table.items()}
    return scores, run, dict(zip(MEASURES, table.values()))  # keyed as asked ("RR@10", not "RR(rel=2)@10")


def _row(scores: dict, run, table: dict, fp32_scores: dict, fp32_run, fp32_table: dict) -> dict:
    """A mode's measures and how its ranking differs from fp32's."""
    means = {m: statistics.mean(table[m].values()) for m in MEASURES}
    fp32_means = {m: statistics.mean(fp32_table[m].values()) for m in MEASURES}
    top = lambda r, q: {d for d, _ in r.ranking[q][:10]}  # noqa: E731
    count, widest = swaps(run, fp32_run, fp32_scores)
    return {"queries": len(table["nDCG@10"])} | {m: round(means[m], 4) for m in MEASURES} | {
        f"delta_{m}_vs_fp32": round(means[m] - fp32_means[m], 4) for m in MEASURES} | {
        "max_abs_score_vs_fp32": max(abs(s - fp32_scores[q][d]) for q, docs in scores.items() for d, s in docs.items()),
        "same_ranking_queries": sum(_docids(run, q) == _docids(fp32_run, q) for q in fp32_run.ranking),
        "top10_overlap_vs_fp32": round(statistics.mean(len(top(run, q) & top(fp32_run, q)) / 10
                                                       for q in fp32_run.ranking), 4),
        "ndcg_changed_queries": sum(abs(v - fp32_table["nDCG@10"][q]) > 1e-9 for q, v in table["nDCG@10"].items()),
        "top10_swaps": count, "max_fp32_gap_of_swaps": widest,
        "tied_scores_in_top10": sum(len({s for _, s in hits[:10]}) < len(hits[:10]) for hits in run.ranking.values())}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, `none` read as no modes in --modes and --quality-modes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", metavar="DIR", help="a trained monobert (default: MiniLM, seeded head)")
    parser.add_argument("--pairs", type=int, default=800, help="DL19 pairs timed (default 800)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads, both libraries (default 1)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--modes", nargs="*", type=mode, default=list(MODES)[:-1], metavar="MODE",
                        help=f"modes timed: {', '.join(MODES)} or an int8 scheme (int8-channel:ffn-out+head, "
                             "pipeline/rerank/quantize.py) (default all but fp32-old; none, or no value: no timing)")
    parser.add_argument("--quality-modes", nargs="*", type=mode, default=["fp32", "bf16", "int8"], metavar="MODE",
                        help="modes evaluated on DL19/DL20 with --checkpoint (default fp32 bf16 int8; "
                        "none, or no value: skip)")
    parser.add_argument("--quality-threads", type=int, help="torch threads for the DL reranks (default: --threads)")
    parser.add_argument("--keep-scores", metavar="DIR", help="keep each quality mode's DL scores in DIR and reuse "
                        "them in a later run (fp32's measured once for several runs)")
    parser.add_argument("--max-length", type=int, default=256, help="word pieces (default 256; a checkpoint's own)")
    parser.add_argument("--batch-tokens", type=int, metavar="N", help="padded positions a batch for irpipe's modes "
                        "(default: the CPU's 2,048; another N puts the same pairs in other batches: how much a mode's "
                        "DL measures move with its batch neighbours alone)")
    parser.add_argument("--gpu-only", action="store_true", help="only the GPU measurements (_inference_gpu.py)")
    parser.add_argument("--output", default="inference-speed", type=record_name,
                        help="eval/benchmarks/<NAME>.json (with --record)")
    parser.add_argument("--record", action="store_true", help="write eval/benchmarks/<--output>.json")
    add_gpu_args(parser)
    args = parser.parse_args(argv)
    args.modes = without_none(parser, "--modes", args.modes)
    args.quality_modes = without_none(parser, "--quality-modes", args.quality_modes)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    import torch

    from pipeline import log

    log.configure(quiet=True)
    torch.set_num_threads(args.threads)
    model = load_monobert(args.checkpoint, args.max_length)
    payload = {"cpu": cpu_name(), "threads": args.threads, "torch": torch.__version__,
               "checkpoint": args.checkpoint, "max_length": model.config.max_length, "batch_tokens": args.batch_tokens}

    def keep(**parts) -> None:
        """Record the payload so far with `parts` (a part still being measured), before the whole is done."""
        if args.record:
            record(args.output, __spec__.name, argv, payload | parts)

    if not args.gpu_only:
        import sentence_transformers

        ce = cross_encoder(model)
        functions = scorers(model, ce, [*args.modes, *(args.quality_modes if args.checkpoint else [])],
                            batch_tokens=args.batch_tokens)
        _, pairs = dl_pairs("dl19-passage")
        pairs = pairs[:args.pairs]
        payload |= {"sentence_transformers": sentence_transformers.__version__, "pairs": len(pairs),
                    "repeats": args.repeats}
        if args.modes:
            payload |= {"speed": timed({m: functions[m] for m in args.modes}, pairs, args.repeats),
                        "scores": score_differences(ce, functions, args.modes, pairs)}
        if args.checkpoint and args.quality_modes:
            torch.set_num_threads(args.quality_threads or args.threads)
            payload["quality_threads"] = torch.get_num_threads()
            # recorded after each mode too, with "quality_finished": false, so a slow mode's wait keeps the others'
            payload["quality"] = quality_by_mode(functions, args.quality_modes,
                                                 lambda quality: keep(quality=quality, quality_finished=False),
                                                 args.keep_scores)
            payload["quality_finished"] = True
        _print_cpu(payload)
    # recorded after each section too: a call cut off by the GPU machine's limits keeps what it measured
    payload["gpu"] = gpu_measurements(args, model, lambda gpu: keep(gpu=gpu, gpu_finished=False))
    payload["gpu_finished"] = "skipped" not in payload["gpu"]
    print("gpu:", payload["gpu"].get("skipped", "see the JSON"))
    if args.record:
        record(args.output, __spec__.name, argv, payload)
    return 0


def _print_cpu(payload: dict) -> None:
    print(f"{payload['cpu']}, {payload['threads']} thread(s), {payload['pairs']} DL19 pairs, {payload['repeats']} rounds")
    if payload.get("speed"):
        print(f"{'mode':<16} {'pairs/s':>8} {'x CrossEncoder':>15} {'max |d| vs CE':>14} {'max |d| vs fp32':>16} "
              f"{'other batches':>14}")
    for mode, row in payload.get("speed", {}).items():
        diff = payload["scores"].get(mode, {})
        print(f"{mode:<16} {row['pairs_per_s']:>8} {row.get('speedup_vs_crossencoder', ''):>15} "
              f"{diff.get('max_abs_vs_crossencoder', 0):>14.2e} {diff.get('max_abs_vs_fp32', 0):>16.2e} "
              f"{diff.get('max_abs_other_batches', 0):>14.2e}")
    for dataset, quality in payload.get("quality", {}).items():
        for mode, r in quality["modes"].items():
            print(f"{dataset} {mode:<16}", ", ".join(f"{m} {r[m]} ({r[f'delta_{m}_vs_fp32']:+.4f})" for m in MEASURES),
                  f"top-10 overlap {r['top10_overlap_vs_fp32']}, max |d| vs fp32 {r['max_abs_score_vs_fp32']:.2e}")


if __name__ == "__main__":
    sys.exit(run_main(main))

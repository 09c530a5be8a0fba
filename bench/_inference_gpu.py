"""The GPU half of the inference benchmark: run by `python -m bench.inference_speed` when
CUDA is present, recorded as skipped, with the reason, when it is not. On a GPU machine, the one command:

    python -m bench.inference_speed --checkpoint models/monobert-dl19 --gpu-only --record \\
        --output inference-speed-gpu        # add --dev-queries 100 for a first, short run

1. side by side with CrossEncoder in bf16 (irpipe: bf16 autocast, its CUDA default; CrossEncoder: the model in
   bf16, batches of 32 (its default) and of `--gpu-batch-size`), every DL19 + DL20 pair, interleaved rounds:
   pairs/s, the ratio, and the model FLOPs utilisation beside it (FLOPs of a full BERT pass over each pair's real
   word pieces / seconds / the GPU's dense bf16 peak);
2. irpipe's token budget swept (`--gpu-budgets`): which batch size keeps this GPU busiest;
3. dev-small size end to end: the 6,980 dev-small query texts x `--dev-candidates` (1,000) passages each, drawn
   (seeded) from the DL19 + DL20 candidate pool (real MS MARCO passages: MS MARCO's length distribution): monobert
   over every pair, and ADDAX from a store of the pool (the encoding timed apart): wall seconds;
4. DL19 and DL20 nDCG@10 of the checkpoint on the GPU (bf16, and fp32) beside the same checkpoint on this machine's
   CPU (fp32), with top-10 agreement;
5. training pairs/s of monobert, ADDAX and keyword-BERT on the GPU and on the CPU (rerank_speed.bench_model).
And by hand, one WikiQA recipe trained on the GPU within its pinned CPU tolerance:
`irpipe run eval/wikiqa-monobert.yaml --check` (device auto: CUDA).
`--gpu-device cpu` runs all of it on the CPU, small (`--dev-queries 2 --dev-candidates 20`): a smoke test.
"""
from __future__ import annotations

import collections
import random
import statistics
import time

from bench._inference_models import cross_encoder, dl_pairs, load_monobert, model_flops
from pipeline.log import logger

# Dense bf16 peak FLOP/s (no sparsity), by a piece of torch.cuda.get_device_name(); the first match wins.
PEAK_BF16 = (("H100 PCIe", 756e12), ("H100", 989e12), ("H200", 989e12), ("GH200", 989e12), ("B200", 2250e12),
             ("A100", 312e12), ("L40S", 362e12), ("L4", 121e12), ("A10", 125e12))


SECTIONS = ("side_by_side", "token_budgets", "dev_small", "dl_ndcg", "training")


def add_gpu_args(parser) -> None:
    group = parser.add_argument_group("GPU (only with CUDA)")
    group.add_argument("--gpu-device", default="cuda", help="cuda, cuda:N (cpu: a small smoke test of the code)")
    group.add_argument("--gpu-batch-size", type=int, default=512, help="irpipe pairs a batch at most (default 512)")
    group.add_argument("--gpu-budgets", type=int, nargs="+", default=[16_384, 32_768, 65_536, 131_072],
                       help="token budgets swept (default 16k 32k 64k 128k)")
    group.add_argument("--dev-queries", type=int, default=6980, help="dev-small queries (default all 6,980)")
    group.add_argument("--dev-candidates", type=int, default=1000, help="passages a query (default 1,000)")
    group.add_argument("--gpu-rounds", type=int, default=3, help="interleaved rounds (default 3)")
    group.add_argument("--train-steps", type=int, default=20, help="timed training steps a model (default 20)")
    group.add_argument("--gpu-sections", nargs="+", choices=SECTIONS, default=list(SECTIONS),
                       help="the sections measured, in this order (default all): a later call measures those a "
                            "call cut off at its cap did not reach")


def gpu_measurements(args, cpu_model, partial=lambda out: None) -> dict:
    """The sections below, each recorded through `partial` as soon as it is measured."""
    import torch

    if args.gpu_device != "cpu" and not torch.cuda.is_available():
        return {"skipped": "no CUDA device here (torch.cuda.is_available() is False); on a GPU machine run: "
                           "python -m bench.inference_speed --checkpoint DIR --gpu-only --record "
                           "--output inference-speed-gpu"}
    device = torch.device(args.gpu_device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (smoke test)"
    peak = next((flops for piece, flops in PEAK_BF16 if piece in name), None)
    model = load_monobert(args.checkpoint, args.max_length).to(device)
    out = {"device": name, "bf16_peak_flops": peak, "torch": torch.__version__}
    smoke = device.type == "cpu"  # the code path, on a few pairs
    _, pairs = dl_pairs("dl19-passage")
    pairs = (pairs + dl_pairs("dl20-passage")[1])[:8 if smoke else None]  # smoke: bf16 is emulated on many CPUs
    sections = {"side_by_side": lambda: side_by_side(model, pairs, device, args, peak),
                "token_budgets": lambda: budget_sweep(model, pairs, device, args),
                "dev_small": lambda: dev_small(model, device, args, pool_size=100 if smoke else None),
                "dl_ndcg": lambda: gpu_vs_cpu(model, cpu_model, device, *((1, 20) if smoke else (None, None))),
                "training": lambda: training_speed(device, args)}
    for key in args.gpu_sections:  # one GPU call: a section that fails or is cut off keeps the others'
        try:
            out[key] = sections[key]()
        except Exception as error:  # noqa: BLE001 -- recorded with its type, the call goes on to the next section
            logger.exception("gpu: %s failed", key)
            out[key] = {"error": f"{type(error).__name__}: {error}"}
        partial(out)
    return out


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def side_by_side(model, pairs, device, args, peak) -> dict:
    """irpipe (bf16 autocast, the CUDA default) and CrossEncoder in bf16 over `pairs`, interleaved rounds."""
    import torch

    from pipeline.rerank.scoring import predict

    ce = cross_encoder(model.cpu(), device=str(device), dtype=torch.bfloat16)
    model.to(device)
    texts = [(p.query, p.text) for p in pairs]
    runs = {"irpipe-bf16": lambda: predict(model, pairs, args.gpu_batch_size, device, desc="gpu").scores,
            "crossencoder-bf16-b32": lambda: ce.predict(texts, show_progress_bar=False),
            f"crossencoder-bf16-b{args.gpu_batch_size}": lambda: ce.predict(texts, batch_size=args.gpu_batch_size,
                                                                              show_progress_bar=False)}
    seconds = {k: [] for k in runs}
    for run in runs.values():
        run()  # warm-up
    for round_ in range(args.gpu_rounds):
        for key, run in runs.items():
            _sync(device)
            start = time.perf_counter()
            run()
            _sync(device)
            seconds[key].append(time.perf_counter() - start)
    flops = model_flops(model, pairs)
    out = {"pairs": len(pairs), "model_tflops": round(flops / 1e12, 2)}
    for key, values in seconds.items():
        median = statistics.median(values)
        out[key] = {"pairs_per_s": round(len(pairs) / median, 1), "seconds": [round(v, 3) for v in values],
                    "mfu": round(flops / median / peak, 4) if peak else None,
                    "speedup_vs_crossencoder_b32": round(statistics.median(
                        c / s for c, s in zip(seconds["crossencoder-bf16-b32"], values)), 3)}
    return out


def budget_sweep(model, pairs, device, args) -> dict:
    from pipeline.rerank.scoring import predict

    out = {}
    for budget in args.gpu_budgets:
        predict(model, pairs[:1000], 4096, device, batch_tokens=budget, desc="gpu")
        _sync(device)
        start = time.perf_counter()
        predict(model, pairs, 4096, device, batch_tokens=budget, desc="gpu")
        _sync(device)
        out[str(budget)] = round(len(pairs) / (time.perf_counter() - start), 1)
    return out


def dev_small(model, device, args, pool_size: int | None = None) -> dict:
    """The dev-small-sized job: real dev-small queries, each with passages drawn from the DL19 + DL20 pool."""
    from pipeline.data.registry import get_dataset
    from pipeline.rerank.models.addax import ADDAX, ADDAXConfig
    from pipeline.rerank.pairs import Pair
    from pipeline.rerank.scoring import predict
    from pipeline.rerank.store import EncodingStore, score_late_interaction, write_store

    pool = {}
    for name in ("dl19-passage", "dl20-passage"):
        pool.update(get_dataset(name).run().texts)
    docids = sorted(pool)[:pool_size]
    pool = {d: pool[d] for d in docids}
    topics = get_dataset("msmarco-passage/dev-small").topics()
    rng = random.Random(0)
    qids = list(topics.queries)[:args.dev_queries]
    pairs = [Pair(qid, d, topics[qid], pool[d]) for qid in qids for d in rng.sample(docids, args.dev_candidates)]
    out = {"queries": len(qids), "pairs": len(pairs), "pool": len(docids)}
    _sync(device)
    start = time.perf_counter()
    predict(model, pairs, args.gpu_batch_size, device, desc="dev-small monobert")
    _sync(device)
    out["monobert_seconds"] = round(time.perf_counter() - start, 1)
    import tempfile

    addax = ADDAX(ADDAXConfig()).eval().to(device)
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        write_store(folder, addax, "bench", pool.items(), batch_size=args.gpu_batch_size, device=device)
        _sync(device)
        out["addax_encode_pool_seconds"] = round(time.perf_counter() - start, 1)
        store = EncodingStore.open(folder, "addax", "bench")
        start = time.perf_counter()
        score_late_interaction(addax, pairs, store, args.gpu_batch_size, device, desc="dev-small addax")
        _sync(device)
        out["addax_from_store_seconds"] = round(time.perf_counter() - start, 1)
    return out


def gpu_vs_cpu(model, cpu_model, device, queries: int | None = None, depth: int | None = None) -> dict:
    """nDCG@10 on DL19 / DL20: the checkpoint on the GPU (bf16, fp32) and on the CPU (fp32); top-10 agreement.
    `queries` and `depth` (each query's first candidates) cut it down for the smoke test."""
    from pipeline.data.runs import Run
    from pipeline.evaluation import evaluate
    from pipeline.rerank.pairs import scores_by_query
    from pipeline.rerank.scoring import predict

    out = {}
    for name in ("dl19-passage", "dl20-passage"):
        dataset, pairs = dl_pairs(name)
        if queries is not None:
            pairs = [p for p in pairs if p.qid in list(dict.fromkeys(p.qid for p in pairs))[:queries]]
        if depth is not None:  # each query's first `depth` candidates, in the shipped order
            seen = collections.Counter()
            pairs = [p for p in pairs if (seen.update([p.qid]) or seen[p.qid]) <= depth]
        runs = {"gpu-bf16": predict(model, pairs, device=device, amp="bf16").scores,
                "gpu-fp32": predict(model, pairs, device=device, amp="none").scores,
                "cpu-fp32": predict(cpu_model, pairs, device="cpu", amp="none").scores}
        runs = {k: Run.from_scores(scores_by_query(pairs, v)) for k, v in runs.items()}
        top = {k: {q: {d for d, _ in hits[:10]} for q, hits in r.ranking.items()} for k, r in runs.items()}
        out[name] = {k: {"nDCG@10": round(next(iter(evaluate(r, dataset.qrels(), ["nDCG@10"],
                                                             rel_level=dataset.rel_level).values())), 4),
                         "top10_overlap_vs_cpu": round(statistics.mean(
                             len(top[k][q] & top["cpu-fp32"][q]) / 10 for q in top["cpu-fp32"]), 4)}
                     for k, r in runs.items()}
    return out


def training_speed(device, args) -> dict:
    """Training pairs/s (and inference pairs/s) of three models on the GPU and on the CPU, WikiQA."""
    from bench.rerank_speed import bench_model

    smoke = device.type == "cpu"  # the code path, on a few pairs and small batches
    rows, pairs, batch, warmup = {}, *((16, 8, 1) if smoke else (1000, 64, 2))
    for name in ("monobert", "addax", "kwbert"):
        for where in dict.fromkeys([str(device), "cpu"]):
            row = bench_model(name, "wikiqa/train", "wikiqa/test", args.train_steps, warmup, pairs, batch, None, where)
            rows[f"{name}@{where}"] = {k: row[k] for k in ("train_pairs_per_s", "seconds_per_step",
                                                            "inference_pairs_per_s")}
    return rows

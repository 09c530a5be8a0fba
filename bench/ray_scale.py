"""Benchmark: the ray engine at MS MARCO shape: BM25 top-1000 of the 6,980 dev-small queries over a synthetic
1M-passage collection, locally and on Ray with 1 and 2 workers; monobert reranking the top-100 of a subset of the
queries and biencoder encoding a subset of the passages on Ray with 1 and 2 workers; and, from the measured
per-worker rates, the wall time of the full dev-small rerank (top-1000: 6.98M pairs) and of encoding 8.8M passages.

    python -m bench.ray_scale --size 1000000 --workdir /tmp/ray-scale [--queries N] [--ray-queries N]
                                            [--pyserini] [--rerank-queries 60] [--encode-docs 4000] [--record [NAME]]

At MS MARCO's full size (recorded in eval/benchmarks/msmarco-full-size.json: 30 min indexing, once; then 28 min
of searching and reranking):

    python -m bench.ray_scale --size 8841823 --workdir /tmp/msmarco-full --pyserini \
        --rerank-queries 100 --encode-docs 0 --record msmarco-full-size

Search runs locally with `--threads` and with 1 thread, each in a fresh process (`irpipe search` as a user runs
it: its own JVM, cold), then on Ray with 1 and 2 workers of 1 thread (each worker its own fresh JVM), all in one
run (the ratios between them are what a loaded machine leaves comparable). A local search in a process whose JVM
has already searched thousands of queries is faster than a fresh one (the JIT's later compilations; 1M passages,
6,980 queries, 1 thread: 7.73 ms of CPU a query in the benchmark's JVM after 7,030 queries, recorded in
eval/benchmarks/ray-scale-1m-jvm-cpus.json, against 11.4 ms in a fresh process, eval/benchmarks/ray-scale-1m.json),
so local rows timed in a warm process (as before 2026-11-27) made a Ray worker look slower than a local thread for
what was the JVM's warm-up. Between them, the machine's own ceiling for two one-thread workers without Ray: two
fresh 1-thread local processes started at once, each on half the queries (`local-processes`; on a 2-core machine
a lone 1-thread JVM's compiler and collector threads run on the idle core, which two at once do not have, so Ray's
1 -> 2 worker scaling is read against this row's, not against 2.0). Each Ray row gives the workers' own rates
(`ray_2_over_ray_1_in_shards`: their summed rates, start-up left out) and `tail_seconds`, the driver's time from
the last shard's arrival to the merged run. On a shared machine the wall-clock rates carry the other processes'
load (and Linux's autogroup scheduler gives one session's processes one share of the CPU, however many workers it
starts), so each row also gives its CPU time per query (`time.process_time`: the local search's process; the Ray
workers' processes in their shards plus the driver's): what the work costs, which the load does not change much.
`--pyserini` adds Pyserini's own CLI (`python -m pyserini.search.lucene --bm25`, fresh process, `--threads`,
`--batch-size 128`: without a batch its CLI searches one query at a time) on the
same index and topics: its time, peak RSS and whether its lines are the local run's. Each row has a peak RSS: the
local rows' and Pyserini's their process's, the Ray rows each worker's.
`--rounds N` repeats the scaling rows (local 1 thread, 2 processes, Ray 1 and 2 workers) N times, interleaved, and
gives each ratio as the median of the rounds' (`search_ratios_per_round` has them all): on a shared host one
pass's ratios moved by a tenth between two runs of the same command (the host's speed, seen in the CPU per
query of every row alike). `--ray-queries N` runs the scaling rows on the first N queries only (their rates compare
with each other, and a 1-thread pass over all 6,980 queries at 8.8M passages is long).
The index's own build record (seconds, peak RSS of Python and Java) is copied into the result.
`--rerank-queries 0` / `--encode-docs 0` leave the rerank / encode parts (and their projections) out.
`--worker-niceness 15` runs the workers at Ray's own default niceness (irpipe's local cluster: 0). Ray's memory
monitor is off for the benchmark's cluster (RAY_memory_monitor_refresh_ms=0): on a shared machine it killed the
workers for the memory of other processes.

The collection is msmarco_scale's (40-80 words a passage from SQuAD's word distribution, seeded) and is indexed
once by `irpipe index` (kept in --workdir). Scores on it mean nothing; times do. monobert is all-MiniLM-L6-v2 with a
seeded head (its weights do not change its speed) at max_length 256; biencoder is the zero-shot all-MiniLM-L6-v2.
Every Ray output is checked against the local one (the same run, the same scores, the same store bytes). Each
worker has 1 CPU (1 torch or Lucene thread); the local search uses `--threads` (default 2, all cores here). The
machine is shared, so rates carry its load (printed). No GPU was measured unless `--device cuda` is given on a
machine with one.
"""
from __future__ import annotations

import argparse
import filecmp
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import REPO, machine, record, record_name, run_main
from bench.msmarco_scale import run_irpipe, write_synthetic_collection
from pipeline.data.runs import read_run

DEV_SMALL_QUERIES, TOP_K_FULL, MSMARCO_PASSAGES = 6980, 1000, 8_841_823
WORKERS_PROJECTED = (1, 2, 8, 32)


def _local_search(work: Path, index: Path, topics, threads: int) -> tuple[Path, dict]:
    """irpipe's BM25 stage in a fresh process (bm25_speed's worker: its clock and CPU from opening the index to the
    written run): the run file (tagged "Anserini") and its row."""
    from bench.bm25_speed import timed_search

    topics_file, output = _topics_file(work, topics), work / f"local-{threads}-{len(topics)}.trec"
    side = timed_search("ours", index, topics_file, output, TOP_K_FULL, threads)
    return output, {"engine": "local", "workers": None, "threads": threads, "queries": len(topics),
                    "seconds": round(side["seconds"], 1), "queries_per_s": round(len(topics) / side["seconds"], 1),
                    "cpu_ms_per_query": {"total": round(1000 * side["cpu_seconds"] / len(topics), 2)},
                    "peak_rss_mib": side["peak_rss_mib"]}


def _processes_at_once(work: Path, index: Path, topics, count: int = 2) -> tuple[list[Path], dict]:
    """The machine's own ceiling for `count` one-thread workers, without Ray: `count` fresh local 1-thread searches
    (`_local_search`'s processes) started at once, each on its contiguous part of the topics. Their wall time is
    the longest one's (each timed from opening the index, as the local rows): their run files and row."""
    from concurrent.futures import ThreadPoolExecutor

    from bench.bm25_speed import timed_search

    qids = list(topics.queries)
    size = -(-len(qids) // count)
    parts = [topics.subset(qids[start:start + size]) for start in range(0, len(qids), size)]
    files = [(_topics_file(work, part, f"part-{number}-of-{count}"), work / f"processes-{count}-{number}.trec")
             for number, part in enumerate(parts)]
    with ThreadPoolExecutor(len(files)) as pool:
        sides = list(pool.map(lambda paths: timed_search("ours", index, *paths, TOP_K_FULL, 1), files))
    seconds = max(side["seconds"] for side in sides)
    return [output for _, output in files], {
        "engine": "local-processes", "workers": count, "threads": 1, "queries": len(topics),
        "seconds": round(seconds, 1), "queries_per_s": round(len(topics) / seconds, 1),
        "per_process_seconds": [round(side["seconds"], 1) for side in sides],
        "cpu_ms_per_query": {"total": round(1000 * sum(side["cpu_seconds"] for side in sides) / len(topics), 2)},
        "peak_rss_mib": [side["peak_rss_mib"] for side in sides]}


def _topics_file(work: Path, topics, name: str | None = None) -> Path:
    path = work / f"topics-{name or len(topics)}.tsv"
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(f"{qid}\t{' '.join(text.split())}\n" for qid, text in topics.items())
    return path


def _ray_search(work: Path, index: Path, topics, options) -> tuple[Path, dict]:
    from pipeline.retrieve.on_cluster import search_on_cluster
    from pipeline.stages.bm25 import BM25

    stage = BM25(str(index), hits=TOP_K_FULL, threads=1)
    start, cpu = time.perf_counter(), time.process_time()
    run, stats = search_on_cluster(stage, topics, options)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    output = work / f"ray-{options.workers}-{len(topics)}.trec"
    run.write(output, tag="Anserini")
    arrived, workers_cpu = stats["arrived"], sum(w["cpu_seconds"] for w in stats["workers"])
    return output, {"engine": "ray", "workers": options.workers, "threads": 1, "queries": len(topics),
                    "seconds": round(seconds, 1), "queries_per_s": round(len(topics) / seconds, 1),
                    "per_worker": stats["workers"], "tail_seconds": stats["tail_seconds"],
                    "shards_before_an_earlier_one": sum(a > b for a, b in zip(arrived, arrived[1:])),
                    "cpu_ms_per_query": {"workers": round(1000 * workers_cpu / len(topics), 2),
                                         "driver": round(1000 * cpu / len(topics), 2),
                                         "total": round(1000 * (workers_cpu + cpu) / len(topics), 2)},
                    "peak_rss_mib": {"workers": [w["peak_rss_mib"] for w in stats["workers"]]}}


def _pyserini_row(work: Path, index: Path, topics, local_file: Path, threads: int) -> dict:
    """Pyserini's own CLI (`python -m pyserini.search.lucene --bm25`) on the same index and topics, in a fresh
    process with `threads` threads: its time, its peak RSS and whether its lines are the local run's."""
    from bench.bm25_speed import PYSERINI_BATCH, same_lines, timed_search

    theirs = work / "pyserini.trec"
    side = timed_search("pyserini", index, _topics_file(work, topics), theirs, TOP_K_FULL, threads)
    return {"engine": "pyserini-cli", "workers": None, "threads": threads,
            "batch_size": PYSERINI_BATCH if threads > 1 else 1, "queries": len(topics),
            "seconds": round(side["seconds"], 1), "queries_per_s": round(len(topics) / side["seconds"], 1),
            "cpu_ms_per_query": {"total": round(1000 * side["cpu_seconds"] / len(topics), 2)},
            "peak_rss_mib": side["peak_rss_mib"], "identical_to_local": same_lines(local_file, theirs)}


def _rates(kind: str, items: int, stats: dict, unit: str) -> dict:
    per_worker = [w["per_second"] for w in stats["workers"]]
    return {"engine": "ray", "workers": len(per_worker), unit: items, "seconds": stats["seconds"],
            f"{unit}_per_s": round(items / stats["seconds"], 1), f"{unit}_per_s_per_worker": per_worker,
            f"cpu_ms_per_{unit[:-1]}": round(1000 * sum(w["cpu_seconds"] for w in stats["workers"]) / items, 2)}


def bench(args) -> dict:
    from pipeline.engine import EngineOptions
    from pipeline.engine import cluster
    from pipeline.data.registry import get_dataset

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    collection, index = work / f"collection-{args.size}.tsv", work / f"index-{args.size}"
    if not collection.exists():
        write_synthetic_collection(collection, args.size)
    if not (index / "irpipe-index.json").exists():
        run_irpipe("index", "--input", str(collection), "--output", str(index), "--threads", "2")
    gpus = 1.0 if args.device.startswith("cuda") else 0.0
    ray_options = {n: EngineOptions("ray", workers=n, gpus_per_worker=gpus, shard_pairs=args.shard_pairs) for n in (1, 2)}
    os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")  # see --help: a shared machine's memory, not ours
    cluster.WORKER_NICENESS = args.worker_niceness
    cluster.connect(ray_options[2])  # one local cluster with room for 2 workers, for every job
    built = json.loads((index / "irpipe-index.json").read_text())
    result = {"collection": {"passages": args.size, "index": str(index), "index_seconds": built.get("seconds"),
                             "index_peak_rss_mib": built.get("peak_rss_mb"), "index_threads": built.get("threads")},
              "search": [], "rerank": [], "encode": []}

    topics = get_dataset("msmarco-passage/dev-small").topics()
    topics = topics.subset(list(topics.queries)[:args.queries])
    ray_topics = topics.subset(list(topics.queries)[:args.ray_queries]) if args.ray_queries else topics
    def add(row: dict, *outputs: Path, **more) -> None:
        if outputs:
            row["identical_to_local"] = same_queries == sorted(line for output in outputs
                                                               for line in output.read_text().splitlines())
        row |= more
        result["search"].append(row)
        print(json.dumps(row), flush=True)

    local_file, row = _local_search(work, index, topics, args.threads)
    same_queries = sorted(line for line in local_file.read_text().splitlines()  # the local run's lines, of the
                          if line.split(" ", 1)[0] in ray_topics.queries)       # queries the other rows search
    add(row)
    if args.pyserini:
        add(_pyserini_row(work, index, topics, local_file, args.threads))
    for number in range(args.rounds):  # interleaved: a slow spell of the host falls on every row of a round alike
        output, row = _local_search(work, index, ray_topics, 1)
        add(row, output, round=number)
        outputs, row = _processes_at_once(work, index, ray_topics)
        add(row, *outputs, round=number)
        for workers in (1, 2):
            output, row = _ray_search(work, index, ray_topics, ray_options[workers])
            add(row, output, round=number)
    per_round = [_ratios([r for r in result["search"] if r.get("round", number) == number], args.threads)
                 for number in range(args.rounds)]
    result["search_ratios"] = {key: round(statistics.median(ratios[key] for ratios in per_round), 2)
                               for key in per_round[0]}  # of the rounds' (one round: its own)
    if args.rounds > 1:
        result["search_ratios_per_round"] = per_round
    print(json.dumps(result["search_ratios"]), flush=True)
    if args.rerank_queries:  # its candidates: the local run's (7M lines at full size: read only for this)
        _rerank(args, work, index, topics, read_run(local_file), ray_options, result)
    if args.encode_docs:
        _encode(args, work, collection, ray_options, result)
    result["projection"] = project(result, args.device)
    return result


def _ratios(rows: list[dict], threads: int) -> dict:
    """Ray's throughput against itself and the local search's; each row's CPU per query against a local thread's."""
    rate = {(r["engine"], r["workers"] or r["threads"]): r["queries_per_s"] for r in rows}
    cpu = {(r["engine"], r["workers"] or r["threads"]): r["cpu_ms_per_query"]["total"] for r in rows
           if "cpu_ms_per_query" in r}
    pyserini = ({f"local_{threads}_threads_over_pyserini_cli": round(rate["local", threads] / rate["pyserini-cli", threads], 2)}
                if ("pyserini-cli", threads) in rate else {})
    in_shards = {r["workers"]: sum(w["per_second"] for w in r["per_worker"]) for r in rows if r["engine"] == "ray"}
    return pyserini | {"ray_2_over_ray_1": round(rate["ray", 2] / rate["ray", 1], 2),
            "ray_2_over_ray_1_in_shards": round(in_shards[2] / in_shards[1], 2),  # the workers' own rates, summed
            "machine_2_processes_over_local_1_thread": round(rate["local-processes", 2] / rate["local", 1], 2),
            "ray_2_over_2_processes": round(rate["ray", 2] / rate["local-processes", 2], 2),
            f"ray_2_over_local_{threads}_threads": round(rate["ray", 2] / rate["local", threads], 2),
            "ray_1_over_local_1_thread": round(rate["ray", 1] / rate["local", 1], 2)} | {
        f"cpu_per_query_{engine}_{n}_over_local_1_thread": round(cpu[engine, n] / cpu["local", 1], 2)
        for engine, n in cpu if (engine, n) != ("local", 1)}


def _rerank(args, work: Path, index: Path, topics, local_run, ray_options: dict, result: dict) -> None:
    from pipeline.rerank.on_cluster import score_on_cluster
    from pipeline.rerank.checkpoint import save_checkpoint
    from pipeline.rerank.models.monobert import MonoBERT, MonoBERTConfig
    from pipeline.rerank.pairs import CandidateTexts, pairs_of
    from pipeline.retrieve.index import open_index
    from pipeline.stages.neural import reranker_class

    import torch

    candidates = local_run.cut(100)
    candidates.ranking = dict(list(candidates.ranking.items())[:args.rerank_queries])
    pairs = pairs_of(topics, candidates, CandidateTexts(open_index(str(index)), "ray_scale").of(candidates))
    torch.manual_seed(0)
    checkpoint = save_checkpoint(MonoBERT(MonoBERTConfig()), work / "monobert-minilm")
    stage = reranker_class("monobert")(ckpt=str(checkpoint), batch_size=args.batch_size, device=args.device)
    stage.resolve_model(load=False)
    scores = {}
    for workers in (1, 2):
        scores[workers], _, stats = score_on_cluster(stage.source, stage.runtime(), stage.model_digest(), pairs,
                                                     ray_options[workers])
        row = _rates("monobert", len(pairs), stats, "pairs") | {"queries": len(candidates),
                                                                 "queries_per_s": round(len(candidates) / stats["seconds"], 2)}
        result["rerank"].append(row)
        print(json.dumps(row), flush=True)
    one, two = result["rerank"]
    two["identical_to_1_worker"] = scores[1] == scores[2]
    two["over_1_worker"] = {"wall": round(two["pairs_per_s"] / one["pairs_per_s"], 2),  # the workers' own rates:
                            "in_shards": round(sum(two["pairs_per_s_per_worker"]) /    # start-up left out
                                               sum(one["pairs_per_s_per_worker"]), 2)}


def _encode(args, work: Path, collection: Path, ray_options: dict, result: dict) -> None:
    from pipeline.rerank.on_cluster import encode_on_cluster
    from pipeline.stages.neural import reranker_class

    documents = []
    with open(collection, encoding="utf-8") as lines:
        for line, _ in zip(lines, range(args.encode_docs)):
            pid, text = line.rstrip("\n").split("\t", 1)
            documents.append((pid, text))
    encoder = reranker_class("biencoder")(batch_size=args.batch_size, device=args.device)
    encoder.resolve_model(load=False)
    with tempfile.TemporaryDirectory(dir=work) as stores:
        for workers in (1, 2):
            manifest, stats = encode_on_cluster(Path(stores) / f"w{workers}", encoder.source, encoder.runtime(),
                                                encoder.model_digest(), documents, "fp16", args.encode_shard,
                                                ray_options[workers])
            result["encode"].append(_rates("biencoder", manifest["count"], stats, "docs"))
            print(json.dumps(result["encode"][-1]), flush=True)
        same = filecmp.dircmp(Path(stores) / "w1", Path(stores) / "w2")
        result["encode"][-1]["identical_to_1_worker"] = not (same.diff_files or same.left_only or same.right_only)


def per_model_projection() -> dict:
    """Hours of the dev-small top-1000 rerank per model on N one-thread CPU workers, from each model's one-thread
    inference rate in eval/benchmarks/rerank-speed.json (WikiQA test pairs: shorter than MS MARCO passages, so these
    hours are a lower bound), assuming linear scaling over workers."""
    recorded = REPO / "eval" / "benchmarks" / "rerank-speed.json"
    if not recorded.exists():
        return {}
    speed = json.loads(recorded.read_text())
    pairs = DEV_SMALL_QUERIES * TOP_K_FULL
    return {"source": f"eval/benchmarks/rerank-speed.json ({speed['command']})"} | {
        row["model"]: {"pairs_per_s_per_worker": row["inference_pairs_per_s"],
                       "hours": {f"{n} workers": round(pairs / (row["inference_pairs_per_s"] * n) / 3600, 1)
                                 for n in WORKERS_PROJECTED}}
        for row in speed["rows"] if row["device"] == "cpu" and row["threads"] == 1}


def project(result: dict, device: str) -> dict:
    """Wall times from the mean measured per-worker rate, assuming linear scaling over workers (the measured 1 -> 2
    scaling is beside it to judge that by)."""
    def mean(values):
        return sum(values) / len(values)

    per_model = per_model_projection()
    if not (result["rerank"] and result["encode"]):
        return {"device": device, "left_out": "no rerank and encode rows measured", "per_model": per_model}
    pairs_rate = mean(result["rerank"][-1]["pairs_per_s_per_worker"])
    docs_rate = mean(result["encode"][-1]["docs_per_s_per_worker"])
    pairs = DEV_SMALL_QUERIES * TOP_K_FULL
    return {"device": device, "gpu": "not measured (no GPU on this machine)" if device == "cpu" else device,
            "rerank_dev_small_top1000": {"pairs": pairs, "pairs_per_s_per_worker": round(pairs_rate, 1),
                                         "scaling_1_to_2": round(result["rerank"][1]["pairs_per_s"] /
                                                                 result["rerank"][0]["pairs_per_s"], 2),
                                         "hours": {f"{n} workers": round(pairs / (pairs_rate * n) / 3600, 1)
                                                   for n in WORKERS_PROJECTED}},
            "per_model": per_model,
            "encode_msmarco_passages": {"passages": MSMARCO_PASSAGES, "docs_per_s_per_worker": round(docs_rate, 1),
                                        "scaling_1_to_2": round(result["encode"][1]["docs_per_s"] /
                                                                result["encode"][0]["docs_per_s"], 2),
                                        "hours": {f"{n} workers": round(MSMARCO_PASSAGES / (docs_rate * n) / 3600, 1)
                                                  for n in WORKERS_PROJECTED}}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="synthetic passages (default 1,000,000)")
    parser.add_argument("--workdir", required=True, help="collection and index kept here (made once)")
    parser.add_argument("--queries", type=int, help="the first N dev-small queries (default: all 6,980)")
    parser.add_argument("--threads", type=int, default=2, help="local search threads (default 2)")
    parser.add_argument("--ray-queries", type=int, help="the first N of those for the 1-thread and Ray rows (default: all)")
    parser.add_argument("--pyserini", action="store_true", help="add Pyserini's own CLI on the same index and topics")
    parser.add_argument("--rounds", type=int, default=1, help="the scaling rows (local 1 thread, 2 processes, Ray 1 "
                        "and 2 workers) this many times, interleaved; the ratios are the rounds' medians (default 1)")
    parser.add_argument("--rerank-queries", type=int, default=60, help="queries whose top-100 monobert reranks")
    parser.add_argument("--shard-pairs", type=int, default=512, help="pairs per rerank shard (default 512)")
    parser.add_argument("--encode-docs", type=int, default=4000, help="passages biencoder encodes (default 4,000)")
    parser.add_argument("--encode-shard", type=int, default=500, help="passages per store shard (default 500)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--worker-niceness", type=int, default=0, help="the Ray workers' niceness (default 0)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda (each worker then needs a GPU)")
    parser.add_argument("--record", nargs="?", const="ray-scale", metavar="NAME", type=record_name,
                        help="write eval/benchmarks/NAME.json (default NAME: ray-scale)")
    args = parser.parse_args(argv)
    from pipeline import log

    log.configure()
    result = bench(args)
    print(json.dumps(result["projection"], indent=2))
    print(machine())
    if args.record:
        record(args.record, "bench.ray_scale", argv, result)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))

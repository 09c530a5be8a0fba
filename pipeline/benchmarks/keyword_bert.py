"""Keyword-BERT's Tables 4-6 in miniature: monobert vs kwbert, random vs keyword negatives, on LCQMC or BQ.

    python -m pipeline.benchmarks.keyword_bert --dataset lcqmc --bert models/zh-bert-2l-128 --seeds 0 1 2 --record

Each system is trained (a training recipe: cached under <irpipe cache>/models) on `<dataset>/dev` with the seed,
then measured on what it was not trained on:
- accuracy on `<dataset>/test`: a pair is called a match when the model's score z_1 - z_0 > 0 (P(match) > 0.5);
- ranking on `<dataset>/questions-test`: BM25's top `--depth` (jieba index) less the query's own question,
  reranked by the model; Success@1 and Success@10 (is the paired question first / in the top 10).
Numbers are mean ± sd over the seeds; each comparison (kwbert vs monobert; kwbert's code fusion vs the paper's;
keyword vs random negatives) has a two-sided paired t-test over the test pairs (correct or not, averaged over the
seeds) and over the queries (Success@k averaged over the seeds). `--record` writes
eval/benchmarks/keyword-bert-<dataset>.json (or --output).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from pipeline.benchmarks import run_main
from pipeline.data.files import atomic_write

REPO = Path(__file__).resolve().parents[2]
MEASURES = ("Success@1", "Success@10")
SYSTEMS = {  # name: (model, training options beyond the shared ones, model fields beyond the shared ones)
    "monobert": ("monobert", {}, {}),
    "kwbert": ("kwbert", {}, {}),
    "kwbert-code": ("kwbert", {}, {"fusion": "code"}),  # the authors' code fusion instead of the paper's
    "monobert-random": ("monobert", {"negatives": "random"}, {}),
    "monobert-keyword": ("monobert", {"negatives": "keyword"}, {}),
    "kwbert-random": ("kwbert", {"negatives": "random"}, {}),
    "kwbert-keyword": ("kwbert", {"negatives": "keyword"}, {}),
}
COMPARISONS = [("kwbert", "monobert"), ("kwbert-code", "kwbert"), ("kwbert-keyword", "kwbert-random"),
               ("monobert-keyword", "monobert-random"), ("kwbert-keyword", "monobert-keyword"),
               ("kwbert-random", "monobert-random")]
PAPER = {"accuracy, 2 / 4 / 6 / 12 layers (private Q-Q set, Table 4-5)": {"bert": [87.7, 90.4, 92.0, 93.9],
                                                                        "keyword-bert": [89.8, 92.7, 94.1, 95.1]},
         "accuracy, random vs keyword-overlap + entity negatives, 12-layer BERT (Table 6)": {"random": 77.5,
                                                                                           "keyword": 93.9}}


def train_system(name: str, args, seed: int) -> Path:
    from pipeline.commands.train import key_values
    from pipeline.training.recipes import Recipe

    model, extra, fields = SYSTEMS[name]
    options = {"epochs": args.epochs, "lr": args.lr, "train_batch_size": args.batch_size, "seed": seed} | extra
    if "negatives" in extra:  # only what differs from the defaults: the same recipe as the eval/ configs' specs
        options |= {"negatives_dict": args.dict, "negatives_per_positive": args.negatives_per_positive}
        options |= {"replace_ratio": args.replace_ratio} if extra["negatives"] == "keyword" else {}
    overrides = {"bert": args.bert, "max_length": args.max_length} | ({"dict": args.dict} if model == "kwbert" else {})
    overrides |= fields | key_values(args.set, "--set")
    recipe = Recipe(model, f"{args.dataset}/dev", None, options, overrides, device="cpu", threads=args.threads)
    return recipe.ensure_trained()


def scores_of(model, pairs, batch_size: int) -> list[float]:
    from pipeline.rerank.scoring import predict

    return predict(model, pairs, batch_size, "cpu", desc="scoring").scores


def measure(checkpoint: Path, test_pairs, ranking_pairs, qrels, batch_size: int) -> dict:
    """Accuracy (and per-pair correctness) on the test pairs; Success@k (and per query) of the reranked run."""
    from pipeline.data.runs import Run
    from pipeline.evaluate import per_query
    from pipeline.rerank.checkpoint import load_checkpoint
    from pipeline.rerank.pairs import scores_by_query

    model = load_checkpoint(checkpoint)
    correct = {f"{p.qid}/{p.docid}": float((s > 0) == (p.label > 0))
               for p, s in zip(test_pairs, scores_of(model, test_pairs, batch_size))}
    scores = scores_by_query(ranking_pairs, scores_of(model, ranking_pairs, batch_size))
    table = per_query(Run.from_scores(scores), qrels, list(MEASURES))
    return {"accuracy": statistics.fmean(correct.values()), "correct": correct,
            **{m: statistics.fmean(table[m].values()) for m in MEASURES}, "per_query": table}


def evaluation_data(dataset: str, depth: int, queries: int | None):
    """(labelled test pairs, pairs of BM25's top `depth` on the first `queries` test queries (all: None), their
    qrels, BM25's own scores)."""
    from pipeline.data.registry import get_dataset
    from pipeline.evaluate import evaluate
    from pipeline.rerank.pairs import pairs_of
    from pipeline.spec import parse

    test = get_dataset(f"{dataset}/test")
    qrels = test.qrels()
    test_pairs = [replace(p, label=float(qrels[p.qid][p.docid])) for p in pairs_of(test.topics(), test.run(), test.run().texts)]
    questions = get_dataset(f"{dataset}/questions-test")
    topics = questions.topics()
    topics = topics.subset(list(topics)[:queries]) if queries else topics
    run = parse(f"bm25(hits={depth}) >> exclude()").bind(questions)(topics)  # as the eval/ configs' specs
    texts = {doc["id"]: doc["contents"] for doc in questions.docs()}
    qrels = {qid: judged for qid, judged in questions.qrels().items() if qid in topics}
    return test_pairs, pairs_of(topics, run, texts), qrels, evaluate(run, qrels, list(MEASURES))


def summarise(results: dict[str, list[dict]]) -> dict:
    from pipeline.compare import paired_ttest

    def mean_of(runs: list[dict], key: str) -> dict[str, float]:  # per pair / per query, averaged over seeds
        keys = runs[0][key] if key == "correct" else runs[0]["per_query"][key]
        get = (lambda r, k: r["correct"][k]) if key == "correct" else (lambda r, k: r["per_query"][key][k])
        return {k: statistics.fmean(get(r, k) for r in runs) for k in keys}

    summary = {name: {m: {"mean": statistics.fmean(r[m] for r in runs),
                          "sd": statistics.stdev([r[m] for r in runs]) if len(runs) > 1 else 0.0,
                          "seeds": [round(r[m], 4) for r in runs]} for m in ("accuracy", *MEASURES)}
               for name, runs in results.items()}
    tests = {}
    for a, b in COMPARISONS:
        if a in results and b in results:
            tests[f"{a} vs {b}"] = {m: paired_ttest(mean_of(results[a], "correct" if m == "accuracy" else m),
                                                    mean_of(results[b], "correct" if m == "accuracy" else m))
                                    for m in ("accuracy", *MEASURES)}
    return {"systems": summary, "paired_t_test_p": tests}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--dataset", choices=("lcqmc", "bq"), default="lcqmc")
    parser.add_argument("--bert", required=True, metavar="DIR", help="the BERT folder (irpipe pretrain-mlm --output)")
    parser.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--dict", default="thucnews", help="keyword dictionary of kwbert and keyword negatives")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--negatives-per-positive", type=int, default=1)
    parser.add_argument("--replace-ratio", type=float, default=0.1)
    parser.add_argument("--depth", type=int, default=20, help="BM25 hits reranked per query")
    parser.add_argument("--ranking-queries", type=int, metavar="N", help="rank only the first N test queries")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a model config field for every system (e.g. pooling=cls); repeatable")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--eval-batch-size", type=int, default=256)
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--output", metavar="FILE", help="with --record: the JSON file (default: "
                                                         "eval/benchmarks/keyword-bert-<dataset>.json)")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    started = time.monotonic()
    test_pairs, ranking_pairs, qrels, bm25 = evaluation_data(args.dataset, args.depth, args.ranking_queries)
    results: dict[str, list[dict]] = {}
    for name in args.systems:
        for seed in args.seeds:
            tick = time.monotonic()
            result = measure(train_system(name, args, seed), test_pairs, ranking_pairs, qrels, args.eval_batch_size)
            results.setdefault(name, []).append(result)
            print(f"{name} seed {seed}: accuracy {result['accuracy']:.4f}, "
                  + ", ".join(f"{m} {result[m]:.4f}" for m in MEASURES) + f" ({time.monotonic() - tick:.0f} s)",
                  flush=True)
    summary = {"command": "python -m pipeline.benchmarks.keyword_bert " + " ".join(argv or sys.argv[1:]),
               "settings": {k: v for k, v in vars(args).items() if k not in ("record", "output")},
               "bm25": bm25, **summarise(results), "paper": PAPER,
               "minutes": round((time.monotonic() - started) / 60, 1)}
    print(json.dumps({k: summary[k] for k in ("bm25", "systems", "paired_t_test_p")}, indent=1))
    if args.record:
        with atomic_write(args.output or REPO / "eval" / "benchmarks" / f"keyword-bert-{args.dataset}.json") as out:
            json.dump(summary, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))

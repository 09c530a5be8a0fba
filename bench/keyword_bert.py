"""Keyword-BERT's Tables 4-6 in miniature: monobert vs kwbert, random vs keyword negatives, on LCQMC or BQ.

    python -m bench.keyword_bert --dataset lcqmc --bert models/zh-bert-2l-128 --seeds 0 1 2 --record

Each system is trained (a training recipe: cached under <irpipe cache>/models) with the seed, then measured on what
it was not trained on:
- accuracy on `<dataset>/test`, of the system trained on the labelled pairs of `<dataset>/dev`: a pair is called a
  match when the model's score z_1 - z_0 > 0 (P(match) > 0.5);
- ranking on `<dataset>/questions-test`: BM25's top `--depth` (jieba index) less the query's own question,
  reranked; Success@1 and Success@10 (is the paired question first / in the top 10). The ranker is the same system
  trained for ranking (`--ranking-train questions`, the default): on `<dataset>/questions-dev` with BM25's top
  `--train-depth` as negatives (or the system's sampled ones). `--ranking-train pairs` ranks with the pair
  classifier instead, which on LCQMC ranks worse than a random order: LCQMC dev's labels follow the pairs' length
  (Spearman 0.275; 0.063 on test), the small BERTs learn that length instead of the overlap, and among BM25's hits
  the paired question is the short one (eval/KEYWORD_BERT.md section 4). `shortcuts` records each ranker's mean
  per-query Spearman correlation with the candidate's length and its character overlap with the query;
- `--fusion`: BM25 + w x the ranker, both z-normalised per query (the `fusion(..., method=weighted, norm=zscore)`
  stage's arithmetic, pipeline.rerank.fusion.fuse), w of `--fusion-grid` picked by Success@1 on the first
  `--tune-queries` queries of `<dataset>/questions-dev` (pipeline.tune.tune_fusion_weight, the smaller on a tie;
  the ranker's own training queries with --ranking-train questions: the weight is tuned on training data), then
  applied to the test.
Numbers are mean ± sd over the seeds; each comparison (kwbert vs monobert; kwbert's code fusion vs the paper's;
keyword vs random negatives; every ranker, alone and fused, against BM25) has a two-sided paired t-test over the test
pairs (correct or not, averaged over the seeds) and over the queries (Success@k averaged over the seeds): those of
`irpipe eval --seed-mean --baseline` (pipeline.compare: mean_over_seeds, paired_ttest). `--record` writes
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

from bench import run_main
from bench._question_ranking import MEASURES, Ranking, ranking_of
from pipeline.data.files import atomic_write
from pipeline.declared import declarations
from pipeline.training.options import TrainOptions

REPO = Path(__file__).resolve().parents[1]
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
FUSION_NORM = "zscore"  # --fusion: BM25 and the ranker z-normalised per query, then BM25 + w x ranker
PAPER = {"accuracy, 2 / 4 / 6 / 12 layers (private Q-Q set, Table 4-5)": {"bert": [87.7, 90.4, 92.0, 93.9],
                                                                        "keyword-bert": [89.8, 92.7, 94.1, 95.1]},
         "accuracy, random vs keyword-overlap + entity negatives, 12-layer BERT (Table 6)": {"random": 77.5,
                                                                                           "keyword": 93.9}}


def recipe_of(name: str, args, seed: int, ranking: bool = False, ranking_data: str | None = None):
    """The training recipe of a system: on the labelled pairs of `<dataset>/dev`, or, for ranking with
    `--ranking-train questions`, on `<dataset>/questions-dev` with BM25's top `--train-depth` as negatives (the
    system's sampled negatives replace them) -- the recipe of eval/lcqmc-questions-test-{kwbert,monobert}.yaml."""
    from pipeline.commands.train import key_values
    from pipeline.training.recipes import Recipe

    model, extra, fields = SYSTEMS[name]
    options = {"epochs": args.epochs, "lr": args.lr, "train_batch_size": args.batch_size, "seed": seed} | extra
    if "negatives" in extra:  # only what differs from the defaults: the same recipe as the eval/ configs' specs
        options |= {"negatives_dict": args.dict, "negatives_per_positive": args.negatives_per_positive}
        options |= {"replace_ratio": args.replace_ratio} if extra["negatives"] == "keyword" else {}
    train = f"{args.dataset}/dev"
    if args.balance != "none" and not ranking:  # the pair classifier on length-balanced dev pairs
        options["balance"] = args.balance
    if ranking and args.ranking_train == "questions":
        train = ranking_data or f"{args.dataset}/questions-dev"   # or its export (_question_ranking.py)
        options = {"negatives": "bm25", "depth": args.train_depth} | options
    overrides = {"bert": args.bert, "max_length": args.max_length} | ({"dict": args.dict} if model == "kwbert" else {})
    overrides |= fields | key_values(args.set, "--set")
    return Recipe(model, train, None, options, overrides, device=args.device, threads=args.threads)


def scores_of(model, pairs, batch_size: int, device: str = "cpu") -> list[float]:
    from pipeline.rerank.scoring import predict, resolve_device

    return predict(model, pairs, batch_size, resolve_device(device), desc="scoring").scores


def measure(checkpoint: Path, ranker: Path | None, test_pairs, ranking: Ranking | None, batch_size: int,
            tuning: Ranking | None, grid: list[float], device: str = "cpu") -> dict:
    """Accuracy (and per-pair correctness) of `checkpoint` on the test pairs; with a `ranking`, Success@k (and per
    query), shortcuts and, with `tuning`, the dev-tuned fusion with BM25 of `ranker` on the ranking."""
    from pipeline.rerank.checkpoint import load_checkpoint

    model = load_checkpoint(checkpoint)
    correct = {f"{p.qid}/{p.docid}": float((s > 0) == (p.label > 0))
               for p, s in zip(test_pairs, scores_of(model, test_pairs, batch_size, device))}
    result = {"accuracy": statistics.fmean(correct.values()), "correct": correct}
    if ranking is None:
        return result
    model = load_checkpoint(ranker) if ranker != checkpoint else model
    scores = scores_of(model, ranking.pairs, batch_size, device)
    tuning_scores = scores_of(model, tuning.pairs, batch_size, device) if tuning is not None else None
    return result | ranking_result(scores, ranking, tuning, tuning_scores, grid)


def ranking_result(scores: list[float], ranking: Ranking, tuning: Ranking | None, tuning_scores: list[float] | None,
                   grid: list[float]) -> dict:
    """Success@k (and per query) and shortcuts of a ranker's `scores` of the ranking; with `tuning`, its fusion with
    BM25, the weight of `grid` tuned on the tuning ranking (whose scores are `tuning_scores`) by Success@1, the
    smaller on a tie."""
    from pipeline.rerank.fusion import fuse
    from pipeline.tune import tune_fusion_weight

    table = ranking.per_query(scores)
    result = {**{m: statistics.fmean(table[m].values()) for m in MEASURES}, "per_query": table,
              "shortcuts": ranking.shortcuts(scores)}
    if tuning is not None:
        weight, rows = tune_fusion_weight(tuning.runs(tuning_scores), tuning.qrels, sorted(grid), "Success@1",
                                          norm=FUSION_NORM)
        fused = ranking.per_query(fuse(ranking.runs(scores), "weighted", weights=[1, weight], norm=FUSION_NORM))
        by_weight = {row["values"]["w"]: round(row["measures"][row["key"]], 4) for row in rows}
        result["fusion"] = {"weight": weight, "dev Success@1 by weight": by_weight,
                            **{m: statistics.fmean(fused[m].values()) for m in MEASURES}, "per_query": fused}
    return result


def scored_elsewhere(args, name: str, seed: int, ranking: Ranking, tuning: Ranking | None) -> dict:
    """The ranking result of a ranker trained and scored by --score-rankings (its scores in --rankings-from)."""
    from bench._question_ranking import exported_scores

    scores = exported_scores(Path(args.rankings_from), name, seed, rankings_by_split(ranking, tuning))
    return ranking_result(scores["test"], ranking, tuning, scores.get("tune"), args.fusion_grid)


def rankings_by_split(ranking: Ranking, tuning: Ranking | None) -> dict[str, Ranking]:
    """The exported splits (bench/_question_ranking.py) these rankings are: test, and tune with --fusion."""
    return {"test": ranking, **({"tune": tuning} if tuning is not None else {})}


def evaluation_data(dataset: str, depth: int, queries: int | None):
    """(labelled test pairs, the ranking of the first `queries` test queries (all: None; 0: no ranking, None))."""
    from pipeline.data.registry import get_dataset
    from pipeline.rerank.pairs import pairs_of

    test = get_dataset(f"{dataset}/test")
    qrels, run = test.qrels(), test.run()
    test_pairs = [replace(p, label=float(qrels[p.qid][p.docid])) for p in pairs_of(test.topics(), run, run.texts)]
    return test_pairs, (ranking_of(f"{dataset}/questions-test", depth, queries) if queries != 0 else None)


def score_rankings(args, folder: Path) -> None:
    """--score-rankings R: train (or find cached) each system and seed's ranker on R/train, and write its scores of
    R's rankings to R/scores/ (bench/_question_ranking.py)."""
    from bench._question_ranking import SPLITS, load_ranking, scores_path
    from pipeline.rerank.checkpoint import load_checkpoint

    rankings = {split: load_ranking(folder / f"{split}.json") for split in SPLITS if (folder / f"{split}.json").is_file()}
    for name in args.systems:
        for seed in args.seeds:
            recipe = recipe_of(name, args, seed, ranking=True, ranking_data=str(folder / "train"))
            model = load_checkpoint(recipe.ensure_trained())
            scores = {split: scores_of(model, r.pairs, args.eval_batch_size, args.device) for split, r in rankings.items()}
            path = scores_path(folder, name, seed)
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(path) as out:
                json.dump({"recipe": recipe.key(), "bert": args.bert, **scores}, out)
            print(f"{name} seed {seed}: scores of {', '.join(scores)} -> {path}", flush=True)


def summarise(results: dict[str, list[dict]], bm25: dict[str, dict[str, float]]) -> dict:
    """Mean ± sd and seeds of each system's numbers (`fusion`: of its dev-tuned fusion with BM25), its mean
    shortcuts, and the paired t-tests: the COMPARISONS (with their mean paired difference and its 95% interval), and
    each ranker (alone and fused) against BM25 (`bm25`: measure -> qid -> value)."""
    from pipeline.compare import mean_over_seeds
    from pipeline.significance import paired_difference, paired_ttest

    def spread(values: list[float]) -> dict:
        return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
                "seeds": [round(v, 4) for v in values]}

    def mean_of(runs: list[dict], key: str) -> dict[str, float]:  # per pair / per query, averaged over seeds
        return mean_over_seeds([r["correct"] if key == "correct" else r["per_query"][key] for r in runs])

    summary, tests = {}, {}
    # what the runs measured: accuracy (not with --rankings-from) and the ranking (not without Lucene)
    measures = tuple(m for m in ("accuracy", *MEASURES) if m in next(iter(results.values()))[0])
    for name, runs in results.items():
        summary[name] = {m: spread([r[m] for r in runs]) for m in measures}
        if not bm25:
            continue
        summary[name]["shortcuts"] = {k: round(statistics.fmean(r["shortcuts"][k] for r in runs), 4)
                                      for k in runs[0]["shortcuts"]}
        tests[f"{name} vs bm25"] = {m: paired_ttest(mean_of(runs, m), bm25[m]) for m in MEASURES}
        if "fusion" in runs[0]:
            fused = [r["fusion"] for r in runs]
            summary[name]["fusion"] = {m: spread([f[m] for f in fused]) for m in MEASURES}
            summary[name]["fusion"]["weights"] = [f["weight"] for f in fused]
            tests[f"{name} + bm25 vs bm25"] = {m: paired_ttest(mean_of(fused, m), bm25[m]) for m in MEASURES}
    effects = {}
    for a, b in COMPARISONS:
        if a in results and b in results:
            pairs = {m: (mean_of(results[a], "correct" if m == "accuracy" else m),
                         mean_of(results[b], "correct" if m == "accuracy" else m)) for m in measures}
            tests[f"{a} vs {b}"] = {m: paired_ttest(*pair) for m, pair in pairs.items()}
            effects[f"{a} - {b}"] = {m: paired_difference(*pair) for m, pair in pairs.items()}
    return {"systems": summary, "paired_t_test_p": tests, "paired_differences": effects}


def arguments() -> argparse.ArgumentParser:
    """The benchmark's options (also the defaults of bench/lcqmc/ranking_checks.py's recipes)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--dataset", choices=("lcqmc", "bq"), default="lcqmc")
    parser.add_argument("--bert", metavar="DIR", help="the BERT folder (irpipe pretrain-mlm --output); needed but "
                                                      "with --export-rankings")
    parser.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--dict", default="thucnews", help="keyword dictionary of kwbert and keyword negatives")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--balance", choices=declarations(TrainOptions)["balance"].choices, default="none",
                        help="the pair classifier's training pairs: length-balanced or not (pipeline/training/examples.py)")
    parser.add_argument("--negatives-per-positive", type=int, default=1)
    parser.add_argument("--replace-ratio", type=float, default=0.1)
    parser.add_argument("--depth", type=int, default=20, help="BM25 hits reranked per query")
    parser.add_argument("--ranking-queries", type=int, metavar="N",
                        help="rank only the first N test queries (0: no ranking, accuracy only; needs no Lucene)")
    parser.add_argument("--ranking-train", choices=("questions", "pairs"), default="questions",
                        help="the ranker: trained on <dataset>/questions-dev with BM25 negatives, or the pair "
                             "classifier")
    parser.add_argument("--train-depth", type=int, default=10, help="BM25 negatives per questions-dev query")
    parser.add_argument("--fusion", action="store_true", help="also BM25 + w x ranker, w tuned on questions-dev")
    parser.add_argument("--fusion-grid", type=float, nargs="+", default=[0, 0.05, 0.1, 0.2, 0.3, 0.5, 1, 2])
    parser.add_argument("--tune-queries", type=int, default=1000, metavar="N",
                        help="questions-dev queries the fusion weight is tuned on")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a model config field for every system (e.g. pooling=cls); repeatable")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="where the systems train and score: cpu, cuda, auto")
    parser.add_argument("--eval-batch-size", type=int, default=256)
    parser.add_argument("--export-rankings", metavar="DIR", help="write the rankers' BM25 training data and the "
                        "rankings to DIR, then stop (bench/_question_ranking.py)")
    parser.add_argument("--score-rankings", metavar="DIR", help="train each ranker on DIR/train and write its scores "
                        "of DIR's rankings, then stop (no Lucene: a GPU machine)")
    parser.add_argument("--rankings-from", metavar="DIR", help="the rankers' scores from DIR/scores (no accuracy)")
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--output", metavar="FILE", help="with --record: the JSON file (default: "
                                                         "eval/benchmarks/keyword-bert-<dataset>.json)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = arguments()
    args = parser.parse_args(argv)
    if not args.bert and not args.export_rankings:
        parser.error("--bert is needed (all but --export-rankings train or name models on a BERT)")
    import torch

    torch.set_num_threads(args.threads)
    started = time.monotonic()
    if args.score_rankings:
        score_rankings(args, Path(args.score_rankings))
        return 0
    if args.rankings_from:
        test_pairs, ranking = None, ranking_of(f"{args.dataset}/questions-test", args.depth, args.ranking_queries)
    else:
        test_pairs, ranking = evaluation_data(args.dataset, args.depth, args.ranking_queries)
    tuning = ranking_of(f"{args.dataset}/questions-dev", args.depth, args.tune_queries) if args.fusion and ranking else None
    if args.export_rankings:
        from bench._question_ranking import export_rankings

        export_rankings(args, Path(args.export_rankings), ranking, tuning)
        return 0
    if args.rankings_from:
        from bench._question_ranking import check_exported

        check_exported(Path(args.rankings_from), rankings_by_split(ranking, tuning))
    bm25 = ranking.per_query(ranking.bm25) if ranking else {}
    results: dict[str, list[dict]] = {}
    for name in args.systems:
        for seed in args.seeds:
            tick = time.monotonic()
            if args.rankings_from:
                result = scored_elsewhere(args, name, seed, ranking, tuning)
            else:
                checkpoint = recipe_of(name, args, seed).ensure_trained()
                ranker = recipe_of(name, args, seed, ranking=True).ensure_trained() if ranking else None
                result = measure(checkpoint, ranker, test_pairs, ranking, args.eval_batch_size, tuning,
                                 args.fusion_grid, args.device)
            results.setdefault(name, []).append(result)
            fusion = result.get("fusion")
            print(f"{name} seed {seed}: "
                  + ", ".join(f"{m} {result[m]:.4f}" for m in ("accuracy", *MEASURES) if m in result)
                  + (f", shortcuts {result['shortcuts']}" if ranking else "")
                  + (f", fused (w {fusion['weight']}) Success@1 {fusion['Success@1']:.4f}" if fusion else "")
                  + f" ({time.monotonic() - tick:.0f} s)", flush=True)
    summary = {"command": "python -m bench.keyword_bert " + " ".join(argv or sys.argv[1:]),
               "settings": {k: v for k, v in vars(args).items() if k not in ("record", "output")},
               **({"bm25": {m: statistics.fmean(bm25[m].values()) for m in MEASURES},
                   "random order": ranking.random_order()} if ranking else {}),
               **summarise(results, bm25), "paper": PAPER,
               "minutes": round((time.monotonic() - started) / 60, 1)}
    print(json.dumps({k: summary[k] for k in ("bm25", "systems", "paired_t_test_p") if k in summary}, indent=1))
    if args.record:
        with atomic_write(args.output or REPO / "eval" / "benchmarks" / f"keyword-bert-{args.dataset}.json") as out:
            json.dump(summary, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))

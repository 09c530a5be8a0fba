"""Keyword-BERT's Tables 4-6 in miniature: monobert vs kwbert, random vs keyword negatives, on LCQMC or BQ.

    python -m pipeline.benchmarks.keyword_bert --dataset lcqmc --bert models/zh-bert-2l-128 --seeds 0 1 2 --record

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
- `--fusion`: BM25 + w x the ranker, both z-normalised per query (as `fusion(..., method=weighted, norm=zscore)`),
  w picked by Success@1 on the first `--tune-queries` queries of `<dataset>/questions-dev` (the ranker's own
  training queries with --ranking-train questions: the weight is tuned on training data), then applied to the test.
Numbers are mean ± sd over the seeds; each comparison (kwbert vs monobert; kwbert's code fusion vs the paper's;
keyword vs random negatives; every ranker, alone and fused, against BM25) has a two-sided paired t-test over the test
pairs (correct or not, averaged over the seeds) and over the queries (Success@k averaged over the seeds). `--record`
writes eval/benchmarks/keyword-bert-<dataset>.json (or --output).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass, replace
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
    if ranking and args.ranking_train == "questions":
        train = ranking_data or f"{args.dataset}/questions-dev"   # or its export (keyword_bert_rankings.py)
        options = {"negatives": "bm25", "depth": args.train_depth} | options
    overrides = {"bert": args.bert, "max_length": args.max_length} | ({"dict": args.dict} if model == "kwbert" else {})
    overrides |= fields | key_values(args.set, "--set")
    return Recipe(model, train, None, options, overrides, device=args.device, threads=args.threads)


def scores_of(model, pairs, batch_size: int, device: str = "cpu") -> list[float]:
    from pipeline.rerank.scoring import predict, resolve_device

    return predict(model, pairs, batch_size, resolve_device(device), desc="scoring").scores


@dataclass
class Ranking:
    """BM25's top `depth` (less the query's own question) of some question-retrieval queries, as pairs."""

    pairs: list
    bm25: list[float]                       # BM25's score of each pair
    qrels: dict[str, dict[str, int]]

    def per_query(self, scores: list[float]) -> dict[str, dict[str, float]]:
        """measure -> qid -> value of the run that `scores` (one a pair) make."""
        from pipeline.data.runs import Run
        from pipeline.evaluate import per_query
        from pipeline.rerank.pairs import scores_by_query

        return per_query(Run.from_scores(scores_by_query(self.pairs, scores)), self.qrels, list(MEASURES))

    def random_order(self) -> dict[str, float]:
        """The expected Success@k of a random order of each query's candidates (0 where the paired one is absent)."""
        by_query: dict[str, list] = {}
        for pair in self.pairs:
            by_query.setdefault(pair.qid, []).append(self.qrels.get(pair.qid, {}).get(pair.docid, 0) > 0)
        k = {m: int(m.split("@")[1]) for m in MEASURES}
        return {m: round(statistics.fmean(min(1.0, any(rel) * k[m] / len(rel)) for rel in by_query.values()), 4)
                for m in MEASURES}

    def fused(self, scores: list[float], weight: float) -> list[float]:
        """z(BM25) + weight z(scores), both z-normalised per query (fusion(..., method=weighted, norm=zscore))."""
        from pipeline.stage import NORMS

        fused, by_query = [0.0] * len(self.pairs), {}
        for i, pair in enumerate(self.pairs):
            by_query.setdefault(pair.qid, []).append(i)
        for rows in by_query.values():
            bm25, model = NORMS["zscore"]([self.bm25[i] for i in rows]), NORMS["zscore"]([scores[i] for i in rows])
            for i, b, m in zip(rows, bm25, model):
                fused[i] = b + weight * m
        return fused

    def shortcuts(self, scores: list[float]) -> dict[str, float]:
        """Mean per-query Spearman correlation of the scores with the candidate's length (characters) and with its
        character Jaccard overlap with the query (queries whose scores or feature are all equal left out)."""
        from scipy.stats import spearmanr

        by_query: dict[str, list[tuple]] = {}
        for pair, score in zip(self.pairs, scores):
            a, b = set(pair.query), set(pair.text)
            by_query.setdefault(pair.qid, []).append((score, len(pair.text), len(a & b) / max(1, len(a | b))))
        out = {}
        for k, feature in ((1, "length"), (2, "overlap")):
            rhos = [spearmanr([r[0] for r in rows], [r[k] for r in rows])[0] for rows in by_query.values()
                    if len({r[0] for r in rows}) > 1 and len({r[k] for r in rows}) > 1]
            out[feature] = round(statistics.fmean(rhos), 4) if rhos else float("nan")
        return out


def tune_weight(ranking: Ranking, scores: list[float], grid: list[float]) -> tuple[float, dict[str, float]]:
    """The weight of `grid` whose fusion has the best mean Success@1 on `ranking` (the smaller on a tie), and the
    Success@1 of each weight."""
    values = {w: statistics.fmean(ranking.per_query(ranking.fused(scores, w))["Success@1"].values()) for w in grid}
    best = max(sorted(values), key=lambda w: values[w])   # sorted: max keeps the first (smallest) of equal ones
    return best, {str(w): round(v, 4) for w, v in values.items()}


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
    BM25, the weight tuned on the tuning ranking (whose scores are `tuning_scores`)."""
    table = ranking.per_query(scores)
    result = {**{m: statistics.fmean(table[m].values()) for m in MEASURES}, "per_query": table,
              "shortcuts": ranking.shortcuts(scores)}
    if tuning is not None:
        weight, by_weight = tune_weight(tuning, tuning_scores, grid)
        fused = ranking.per_query(ranking.fused(scores, weight))
        result["fusion"] = {"weight": weight, "dev Success@1 by weight": by_weight,
                            **{m: statistics.fmean(fused[m].values()) for m in MEASURES}, "per_query": fused}
    return result


def scored_elsewhere(args, name: str, seed: int, ranking: Ranking, tuning: Ranking | None) -> dict:
    """The ranking result of a ranker trained and scored by --score-rankings (its scores in --rankings-from)."""
    from pipeline.benchmarks.keyword_bert_rankings import exported_scores

    scores = exported_scores(Path(args.rankings_from), name, seed,
                             {"test": ranking, **({"tune": tuning} if tuning is not None else {})})
    return ranking_result(scores["test"], ranking, tuning, scores.get("tune"), args.fusion_grid)


def ranking_of(dataset_name: str, depth: int, queries: int | None) -> Ranking:
    """BM25's top `depth` less the query's own question (as the eval/ configs' specs) on the first `queries`."""
    from pipeline.data.registry import get_dataset
    from pipeline.rerank.pairs import pairs_of
    from pipeline.spec import parse

    questions = get_dataset(dataset_name)
    topics = questions.topics()
    topics = topics.subset(list(topics)[:queries]) if queries else topics
    run = parse(f"bm25(hits={depth}) >> exclude()").bind(questions)(topics)
    texts = {doc["id"]: doc["contents"] for doc in questions.docs()}
    qrels = {qid: judged for qid, judged in questions.qrels().items() if qid in topics}
    return Ranking(pairs_of(topics, run, texts), [s for hits in run.ranking.values() for _, s in hits], qrels)


def evaluation_data(dataset: str, depth: int, queries: int | None):
    """(labelled test pairs, the ranking of the first `queries` test queries (all: None; 0: no ranking, None))."""
    from pipeline.data.registry import get_dataset
    from pipeline.rerank.pairs import pairs_of

    test = get_dataset(f"{dataset}/test")
    qrels, run = test.qrels(), test.run()
    test_pairs = [replace(p, label=float(qrels[p.qid][p.docid])) for p in pairs_of(test.topics(), run, run.texts)]
    return test_pairs, (ranking_of(f"{dataset}/questions-test", depth, queries) if queries != 0 else None)


def summarise(results: dict[str, list[dict]], bm25: dict[str, dict[str, float]]) -> dict:
    """Mean ± sd and seeds of each system's numbers (`fusion`: of its dev-tuned fusion with BM25), its mean
    shortcuts, and the paired t-tests: the COMPARISONS (with their mean paired difference and its 95% interval), and
    each ranker (alone and fused) against BM25 (`bm25`: measure -> qid -> value)."""
    from pipeline.compare import paired_difference, paired_ttest

    def spread(values: list[float]) -> dict:
        return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
                "seeds": [round(v, 4) for v in values]}

    def mean_of(runs: list[dict], key: str) -> dict[str, float]:  # per pair / per query, averaged over seeds
        if key == "correct":
            return {k: statistics.fmean(r["correct"][k] for r in runs) for k in runs[0]["correct"]}
        return {k: statistics.fmean(r["per_query"][key][k] for r in runs) for k in runs[0]["per_query"][key]}

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


def main(argv: list[str] | None = None) -> int:
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
                        "rankings to DIR, then stop (pipeline/benchmarks/keyword_bert_rankings.py)")
    parser.add_argument("--score-rankings", metavar="DIR", help="train each ranker on DIR/train and write its scores "
                        "of DIR's rankings, then stop (no Lucene: a GPU machine)")
    parser.add_argument("--rankings-from", metavar="DIR", help="the rankers' scores from DIR/scores (no accuracy)")
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--output", metavar="FILE", help="with --record: the JSON file (default: "
                                                         "eval/benchmarks/keyword-bert-<dataset>.json)")
    args = parser.parse_args(argv)
    if not args.bert and not args.export_rankings:
        parser.error("--bert is needed (all but --export-rankings train or name models on a BERT)")
    import torch

    torch.set_num_threads(args.threads)
    started = time.monotonic()
    if args.score_rankings:
        from pipeline.benchmarks.keyword_bert_rankings import score_rankings

        score_rankings(args, Path(args.score_rankings))
        return 0
    if args.rankings_from:
        test_pairs, ranking = None, ranking_of(f"{args.dataset}/questions-test", args.depth, args.ranking_queries)
    else:
        test_pairs, ranking = evaluation_data(args.dataset, args.depth, args.ranking_queries)
    bm25 = ranking.per_query(ranking.bm25) if ranking else {}
    tuning = ranking_of(f"{args.dataset}/questions-dev", args.depth, args.tune_queries) if args.fusion and ranking else None
    if args.export_rankings:
        from pipeline.benchmarks.keyword_bert_rankings import export_rankings

        export_rankings(args, Path(args.export_rankings), ranking, tuning)
        return 0
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
    summary = {"command": "python -m pipeline.benchmarks.keyword_bert " + " ".join(argv or sys.argv[1:]),
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

"""Checks of an LCQMC ranker (eval/KEYWORD_BERT.md section 4.1): is a bad ranking a code defect (texts, ids, logit,
truncation) or what the model learnt (length rather than overlap)?

    python bench/lcqmc/ranking_checks.py --bert models/zh-bert-2l-128-step1249 --system monobert --seed 0 [--ranking]

The model is the keyword_bert benchmark's (bench/keyword_bert.py, same defaults; trained now unless
cached): the pair classifier on lcqmc/dev, or with --ranking the ranker on lcqmc/questions-dev. It prints
- accuracy on the labelled test pairs and on its training pairs (score > 0 is a match: z_1, the logit trained on
  label 1, minus z_0), and the Spearman correlation of the scores and of the labels with the pair's length and
  character overlap;
- on BM25's top 20 of the first --queries lcqmc/questions-test queries (own question excluded): Success@1/@10, the
  paired question's mean rank, the mean per-query correlation with candidate length / overlap / BM25's order;
- the same (query, paired question) scored as a test pair and as a ranking candidate (they must agree: otherwise
  texts or ids are misaligned), and one query's candidates by hand.
"""
from __future__ import annotations

import argparse
import statistics

import torch
from scipy.stats import spearmanr

from bench import keyword_bert as kb
from pipeline.data.registry import get_dataset
from pipeline.rerank.checkpoint import load_checkpoint
from pipeline.training.examples import examples_from


def overlap(a: str, b: str) -> float:
    a, b = set(a), set(b)
    return len(a & b) / len(a | b)


def pair_report(label: str, pairs, scores) -> None:
    labels = [float(p.label > 0) for p in pairs]
    length = [len(p.query) + len(p.text) for p in pairs]
    lexical = [overlap(p.query, p.text) for p in pairs]
    accuracy = statistics.fmean(float((s > 0) == (y > 0)) for s, y in zip(scores, labels))
    matches = statistics.fmean(s > 0 for s in scores)
    score_length, score_overlap = spearmanr(scores, length)[0], spearmanr(scores, lexical)[0]
    label_length, label_overlap = spearmanr(labels, length)[0], spearmanr(labels, lexical)[0]
    print(f"{label}: {len(pairs)} pairs, accuracy {accuracy:.4f}, called a match {matches:.3f}; Spearman of the "
          f"score with length {score_length:+.3f}, with overlap {score_overlap:+.3f}; of the label with length "
          f"{label_length:+.3f}, with overlap {label_overlap:+.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bert", required=True)
    parser.add_argument("--system", default="monobert", choices=list(kb.SYSTEMS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--ranking", action="store_true", help="the ranker trained on lcqmc/questions-dev")
    args = parser.parse_args()
    torch.set_num_threads(1)
    options = kb.arguments().parse_args(["--dataset", "lcqmc", "--bert", args.bert])  # the benchmark's defaults
    recipe = kb.recipe_of(args.system, options, args.seed, ranking=args.ranking)
    model = load_checkpoint(recipe.ensure_trained())
    print(f"{args.system} seed {args.seed}, trained on {recipe.train}: {recipe.directory()}")
    test_pairs, ranking = kb.evaluation_data("lcqmc", 20, args.queries)
    test_scores = kb.scores_of(model, test_pairs, 256)
    pair_report("lcqmc/test pairs", test_pairs, test_scores)
    training = examples_from(get_dataset("lcqmc/dev")).pointwise()
    pair_report("lcqmc/dev pairs (the pair classifier's training data)", training, kb.scores_of(model, training, 256))

    scores = kb.scores_of(model, ranking.pairs, 256)
    table = ranking.per_query(scores)
    ranks, in_candidates = [], 0
    by_query: dict[str, list] = {}
    for pair, score in zip(ranking.pairs, scores):
        by_query.setdefault(pair.qid, []).append((score, pair))
    for qid, items in by_query.items():
        order = [p.docid for _, p in sorted(items, key=lambda x: -x[0])]
        relevant = [i for i, d in enumerate(order) if ranking.qrels[qid].get(d, 0) > 0]
        in_candidates += bool(relevant)
        ranks += [relevant[0] + 1] if relevant else []
    bm25_order = [spearmanr([s for s, _ in items], range(len(items), 0, -1))[0] for items in by_query.values()
                  if len(items) > 1 and len({s for s, _ in items}) > 1]
    print(f"ranking: {len(by_query)} queries, {len(scores)} candidates, the paired question among them for "
          f"{in_candidates}; Success@1 {statistics.fmean(table['Success@1'].values()):.4f}, Success@10 "
          f"{statistics.fmean(table['Success@10'].values()):.4f} (random order {ranking.random_order()}); its mean "
          f"rank {statistics.fmean(ranks):.2f}; per-query Spearman with {ranking.shortcuts(scores)}, with BM25's "
          f"order {statistics.fmean(bm25_order):+.3f}")
    as_pairs = {(p.query, p.text): s for p, s in zip(test_pairs, test_scores)}
    both = [abs(as_pairs[(p.query, p.text)] - s) for p, s in zip(ranking.pairs, scores)
            if (p.query, p.text) in as_pairs]
    print(f"the same (query, candidate) as a test pair and as a ranking candidate: {len(both)} pairs, largest score "
          f"difference {max(both):.1e}")
    qid = next(iter(by_query))
    print(f"query {qid}: {ranking.pairs[0].query}")
    for score, pair in sorted(by_query[qid], key=lambda x: -x[0]):
        mark = "paired" if ranking.qrels[qid].get(pair.docid, 0) > 0 else "      "
        print(f"  {score:+.3f} {mark} {pair.docid:>7} {pair.text} (overlap {overlap(pair.query, pair.text):.2f})")


if __name__ == "__main__":
    main()

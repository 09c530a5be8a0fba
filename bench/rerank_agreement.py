"""Diagnostic: how a reranker's run relates to the first-stage run it reranked (e.g. MRNN on SQuAD).

    python -m bench.rerank_agreement FIRST.trec RERANKED.trec --dataset squad-v1.1/dev-articles-b

Per query: the Spearman correlation of the two runs' scores over the reranked candidates, and the rank of the
first relevant document in each run (queries whose relevant document the first stage missed are left out of the
ranks); printed: the mean correlation, median and mean ranks, and the share of queries with it within the top k.
"""
from __future__ import annotations

import argparse
import statistics
import sys

from scipy.stats import spearmanr

from bench import run_main
from pipeline.data.registry import get_dataset
from pipeline.data.runs import read_run
from pipeline.errors import InputError


def rank_of(scores: dict[str, float], docid: str) -> int:
    return 1 + sum(score > scores[docid] for score in scores.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("first")
    parser.add_argument("reranked")
    parser.add_argument("--dataset", required=True)
    args = parser.parse_args(argv)
    first, reranked = (read_run(path).to_dict() for path in (args.first, args.reranked))
    if missing := sorted(set(reranked) - set(first)):
        raise InputError(args.reranked, f"query {missing[0]} (and {len(missing) - 1} more) is not in {args.first}",
                         field="qid")
    qrels = get_dataset(args.dataset).qrels()
    rhos, ranks = [], {"first": [], "reranked": []}
    for qid, scores in reranked.items():
        docs = list(scores)
        rho = spearmanr([first[qid][d] for d in docs], [scores[d] for d in docs]).correlation
        if rho == rho:                                                  # not NaN (all scores equal)
            rhos.append(rho)
        relevant = [d for d, level in qrels.get(qid, {}).items() if level > 0 and d in scores]
        if relevant:
            ranks["first"].append(min(rank_of(first[qid], d) for d in relevant))
            ranks["reranked"].append(min(rank_of(scores, d) for d in relevant))
    print(f"queries {len(reranked)}, relevant among the candidates: {len(ranks['first'])}; "
          f"mean Spearman(first, reranked) per query {statistics.mean(rhos):.3f}")
    for name, values in ranks.items():
        print(f"{name}: rank of the relevant document median {statistics.median(values)}, mean "
              f"{statistics.mean(values):.1f}; within top 1/5/10/20/50: "
              + " / ".join(f"{sum(r <= k for r in values) / len(values):.3f}" for k in (1, 5, 10, 20, 50)))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))

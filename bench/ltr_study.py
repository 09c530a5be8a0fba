"""What makes learning to rank earn its keep on TrecQA raw-test: `ltr(features(...))` over learners, per-query
normalisations, training sets and feature sets, each beside every feature alone with paired tests.

    python -m bench.ltr_study                                   # the four cheap features of
                                                                # eval/trecqa-raw-test-ltr.yaml, every learner
    python -m bench.ltr_study --trained "monobert(train=trecqa/train, epochs=2, seed=0, deterministic=true)"
    python -m bench.ltr_study --test trecqa/raw-dev             # choose a learner and norm on dev: the rows fitted
                                                                # on trecqa/train alone
    python -m bench.ltr_study --trained "hcan(...)" --cross-fit 5   # also fitted on trecqa/train, out of fold
    python -m bench.ltr_study --cheap bm25,idf-overlap --trained "mrnn(...)" --cross-fit 5   # a subset of the
                                                                # cheap features beside the trained one

Every row is an `ltr(...)` stage run through `ir.run` (pipeline/stages/ltr.py; the features' stages come from the
stage cache, so only the first row pays for them). A feature alone ranks the same candidates by its score
(`features(stage)`). A feature fitted on trecqa/train scores its own training questions in-sample there, so a
learner over it is fitted on trecqa/raw-dev only (`--trained` rows), or, with `--cross-fit K`, on trecqa/train (and
train + raw-dev) through `ltr(..., cross_fit=K)`: train's scores then come from K models each trained without the
fold it scores (`hold_out`). raw-dev's questions are not in raw-test. Prints a Markdown table: AP, RR, P@1 of each
row, and the two-sided paired t-test p of its AP against each feature alone (Wilcoxon's in brackets), with
wins/losses against the best single feature.
"""
from __future__ import annotations

import argparse
import itertools
import sys

import pipeline as ir
from bench import run_main
from pipeline.evaluation import per_query
from pipeline.significance import paired_pvalue, wins_losses
from pipeline.spec import parse

TEST = "trecqa/raw-test"
MEASURES = ["AP", "RR", "P@1"]
CHEAP = {"bm25": "bm25()", "idf-overlap": "overlap(idf=true)", "word-overlap": "overlap(idf=false)",
         "biencoder": "biencoder()"}
LEARNERS = ("logistic", "pairwise", "gbdt", "lambdamart")
NORMS = ("zscore", "minmax", "none")
TRAIN_SETS = {"train": ["trecqa/train"], "train+raw-dev": ["trecqa/train", "trecqa/raw-dev"],
              "raw-dev": ["trecqa/raw-dev"]}


def rows(trained: dict[str, str], learners, norms, test: str, cross_fit: int = 0) -> list[tuple]:
    """(feature set, training set, learner, norm, cross_fit) of each row studied; none fitted on the test set."""
    chosen = []
    for learner, norm in itertools.product(learners, norms):
        chosen += [("cheap", train, learner, norm, 0) for train in ("train", "train+raw-dev")
                   if test not in TRAIN_SETS[train]]
        if trained and test != "trecqa/raw-dev":  # a feature fitted on trecqa/train: its learner sees raw-dev only
            chosen += [("cheap+trained", "raw-dev", learner, norm, 0), ("cheap", "raw-dev", learner, norm, 0)]
        if trained and cross_fit:                 # ... or train's out-of-fold scores
            chosen += [("cheap+trained", train, learner, norm, cross_fit) for train in ("train", "train+raw-dev")
                       if test not in TRAIN_SETS[train]]
    return chosen


def ltr_spec(features: dict[str, str], train: list[str], learner: str, norm: str, cross_fit: int = 0) -> str:
    names = train[0] if len(train) == 1 else f"[{', '.join(train)}]"
    return (f"ltr(features({', '.join(features.values())}), train={names}, learner={learner}, norm={norm}"
            + (f", cross_fit={cross_fit})" if cross_fit else ")"))


def scores(spec: str, test) -> dict[str, dict[str, float]]:
    """measure -> qid -> score of the pipeline on the test candidates."""
    return per_query(ir.run(parse(spec), test), test.qrels(), MEASURES, rel_level=test.rel_level)


def mean(values: dict[str, float]) -> float:
    return sum(values.values()) / len(values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trained", action="append", default=[], metavar="SPEC",
                        help="a neural stage fitted on trecqa/train, added as a feature (repeatable)")
    parser.add_argument("--learners", default=",".join(LEARNERS))
    parser.add_argument("--norms", default="zscore,none")
    parser.add_argument("--cross-fit", type=int, default=0, metavar="K",
                        help="with --trained: also fit on trecqa/train's out-of-fold scores, K folds (ltr cross_fit)")
    parser.add_argument("--cheap", default=",".join(CHEAP), type=lambda text: text.split(","),
                        help=f"the cheap features used, of {', '.join(CHEAP)} (default all)")
    parser.add_argument("--test", default=TEST,
                        help=f"the candidates ranked (default {TEST}; trecqa/raw-dev to choose on dev)")
    args = parser.parse_args(argv)
    unknown = set(args.cheap) - set(CHEAP)
    if unknown:
        parser.error(f"--cheap: unknown {', '.join(sorted(unknown))}; choose from {', '.join(CHEAP)}")
    cheap = {name: CHEAP[name] for name in args.cheap}
    test = ir.dataset(args.test)
    trained = {f"trained-{i}": spec for i, spec in enumerate(args.trained, 1)}
    singles = {name: scores(f"features({spec})", test) for name, spec in (cheap | trained).items()}
    best = max(singles, key=lambda name: mean(singles[name]["AP"]))
    print(f"| run | AP | RR | P@1 | p (AP) against each feature alone: t [Wilcoxon] | wins/losses vs {best} |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, spec in (cheap | trained).items():
        print(f"| {name} alone: `{spec}` | " + " | ".join(f"{mean(singles[name][m]):.4f}" for m in MEASURES)
              + " |  |  |")
    for feature_set, train, learner, norm, folds in rows(trained, args.learners.split(","), args.norms.split(","),
                                                         args.test, args.cross_fit):
        features = cheap | (trained if feature_set == "cheap+trained" else {})
        learned = scores(ltr_spec(features, TRAIN_SETS[train], learner, norm, folds), test)
        tests = ", ".join(f"{name} {paired_pvalue(learned['AP'], singles[name]['AP']):.2g} "
                          f"[{paired_pvalue(learned['AP'], singles[name]['AP'], 'wilcoxon'):.2g}]"
                          for name in features)
        wins, losses = wins_losses(learned["AP"], singles[best]["AP"])
        print(f"| ltr {feature_set}, train {train}{f' cross-fitted ({folds} folds)' if folds else ''}, {learner}, "
              f"{norm} | "
              + " | ".join(f"{mean(learned[m]):.4f}" for m in MEASURES) + f" | {tests} | {wins}/{losses} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))

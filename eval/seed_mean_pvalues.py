"""Paired t-tests of seeded experiments against a baseline experiment, per seed and on the seed mean: for each
measure, each query's score is averaged over the seeds' runs first, then the systems are compared query by query
(scipy ttest_rel, as `irpipe eval --baseline` does for one pair of runs). Reads the run files that
`irpipe run eval/<name>.yaml` writes for an experiment with `seeds:` (runs/<name>.seed<N>.trec).

    python eval/seed_mean_pvalues.py --dataset wikiqa/test --baseline wikiqa-monobert wikiqa-kwbert -m AP -m RR
    python eval/seed_mean_pvalues.py --dataset wikiqa/test --baseline wikiqa-addax-identity \
        wikiqa-addax-identity-no-mags wikiqa-addax-identity-no-highway wikiqa-addax-identity-no-denoiser \
        wikiqa-addax-identity-attention-only-mags          # the ADDAX ablations (their configs cite this)
"""
from __future__ import annotations

import argparse
import statistics

from pipeline.compare import paired_ttest
from pipeline.data.registry import get_dataset
from pipeline.data.runs import read_run
from pipeline.evaluate import per_query


def per_seed_scores(runs: str, name: str, seeds: list[int], data, measure: str) -> list[dict[str, float]]:
    """One table per seed of experiment `name`: question -> score."""
    return [next(iter(per_query(read_run(f"{runs}/{name}.seed{s}.trec"), data.qrels(), [measure],
                                data.rel_level).values())) for s in seeds]


def seed_mean(tables: list[dict[str, float]]) -> dict[str, float]:
    """question -> its score averaged over the seeds' tables."""
    return {q: statistics.fmean(t[q] for t in tables) for q in tables[0]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("systems", nargs="+", help="experiment names compared with the baseline")
    parser.add_argument("--baseline", required=True, help="experiment name of the baseline")
    parser.add_argument("--dataset", required=True, help="the dataset the runs were evaluated on")
    parser.add_argument("-m", "--measure", action="append", help="measure (repeatable; default AP)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--runs", default="runs", help="folder of the run files (default runs)")
    args = parser.parse_args(argv)
    data = get_dataset(args.dataset)
    for measure in args.measure or ["AP"]:
        base = per_seed_scores(args.runs, args.baseline, args.seeds, data, measure)
        base_mean = seed_mean(base)
        for name in args.systems:
            tables = per_seed_scores(args.runs, name, args.seeds, data, measure)
            by_seed = ", ".join(f"seed {s} {statistics.fmean(t.values()):.4f} vs {statistics.fmean(b.values()):.4f}"
                                f" p = {paired_ttest(t, b):.3g}" for s, t, b in zip(args.seeds, tables, base))
            mean = seed_mean(tables)
            print(f"{measure} {name} vs {args.baseline} ({len(base_mean)} queries): {by_seed}; seed-mean "
                  f"{statistics.fmean(mean.values()):.4f} vs {statistics.fmean(base_mean.values()):.4f}, "
                  f"p = {paired_ttest(mean, base_mean):.3g}")


if __name__ == "__main__":
    main()

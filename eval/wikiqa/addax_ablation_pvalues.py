"""Paired t-test over the wikiqa/test questions on AP averaged over seeds 0-2: each ADDAX ablation against full
ADDAX (identity start), from the run files that `irpipe run eval/wikiqa-addax-identity*.yaml` writes to runs/.

    python eval/wikiqa/addax_ablation_pvalues.py [RUNS_DIR]
"""
import statistics
import sys

from scipy.stats import ttest_rel

from pipeline.data.registry import get_dataset
from pipeline.data.runs import read_run
from pipeline.evaluate import per_query

ABLATIONS = ("no-mags", "no-highway", "no-denoiser", "attention-only-mags")


def seed_mean_ap(runs: str, name: str, data) -> dict[str, float]:
    """question -> AP averaged over the three seeds' runs of experiment `name`."""
    tables = [per_query(read_run(f"{runs}/{name}.seed{s}.trec"), data.qrels(), ["AP"], data.rel_level)["AP"]
              for s in (0, 1, 2)]
    return {q: statistics.fmean(t[q] for t in tables) for q in tables[0]}


def main(runs: str = "runs") -> None:
    data = get_dataset("wikiqa/test")
    full = seed_mean_ap(runs, "wikiqa-addax-identity", data)
    questions = sorted(full)
    for ablation in ABLATIONS:
        scores = seed_mean_ap(runs, f"wikiqa-addax-identity-{ablation}", data)
        test = ttest_rel([scores[q] for q in questions], [full[q] for q in questions])
        print(f"{ablation}: {len(questions)} questions, seed-mean AP {statistics.fmean(scores.values()):.4f} vs "
              f"{statistics.fmean(full.values()):.4f}, p = {test.pvalue:.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:])

"""The keyword branch's effect on WikiQA and DL20 from the pinned results, kwbert - monobert per seed pair
(eval/KEYWORD_BERT.md section 7.2):

    python bench/studies/keyword_branch.py

Each eval/results/{wikiqa,dl20}-{kwbert,monobert}.json keeps each seed's measures; the effect is the mean over the
three seeds of kwbert's measure minus monobert's of the same seed, with its 95% t interval (2 degrees of freedom:
wide, and over seeds, not over queries; the per-query runs were not kept). LCQMC's and BQ's intervals are over the
test pairs and queries (the keyword-bert benchmark files).
"""
from __future__ import annotations

import json
from pathlib import Path

from pipeline.significance import paired_difference

RESULTS = Path(__file__).resolve().parents[2] / "eval" / "results"

for dataset, measures in (("wikiqa", ("AP", "RR", "P@1", "nDCG@10")), ("dl20", ("nDCG@10", "AP(rel=2)"))):
    kwbert, monobert = (json.loads((RESULTS / f"{dataset}-{name}.json").read_text())["seeds"]
                        for name in ("kwbert", "monobert"))
    for measure in measures:
        effect = paired_difference({s: v[measure] for s, v in kwbert.items()},
                                   {s: v[measure] for s, v in monobert.items()})
        low, high = effect["ci95"]
        print(f"{dataset} {measure}: kwbert - monobert {effect['difference']:+.4f} [{low:+.4f}, {high:+.4f}] "
              f"over seeds {sorted(kwbert)}")

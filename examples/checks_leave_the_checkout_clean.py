"""Checks that leave the checkout as it was: `irpipe run FILE --check` (a pinned experiment as a regression) and
`irpipe reproduce NAME` write their runs and results under runs/ (ignored by git), never over the recorded
eval/results/ that the leaderboard and the README's tables are made from -- unless asked with `--record` -- beside
Pyserini's two-click reproductions (2CR), which likewise write runs and leave their YAML as it was.

    python examples/checks_leave_the_checkout_clean.py      # CACM BM25's pin (eval/cacm-bm25.yaml): ~15 s

Run from the repository's root as a user would, it prints `git status --porcelain` before and after (empty both
times on a fresh clone) and where the result went; exit 1 if the checks changed a tracked file or added one.
"""
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def status() -> str:
    """`git status --porcelain` of the checkout: what is changed or new outside .gitignore."""
    return subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"], capture_output=True, text=True,
                          check=True).stdout


before = status()
# Pyserini: python -m pyserini.2cr.msmarco --condition bm25-default   (runs under runs/, the YAML untouched)
# irpipe:   irpipe run eval/cacm-bm25.yaml --check; irpipe reproduce cacm-bm25 --warm   (--record: eval/results/)
for command in (["run", "eval/cacm-bm25.yaml", "--check"], ["reproduce", "cacm-bm25", "--warm"]):
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "-q", *command], cwd=REPO, capture_output=True,
                          text=True)
    print(f"irpipe {' '.join(command)}: exit {done.returncode}")
    if done.returncode:
        sys.exit(done.stdout[-2000:] + done.stderr[-2000:])
written = json.loads((REPO / "runs" / "results" / "cacm-bm25.json").read_text())
print("result written to runs/results/cacm-bm25.json:", {name: check["status"]
                                                         for name, check in written["checks"].items()})
after = status()
changed = sorted(set(after.splitlines()) - set(before.splitlines()))  # what the checks changed or added
print(f"git status --porcelain before: {before!r}, after: {after!r}; changed by the checks: {changed}")
sys.exit(1 if changed else 0)

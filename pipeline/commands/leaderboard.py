"""`irpipe leaderboard`: eval/LEADERBOARD.md from eval/results/*.json and eval/references.yaml."""
from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.data.files import atomic_write
from pipeline.data.outputs import check_writable
from pipeline.leaderboard import load_references, load_results, render


def define_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results-dir", default="eval/results", metavar="DIR")
    parser.add_argument("--references", default="eval/references.yaml", metavar="YAML")
    parser.add_argument("--output", default="eval/LEADERBOARD.md", metavar="MD")


def main(args: argparse.Namespace) -> int:
    check_writable(args.output, "file")
    text = render(load_results(Path(args.results_dir)), load_references(Path(args.references)))
    with atomic_write(args.output) as out:
        out.write(text)
    print(f"wrote {args.output}")
    return 0

"""`irpipe leaderboard`: eval/LEADERBOARD.md from eval/results/*.json and eval/references.yaml; with --html, the
reproduction page (pipeline/html_page.py), and with --screenshot, that page checked in headless Chromium."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline.data.files import atomic_write
from pipeline.data.outputs import check_writable
from pipeline.leaderboard import load_references, load_results, render

PAGE = "eval/reproduction.html"


def define_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results-dir", default="eval/results", metavar="DIR")
    parser.add_argument("--references", default="eval/references.yaml", metavar="YAML")
    parser.add_argument("--output", default="eval/LEADERBOARD.md", metavar="MD")
    parser.add_argument("--html", nargs="?", const=PAGE, metavar="HTML",
                        help=f"write the reproduction page instead (default {PAGE}): a row per pinned experiment of "
                             "--eval-dir with its scores, the published number beside, command, cost, date, "
                             "environment and per-query wins and losses")
    parser.add_argument("--eval-dir", default="eval", metavar="DIR", help="the experiment files, for --html")
    parser.add_argument("--screenshot", metavar="PNG",
                        help="with --html: load the page in headless Chromium, write its screenshot here, and exit 1 "
                             "on any console error")


def main(args: argparse.Namespace) -> int:
    references = load_references(Path(args.references))
    if args.html is None:
        check_writable(args.output, "file")
        text = render(load_results(Path(args.results_dir)), references)
        with atomic_write(args.output) as out:
            out.write(text)
        print(f"wrote {args.output}")
        return 0
    from pipeline.html_page import render_page
    from pipeline.reproduce import pins

    for path in (args.html, args.screenshot):
        if path:
            check_writable(path, "file")
    with atomic_write(args.html) as out:
        out.write(render_page(pins(Path(args.eval_dir), Path(args.results_dir)), references))
    print(f"wrote {args.html}")
    if not args.screenshot:
        return 0
    from pipeline.browser import check_in_browser

    errors = check_in_browser(args.html, args.screenshot)
    for error in errors:
        print(f"browser: {error}", file=sys.stderr)
    print(f"screenshot {args.screenshot}: {len(errors)} console error(s)")
    return 1 if errors else 0

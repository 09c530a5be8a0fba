"""`irpipe leaderboard`: eval/LEADERBOARD.md from eval/results/*.json and eval/references.yaml; with --html, the
reproduction page (pipeline/html_page.py), and with --screenshot, that page checked in headless Chromium; with
--prose, the tables between results markers in README.md, docs/ and eval/ made again (pipeline/prose.py)."""
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
    parser.add_argument("--prose", action="store_true",
                        help="rewrite the tables between <!-- results --> markers in README.md, docs/*.md and eval/*.md "
                             "from the results instead")
    parser.add_argument("--check", action="store_true",
                        help="with --prose: write nothing, list the files whose tables differ, exit 1 if any")
    parser.add_argument("--root", default=".", metavar="DIR", help="with --prose: the repository whose files to read")
    parser.add_argument("--screenshot", metavar="PNG",
                        help="with --html: load the page in headless Chromium, write its screenshot here, and exit 1 "
                             "on any console error")


def main(args: argparse.Namespace) -> int:
    _refuse_idle_flags(args)
    if args.prose:
        return _prose(args)
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


def _prose(args: argparse.Namespace) -> int:
    from pipeline.prose import load_results as results_by_name, marked_files, stale

    files = marked_files(Path(args.root))
    changed = stale(files, results_by_name(Path(args.results_dir)))
    for path, text in changed.items():
        if args.check:
            print(f"{path}: its results tables differ from {args.results_dir} (irpipe leaderboard --prose)")
        else:
            with atomic_write(path) as out:
                out.write(text)
            print(f"rewrote {path}")
    print(f"{len(files)} file(s) with results tables, {len(changed)} {'stale' if args.check else 'rewritten'}")
    return 1 if args.check and changed else 0


def _refuse_idle_flags(args: argparse.Namespace) -> None:
    """A flag that would do nothing in this mode is exit 2, never silently ignored (`--check` without `--prose` would
    rewrite eval/LEADERBOARD.md and exit 0)."""
    from pipeline.errors import ConfigError

    for flag, given, needs, mode in (("--check", args.check, "--prose", args.prose),
                                     ("--root", args.root != ".", "--prose", args.prose),
                                     ("--screenshot", args.screenshot, "--html", args.html is not None)):
        if given and not mode:
            raise ConfigError(f"{flag} works only with {needs}: add {needs}, or leave {flag} out")
    if args.prose and args.html is not None:
        raise ConfigError("--prose and --html write different things: run them one at a time")


"""`irpipe` command line: one subcommand per task, each in its own module under pipeline/commands/.

Every command module exposes `define_args(parser)` and `main(args) -> int`; `main` here maps an
`IrpipeError` -- and an OSError of the place written to (read-only, full, no permission) -- to a one-line message
on stderr and exit status 2; `--debug` (or IRPIPE_DEBUG=1) prints the traceback as well.
"""
from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import signal
import sys
import traceback

from pipeline import log
from pipeline.version import __version__
from pipeline.data.files import output_error
from pipeline.errors import IrpipeError

COMMANDS = {
    "datasets": ("pipeline.commands.datasets", "list, describe, fetch datasets; name dataset folders of your own"),
    "index": ("pipeline.commands.index", "build a Lucene index from JSONL, TSV, TREC SGML or a dataset"),
    "search": ("pipeline.commands.search", "BM25 (optionally RM3) retrieval into a run file"),
    "keywords": ("pipeline.commands.keywords", "diff-idf domain keyword dictionaries: build, extract keywords"),
    "eval": ("pipeline.commands.eval", "evaluate run files with ir-measures (tables, significance, plots)"),
    "trec_eval": ("pipeline.commands.trec_eval", "trec_eval's flags and output (QRELS RUN), computed with irpipe's measures"),
    "run": ("pipeline.commands.run", "run a pipeline spec or an experiment file end to end (run file + scores)"),
    "tune": ("pipeline.commands.tune", "grid-search a spec's {placeholders} on a tuning set (e.g. fusion weights on dev)"),
    "leaderboard": ("pipeline.commands.leaderboard", "regenerate eval/LEADERBOARD.md from eval/results and references"),
    "reproduce": ("pipeline.commands.reproduce", "list the pinned experiments with their cost; run a selection, pinned "
                  "vs measured"),
    "rerank": ("pipeline.commands.rerank", "rerank a run file with a neural model (checkpoint or pretrained)"),
    "train": ("pipeline.commands.train", "train a neural reranker (checkpoint folder, train.jsonl log, --resume)"),
    "pretrain-mlm": ("pipeline.commands.pretrain_mlm", "pretrain a small BERT by masked-language modelling (resumable)"),
    "encode": ("pipeline.commands.encode", "store document encodings of a late-interaction model (biencoder, ...)"),
    "pyserini": ("pipeline.commands.pyserini", "run Pyserini's own CLI (search.lucene, index.lucene, eval.trec_eval) "
                 "on irpipe's JVM"),
}


class Parser(argparse.ArgumentParser):
    """argparse's parser, except that an argument no option takes is reported by the (sub)command it was given to --
    its usage, not irpipe's -- with the closest flags: `irpipe search --hit 10` says "did you mean --hits?"; and a
    misspelt choice (a command, a flag's value) with the closest one: `irpipe serch` says "did you mean search?"."""

    def error(self, message: str):
        wrong = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if wrong:
            choices = re.findall(r"'([^']*)'", wrong.group(2)) or [c.strip() for c in wrong.group(2).split(",")]
            close = difflib.get_close_matches(wrong.group(1), choices, n=1, cutoff=0.6)
            message += f" (did you mean {close[0]}?)" if close else ""
        super().error(message)

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            parsers = _parsers(self, sys.argv[1:] if args is None else args)
            parsers[-1].error(f"unrecognized arguments: {' '.join(map(str, extras))}{_suggestion(parsers, extras)}")
        return parsed


def _parsers(parser: argparse.ArgumentParser, argv) -> list[argparse.ArgumentParser]:
    """irpipe's parser and those of the (sub)commands `argv` names, outermost first (`keywords build`: three)."""
    chain = [parser]
    for word in map(str, argv):
        subcommands = next((action.choices for action in chain[-1]._actions
                            if isinstance(action, argparse._SubParsersAction)), {})
        if word in subcommands:
            chain.append(subcommands[word])
    return chain


def _suggestion(parsers: list[argparse.ArgumentParser], extras: list) -> str:
    """" (did you mean --hits?)": for each unknown flag among `extras`, the closest flag of `parsers`, if any is close."""
    flags = [flag for parser in parsers for action in parser._actions for flag in action.option_strings]
    close = [match for extra in map(str, extras) if extra.startswith("-")
             for match in difflib.get_close_matches(extra.split("=", 1)[0], flags, n=1, cutoff=0.7)]
    return f" (did you mean {', '.join(dict.fromkeys(close))}?)" if close else ""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="irpipe", description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"irpipe {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars or info logs")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logs")
    parser.add_argument("--offline", action="store_true", help="never download (same as IRPIPE_OFFLINE=1)")
    parser.add_argument("--debug", action="store_true", help="print the traceback of an error (same as IRPIPE_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text, allow_abbrev=False)  # no flag aliases
        importlib.import_module(module).define_args(command)
        command.set_defaults(_module=module)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that the same clean-up runs (temporary files, child processes, what was saved)."""


def _terminate(signum, frame):
    raise Terminated


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except IrpipeError as error:  # a flag's value refused as it is parsed (commands/flags.py)
        print(f"irpipe: error: {error}", file=sys.stderr)
        return 2
    log.configure(quiet=args.quiet, verbose=args.verbose)
    if args.offline:
        os.environ["IRPIPE_OFFLINE"] = "1"
    if not getattr(args, "_module", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return importlib.import_module(args._module).main(args)
    except (IrpipeError, OSError) as error:
        reported = error if isinstance(error, IrpipeError) else output_error(error.filename, error)
        if reported is None or (not isinstance(error, IrpipeError) and not error.filename):
            raise  # an OSError that does not name the file written: a bug, shown with its traceback
        if args.debug or os.environ.get("IRPIPE_DEBUG", "") not in ("", "0"):
            traceback.print_exc()
        print(f"irpipe {args.command}: error: {reported}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interrupt:
        terminated = isinstance(interrupt, Terminated)
        print(f"irpipe {args.command}: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return 143 if terminated else 130


if __name__ == "__main__":
    sys.exit(main())

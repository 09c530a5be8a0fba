"""Flags checked as they are parsed, by the checks of pipeline/validate.py (or one built on them):

    parser.add_argument("--run-tag", type=checked(check_run_tag, "search", "--run-tag"))

A refused value is the check's ConfigError, which argparse lets through to the command line's handler: one line
naming the command and the flag, exit 2, before any work.
"""
from __future__ import annotations

from typing import Callable


def checked(check: Callable, owner: str, flag: str) -> Callable[[str], str]:
    """An argparse `type=` that runs `check(owner, flag, text)` on the flag's text and keeps the text."""
    def parse(text: str) -> str:
        check(owner, flag, text)
        return text

    parse.__name__ = flag  # argparse names the type in its own messages
    return parse

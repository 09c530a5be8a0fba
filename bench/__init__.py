"""Benchmark commands (`python -m bench.<name>`): each prints the machine it ran on and, with
`--record`, writes its rows to eval/benchmarks/<name>.json with the command that produced them."""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]


def hardware() -> str:
    return f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"


def machine() -> str:
    return f"{hardware()}, load average {os.getloadavg()[0]:.1f} at the end"


def run_main(main: Callable[[], int]) -> int:
    """A benchmark's `main()` as `irpipe` runs a command: bad input (an `IrpipeError`: a dataset name, a `--set`
    value) is a one-line message on stderr and exit status 2, not a traceback."""
    from pipeline.errors import IrpipeError

    try:
        return main()
    except IrpipeError as error:
        spec = main.__globals__.get("__spec__")  # under `python -m`, __module__ is "__main__"; the spec has the name
        print(f"python -m {spec.name if spec else main.__module__}: error: {error}", file=sys.stderr)
        return 2


def record_name(value: str) -> str:
    """A record's NAME (argparse type): eval/benchmarks/NAME.json, so letters, digits, '.', '_' and '-' only, and no
    '.json' of its own; anything else (a path, '..') is argparse's exit 2 before any work is done."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", value) or value.endswith(".json"):
        raise argparse.ArgumentTypeError(f"{value!r}: a record's name is letters, digits, '.', '_' and '-' (it "
                                         "becomes eval/benchmarks/NAME.json; no folders, no .json)")
    return value


def rounded(measured: dict[str, float]) -> dict[str, float]:
    """Measures as a record keeps them: 4 decimals."""
    return {measure: round(value, 4) for measure, value in measured.items()}


def positive(value: str) -> int:
    """A count of at least 1 (argparse type): anything else is argparse's exit 2 before any work is done."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: expected a whole number of at least 1")
    return number


def record(name: str, module: str, argv: list[str] | None, payload: dict) -> None:
    """eval/benchmarks/<name>.json: the command, the machine and `payload`, written atomically."""
    from pipeline.data.files import atomic_write

    data = {"command": f"python -m {module} " + " ".join(argv if argv is not None else sys.argv[1:]),
            "machine": machine()} | payload
    with atomic_write(REPO / "eval" / "benchmarks" / f"{name}.json") as out:
        json.dump(data, out, indent=2)
        out.write("\n")

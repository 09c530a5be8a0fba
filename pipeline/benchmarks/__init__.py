"""Benchmark commands (`python -m pipeline.benchmarks.<name>`): each prints the machine it ran on and, with
`--record`, writes its rows to eval/benchmarks/<name>.json with the command that produced them."""
from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def machine() -> str:
    return (f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
            f"load average {os.getloadavg()[0]:.1f} at the end")


def record(name: str, module: str, argv: list[str] | None, payload: dict) -> None:
    """eval/benchmarks/<name>.json: the command, the machine and `payload`, written atomically."""
    from pipeline.data.files import atomic_write

    data = {"command": f"python -m {module} " + " ".join(argv if argv is not None else sys.argv[1:]),
            "machine": machine()} | payload
    with atomic_write(REPO / "eval" / "benchmarks" / f"{name}.json") as out:
        json.dump(data, out, indent=2)
        out.write("\n")

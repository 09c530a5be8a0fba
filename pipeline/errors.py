"""Errors that name the file, line and field at fault.

Every user-facing failure in irpipe raises a subclass of `IrpipeError`; the CLI prints its message and exits
non-zero. Nothing uses `assert` or `print`/`exit` for user errors.
"""
from __future__ import annotations

import difflib
from pathlib import Path


def printable(text: str) -> str:
    """`text` with every character that is not printable written as a repr writes it (`\\x1b`, `\\u2028`, `\\t`), so
    a message quoting input never sends a control character to the terminal."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class IrpipeError(Exception):
    """Base class for errors that the command line reports as a one-line message."""


class InputError(IrpipeError):
    """Malformed input file: carries the path, the 1-based line number and the field at fault."""

    def __init__(self, path: str | Path, message: str, line: int | None = None, field: str | None = None):
        self.path, self.line, self.field = str(path), line, field
        where = self.path if line is None else f"{self.path}:{line}"
        what = f" [{field}]" if field else ""
        super().__init__(printable(f"{where}{what}: {message}"))  # a path, field or value quoted as it was: escaped


class ModelFolderError(InputError):
    """A model folder that cannot be loaded: names the file (and field) at fault. (CheckpointError is one.)"""


class CheckpointError(ModelFolderError):
    """A checkpoint folder that cannot be loaded: names the file (and the field or tensor) at fault. Here, at the
    ground floor, so that a model's own files can raise it without importing pipeline/rerank/checkpoint.py (which
    imports the model registry)."""


class OutputError(IrpipeError):
    """A file that cannot be written (read-only folder, full disk, no permission): names the file and what to do."""

    def __init__(self, path: str | Path, message: str):
        self.path, self.reason = str(path), message
        super().__init__(printable(f"{self.path}: {message}"))


class UnknownNameError(IrpipeError, KeyError):
    """An unknown registered name (dataset, stage, measure...), with close matches suggested."""

    def __init__(self, kind: str, name: str, known: list[str]):
        self.kind, self.name = kind, name
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else f" Known: {', '.join(sorted(known)[:30])}"
        super().__init__(f"unknown {kind} {name!r}.{hint}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.args[0]


class MissingResourceError(IrpipeError):
    """A dataset file, index or model that cannot be found; the message says what to place where."""


class ConfigError(IrpipeError):
    """A stage, pipeline or experiment configured in a way that cannot run; `field` names the option at fault."""

    def __init__(self, message: str, field: str | None = None):
        self.field = field
        super().__init__(message)


class EngineError(IrpipeError):
    """A cluster engine's job that could not finish (a worker that died past its retries, a cluster that cannot be
    reached); its finished shards are kept, and the same command resumes it."""

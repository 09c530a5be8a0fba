"""The command line: every subcommand's help renders, and importing the CLI stays light."""
from __future__ import annotations

import subprocess
import sys

import pytest

from pipeline.cli import COMMANDS, main


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_renders(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    assert f"usage: irpipe {command}" in capsys.readouterr().out


def test_no_command_prints_usage_and_fails(capsys):
    assert main([]) == 2
    assert "usage: irpipe" in capsys.readouterr().err


def test_building_the_parser_imports_no_heavy_library():
    code = ("import sys; from pipeline.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('torch', 'transformers', 'jnius', 'jieba', 'pyserini') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

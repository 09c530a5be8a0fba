"""The command line: every subcommand's help renders, and importing the CLI stays light."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


@pytest.mark.parametrize("jvm", [False, True], ids=["python", "with-the-jvm-in-process"])
def test_sigterm_cleans_up_like_ctrl_c_and_exits_143(tmp_path, jvm):
    """SIGTERM during a command raises like Ctrl-C inside it (so atomic writes and child clean-up run) and exits 143,
    also once the command has started the in-process JVM (Lucene), which would otherwise take SIGTERM for itself."""
    import signal
    import subprocess
    import sys
    import time

    code = ("import os, signal, sys, time\n"
            "from pipeline import cli\n"
            "from pipeline.data.files import atomic_write\n"
            "def slow(args):\n"
            + ("    from pipeline import java; java.start()\n" if jvm else "") +
            "    with atomic_write(args.out) as out:\n"
            "        out.write('partial'); out.flush(); print('ready', flush=True); time.sleep(30)\n"
            "    return 0\n"
            "import types; module = types.ModuleType('slowcmd'); module.main = slow\n"
            "module.define_args = lambda p: p.add_argument('out')\n"
            "sys.modules['slowcmd'] = module; cli.COMMANDS['slow'] = ('slowcmd', 'a slow writer')\n"
            "sys.exit(cli.main(['slow', sys.argv[1]]))\n")
    target = tmp_path / "out.txt"
    child = subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, cwd=tmp_path)  # where a JVM crash would leave its hs_err file
    assert child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGTERM)
    stdout, stderr = child.communicate(timeout=30)
    assert child.returncode == 143 and "irpipe slow: terminated" in stderr and "Traceback" not in stderr
    assert not target.exists() and list(tmp_path.iterdir()) == []  # the temporary file is gone too


BENCHMARKS = sorted(p.stem for p in (Path(__file__).resolve().parent.parent / "pipeline" / "benchmarks").glob("*.py")
                    if p.stem != "__init__")


@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_benchmark_command_reports_bad_input_like_irpipe(name):
    """`python -m pipeline.benchmarks.<name>` goes through run_main: an IrpipeError is exit 2, not a traceback."""
    source = (Path(__file__).resolve().parent.parent / "pipeline" / "benchmarks" / f"{name}.py").read_text()
    assert source.rstrip().endswith("sys.exit(run_main(main))"), f"{name}.py: end with sys.exit(run_main(main))"


def test_a_bad_benchmark_setting_is_one_line_and_exit_2():
    result = subprocess.run([sys.executable, "-m", "pipeline.benchmarks.mrnn_dynamics", "--set", "lr"],
                            capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == ("python -m pipeline.benchmarks.mrnn_dynamics: error: --set 'lr': expected "
                                     "KEY=VALUE"), result.stderr

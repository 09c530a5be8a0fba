"""The command line: every subcommand's help renders, and importing the CLI stays light."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import COMMANDS, build_parser, main


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_renders(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    assert f"usage: irpipe {command}" in capsys.readouterr().out


# Every command that writes something, with its other required arguments: what it writes is its --output.
WRITERS = {"index": ["index", "--input", "docs.jsonl"], "search": ["search", "--topics", "t.tsv"],
           "rerank": ["rerank", "--model", "m"], "run": ["run", "bm25()"], "tune": ["tune", "bm25()", "--grid", "k=1"],
           "leaderboard": ["leaderboard"], "train": ["train", "hcan", "--train", "t"],
           "encode": ["encode", "--model", "m"], "keywords build": ["keywords", "build", "--corpus", "c"],
           "pretrain-mlm": ["pretrain-mlm"]}


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_what_a_command_writes_is_named_by_output(command):
    assert build_parser().parse_args([*WRITERS[command], "--output", "x"]).output == "x"


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_the_output_has_no_second_name(command, capsys):
    """No --out (nor argparse's abbreviation of --output), and `irpipe index` takes no --index for what it writes."""
    other = "--index" if command == "index" else "--out"
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([*WRITERS[command], other, "x"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and (f"unrecognized arguments: {other} x" in err or "required: --output" in err), err


@pytest.mark.parametrize("argv, usage, message", [
    (["search", "--output", "x", "--hit", "10"], "irpipe search", "unrecognized arguments: --hit 10 (did you mean --hits?)"),
    (["run", "bm25()", "--chek"], "irpipe run", "unrecognized arguments: --chek (did you mean --check?)"),
    (["--quite", "datasets", "list"], "irpipe datasets list", "unrecognized arguments: --quite (did you mean --quiet?)"),
    (["search", "--output", "x", "--thread=2"], "irpipe search", "--thread=2 (did you mean --threads?)"),
    (["search", "--output", "x", "--zzzz"], "irpipe search", "unrecognized arguments: --zzzz\n")])
def test_an_unknown_flag_gets_the_commands_usage_and_the_closest_flag(argv, usage, message, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.startswith(f"usage: {usage} ") and message in err, err


@pytest.mark.parametrize("argv, message", [
    (["serch"], "invalid choice: 'serch' (choose from 'datasets', "),
    (["serch"], ") (did you mean search?)"),
    (["search", "--output", "x", "--output-format", "trek"], "invalid choice: 'trek' (choose from 'trec', 'msmarco') "
                                                              "(did you mean trec?)"),
    (["zzzzzz"], "'pyserini')\n")])
def test_a_misspelt_command_or_choice_gets_the_closest_one(argv, message, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2 and message in err, err


def test_run_takes_record_or_results_dir_not_both(capsys):
    with pytest.raises(SystemExit) as done:
        main(["run", "eval/cacm-bm25.yaml", "--record", "--results-dir", "x"])
    assert done.value.code == 2 and "argument --results-dir: not allowed with argument --record" in capsys.readouterr().err


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


BENCHMARKS = sorted(p.stem for p in (Path(__file__).resolve().parent.parent / "bench").glob("*.py")
                    if not p.stem.startswith("_"))  # _name.py: a module the benchmarks share, not a command


@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_benchmark_command_reports_bad_input_like_irpipe(name):
    """`python -m bench.<name>` goes through run_main: an IrpipeError is exit 2, not a traceback."""
    source = (Path(__file__).resolve().parent.parent / "bench" / f"{name}.py").read_text()
    assert source.rstrip().endswith("sys.exit(run_main(main))"), f"{name}.py: end with sys.exit(run_main(main))"


def test_a_bad_benchmark_setting_is_one_line_and_exit_2():
    result = subprocess.run([sys.executable, "-m", "bench.mrnn_dynamics", "--set", "lr"],
                            capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == ("python -m bench.mrnn_dynamics: error: --set 'lr': expected "
                                     "KEY=VALUE"), result.stderr


REPO = Path(__file__).resolve().parent.parent


def _options(parser) -> dict[str, set[str]]:
    """{"index": {"--input", ...}, "keywords build": {...}, ...}: the flags of every (sub)command of a parser."""
    import argparse

    found: dict[str, set[str]] = {}

    def walk(prefix: str, node) -> None:
        found[prefix] = {flag for action in node._actions for flag in action.option_strings}
        for action in node._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(f"{prefix} {name}".strip(), child)

    walk("", parser)
    return found


def _documented_commands() -> list[tuple[str, str]]:
    """(page, command) for every `irpipe ...` command README.md and docs/*.md quote: each line of a ```bash or
    ```sh block that calls irpipe (after `VAR=value` or `&&`), its continuation lines joined, and each inline
    `irpipe ...` span of the prose and tables. A span quoting an error message (`irpipe search: error: ...`) is not
    a command."""
    import re

    call = re.compile(r"(?:^|&&|\s)(?:[A-Z_]+=\S+\s+)*(irpipe\s+\S.*)")
    found = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        name, current, in_code = page.relative_to(REPO).as_posix(), None, False
        for line in page.read_text(encoding="utf-8").splitlines():
            if line.startswith("```"):  # shell blocks only (the Layout block is a tree, not commands)
                in_code, current = (not in_code and line[3:].split()[:1] in (["bash"], ["sh"])), None
                continue
            if not in_code:
                found += [(name, span) for span in re.findall(r"`(irpipe [^`]+)`", line)
                          if not re.match(r"irpipe [\w-]+( [\w-]+)?:", span)]
                continue
            if current is not None:
                current += " " + line.split(" #")[0]
            elif (match := call.search(line.split(" #")[0])):
                current = match.group(1)
            if current is not None and not current.rstrip().endswith("\\"):
                found.append((name, current.replace("\\", " ")))
                current = None
    return found


def test_every_flag_of_the_documented_commands_exists():
    """A command README.md or docs/*.md shows is one irpipe has, and each flag it gives (--output, not --out;
    `irpipe index --output`, not --index; -m, -c) is one that command takes. `irpipe pyserini MODULE ...` passes
    what follows MODULE to Pyserini, so only the flags before it are irpipe's."""
    import shlex

    options = _options(build_parser())
    commands = _documented_commands()
    assert len(commands) > 100
    assert {page for page, _ in commands} >= {"README.md", "docs/usage.md", "docs/coming-from.md", "docs/data.md"}
    wrong = []
    for page, command in commands:
        try:
            words = shlex.split(command)
        except ValueError:  # a span with an unmatched quote: its words as written
            words = command.split()
        plain = [word for word in words[1:] if not word.startswith("-")]  # the command, its values
        name = " ".join(plain[:2]) if " ".join(plain[:2]) in options else (plain[0] if plain else "")
        if name not in options:
            wrong.append(f"{page}: {command.strip()!r}: no command irpipe {name}")
            continue
        known = options[name] | options[""]
        given = words[1:words.index(plain[1])] if name == "pyserini" and len(plain) > 1 else words[1:]
        for word in given:
            flag = word.split("=")[0] if word.startswith("--") else word[:2]  # -mmap is -m map, as argparse reads it
            if word.startswith("-") and len(word) > 1 and not word[1].isdigit() and flag not in known:
                wrong.append(f"{page}: {command.strip()!r}: {flag} is not a flag of irpipe {name}")
    assert not wrong, "\n".join(wrong)


def test_no_comment_points_at_an_issue_tracker_or_a_removed_flag():
    """Docstrings, comments, messages, docs and experiment files say what the code does here, not `issue 13` (a
    tracker outside the repo), and name no flag that is gone (--store-docvectors, --out). Generated pages and
    recorded results are left out: they are made from these."""
    import re

    pattern = re.compile(r"\bissues? \d+\b|--store-docvectors|--out\b")
    prose = [*(REPO / "docs").glob("*.md"), *(REPO / "eval").glob("*.yaml"), *(REPO / "eval" / "archive").glob("*.yaml"),
             *(path for path in (REPO / "eval").rglob("*.md") if path.name != "LEADERBOARD.md")]
    files = [REPO / "README.md", *(REPO / "pipeline").rglob("*.py"), *(REPO / "tests").rglob("*.py"),
             *(REPO / "bench").rglob("*.py"), *prose]
    found = [f"{path.relative_to(REPO)}:{number}: {line.strip()}" for path in files if path != Path(__file__).resolve()
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
             if pattern.search(line)]
    assert not found, "\n".join(found)

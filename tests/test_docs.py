"""The documentation holds: README.md stays short and opens with the commands CI runs, every relative link of
README.md and docs/*.md reaches a file (and a heading, where it names one), every test docs/coming-from.md names
exists, the README's experiment file is the file, every code block marked runnable (```bash runnable or
```python runnable) runs, on tiny data, in a scratch folder with a cache of its own, and so does every script of
examples/ (but bm25_addax.py, which trains: tests/test_api.py runs it on WikiQA). The `irpipe` flags the pages
quote are checked against the parser in tests/test_cli.py (`test_every_flag_of_the_documented_commands_exists`)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO, needs_shared_data

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
INSTALL = 'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test,pyterrier]"'
TEST = ". .venv/bin/activate && pytest"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```$", re.M | re.S)


def code_blocks(page: Path) -> list[tuple[str, str, int]]:
    """(info string, body, line number of the fence) of every fenced block of a page."""
    text = page.read_text(encoding="utf-8")
    return [(m.group(1).strip(), m.group(2), text.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(text)]


def prose(page: Path) -> str:
    """A page without its fenced blocks (a link inside a code block is not a link)."""
    return FENCE.sub("", page.read_text(encoding="utf-8"))


def test_the_readme_is_short_and_opens_with_install_test_and_the_main_job():
    """At most 200 lines; its first three shell blocks are the install command, the test command (both as .ci/run
    runs them, byte for byte) and the main job, `irpipe run`."""
    readme = REPO / "README.md"
    assert len(readme.read_text(encoding="utf-8").splitlines()) <= 200
    shell = [body.strip() for info, body, _ in code_blocks(readme) if info.split()[:1] == ["bash"]]
    assert shell[0] == INSTALL and shell[1] == TEST
    assert shell[2].endswith("irpipe run")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert INSTALL in ci and TEST in ci


def test_the_readmes_layout_lists_every_model():
    """The Layout section names each model file of pipeline/rerank/models/."""
    from pipeline.rerank import models

    layout = (REPO / "README.md").read_text(encoding="utf-8").split("## Layout", 1)[1]
    assert len(models.model_names()) == 6
    assert [name for name in models.model_names() if f"{name}.py" not in layout] == []


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    headings = re.findall(r"^#{1,6} +(.+?) *$", prose(page), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_relative_link_reaches_a_file_and_its_heading():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", prose(page)):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            where = (page.parent / path).resolve() if path else page
            if not where.exists():
                broken.append(f"{page.relative_to(REPO)}: {target}: no such file")
            elif anchor and where.suffix == ".md" and anchor not in anchors(where):
                broken.append(f"{page.relative_to(REPO)}: {target}: no heading #{anchor} in {where.name}")
    assert not broken, "\n".join(broken)


def test_every_test_coming_from_names_exists_and_every_row_names_one():
    """docs/coming-from.md's test column names tests as `tests/FILE.py::NAME`: each file defines NAME, and each
    row of its tables (but the header rows) names at least one."""
    page = (REPO / "docs" / "coming-from.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines()
            if line.startswith("| ") and not line.startswith(("| habit |", "| --- |"))]
    assert len(rows) >= 20
    missing = [row[:80] for row in rows if "::test_" not in row]
    assert not missing, missing
    named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", page)
    assert len(named) >= len(rows)
    absent = [f"{file}::{name}" for file, name in named
              if not (REPO / file).is_file()
              or not re.search(rf"^def {name}\(", (REPO / file).read_text(encoding="utf-8"), re.M)]
    assert not absent, absent
    assert "<!-- pyterrier rows: lead -->" in page or "tests/test_pyterrier.py::" in page


def test_the_readmes_experiment_file_is_the_file():
    """A block after `<!-- file: PATH -->` shows PATH as it is."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    shown = re.findall(r"<!-- file: (\S+) -->\n```\w*\n(.*?)^```$", text, re.M | re.S)
    assert shown
    for path, body in shown:
        assert body == (REPO / path).read_text(encoding="utf-8"), path


RUNNABLE = [(page, info.split()[0], body, line) for page in PAGES for info, body, line in code_blocks(page)
            if "runnable" in info.split()[1:]]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> tuple[Path, dict]:
    """A scratch folder standing in for the repository root (tests/ and eval/'s experiment files linked in, outputs
    written here, eval/results/ too) and an environment with a cache of its own, shared by the blocks in order."""
    root = tmp_path_factory.mktemp("docs-runnable")
    (root / "tests").symlink_to(REPO / "tests")
    (root / "eval").mkdir()
    for experiment in (REPO / "eval").glob("*.yaml"):
        (root / "eval" / experiment.name).symlink_to(experiment)
    env = {**os.environ, "IRPIPE_CACHE": str(root / "cache"), "OMP_NUM_THREADS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # this venv's irpipe
    return root, env


def test_there_are_runnable_blocks_on_several_pages():
    assert len(RUNNABLE) >= 5 and len({page for page, *_ in RUNNABLE}) >= 3
    assert {kind for _, kind, _, _ in RUNNABLE} == {"bash", "python"}


@needs_shared_data
@pytest.mark.slow
@pytest.mark.parametrize("page, kind, body, line", RUNNABLE,
                         ids=[f"{page.name}:{line}" for page, _, _, line in RUNNABLE])
def test_a_runnable_block_runs(workspace, page, kind, body, line):
    """Each block exits 0 (README.md's CACM block, which indexes CACM twice, took 52 s at load average 6.9; the
    others 2-38 s); the limit, 5 minutes, is for a loaded machine."""
    root, env = workspace
    command = ["bash", "-euo", "pipefail", "-c", body] if kind == "bash" else [sys.executable, "-c", body]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{page.name}:{line}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


EXAMPLES = sorted((REPO / "examples").glob("*.py"))
RUN_ELSEWHERE = {"bm25_addax.py": "tests/test_api.py::test_the_example_script_is_the_main_job_byte_for_byte"}


def test_every_example_script_is_run_by_a_test():
    assert len(EXAMPLES) >= 4 and set(RUN_ELSEWHERE) <= {script.name for script in EXAMPLES}


def test_every_example_script_is_named_in_the_docs():
    named = "".join(page.read_text(encoding="utf-8") for page in PAGES)
    assert [path.name for path in EXAMPLES if path.name not in RUN_ELSEWHERE and f"examples/{path.name}" not in named] == []


@needs_shared_data
@pytest.mark.slow
@pytest.mark.parametrize("script", [s for s in EXAMPLES if s.name not in RUN_ELSEWHERE], ids=lambda s: s.name)
def test_an_example_script_runs(workspace, script):
    """Each of examples/ (but those RUN_ELSEWHERE) exits 0 in the scratch folder (the feature union and ltr one,
    whose two BM25 indexes are its cost, took 50 s fresh at load average 9; pyterrier_experiment.py and
    pyterrier_verbs.py about 25 s each on CACM, its index built once in the folder's cache)."""
    pytest.importorskip("pyterrier", reason='the examples show the pyterrier extra: pip install -e ".[pyterrier]"')
    root, env = workspace
    done = subprocess.run([sys.executable, str(script)], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{script.name}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"

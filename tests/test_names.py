"""Names: one name for one thing. No two classes of the package share a name, a function's name says what it does,
and a class lives in the module its name says."""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pipeline"


def _top_level(kind: type) -> dict[str, list[str]]:
    """{name: [module, ...]} of the package's public top-level classes (or functions)."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, kind) and not node.name.startswith("_"):
                found[node.name].append(str(path.relative_to(PACKAGE.parent)))
    return found


@pytest.mark.slow
def test_no_two_classes_share_a_name():
    """E.g. the labelled text pair of a matching dataset is a `LabelledPair`; `Pair` is the reranking pair alone."""
    shared = {name: modules for name, modules in _top_level(ast.ClassDef).items() if len(modules) > 1}
    assert not shared, shared


def test_the_text_normalisers_say_what_they_do():
    from pipeline.data.corpus import collapse_whitespace
    from pipeline.retrieve.segment import fold_width_and_case

    assert "normalise" not in _top_level(ast.FunctionDef)
    assert collapse_whitespace("  Ａ\tb \n c ") == "Ａ b c"            # whitespace only: case and width kept
    assert fold_width_and_case("ｉＰｈｏｎｅ  Six") == "iphone  six"   # NFKC + lower case: whitespace kept


def test_topics_live_in_the_topics_module():
    """Topics is defined in pipeline/data/topics.py (runs.py imports it; no module defines a second one)."""
    from pipeline.data.topics import Topics

    assert Topics.__module__ == "pipeline.data.topics"
    assert _top_level(ast.ClassDef)["Topics"] == ["pipeline/data/topics.py"]

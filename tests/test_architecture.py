"""The shape pipeline/ARCHITECTURE.md describes, checked: packages import one way (every import, lazy ones in
functions included), no package-level circle, no module over the size a reader holds in their head."""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pipeline"
# Low to high: a module may import from its own layer's units and from lower layers, never from higher ones.
LAYERS = [
    {"errors", "log", "validate", "java"},        # the base: errors, logging, option checks, the JVM
    {"data"},                                     # formats and the dataset registry: files only
    {"retrieve"},                                 # Lucene: indexes, search, keyword dictionaries
    {"rerank"},                                   # models, the BERT backbone, checkpoints, stores, scoring
    {"evaluate"},                                 # ir-measures
    {"training"},                                 # examples, losses, the loop, recipes
    {"cache", "engine", "binding"},               # the stage cache; where work runs; what a pipeline is bound to
    {"stage", "stages"},                          # the algebra, and the stages (bind resolves, transform computes)
    {"spec", "compare", "experiment", "tune", "leaderboard"},  # specs, experiments, tables
    {"commands", "cli", "benchmarks"},            # the command line and the benchmark commands
]
LAYER_OF = {unit: number for number, units in enumerate(LAYERS) for unit in units}
MAX_LINES = 400


def _unit(module: str) -> str | None:
    """The top-level unit (package or module under pipeline/) of a dotted `pipeline.x.y` name."""
    parts = module.split(".")
    return parts[1] if parts[0] == "pipeline" and len(parts) > 1 else None


def _imports() -> list[tuple[Path, int, str, str]]:
    """(file, line, importing unit, imported unit) for every import of another unit of the package."""
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        unit = _unit(".".join(relative.parts))
        if unit is None or unit == "__init__":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            for name in names:
                target = _unit(name)
                is_unit = target is not None and ((PACKAGE / f"{target}.py").exists() or (PACKAGE / target).is_dir())
                if is_unit and target != unit:
                    found.add((path, node.lineno, unit, target))
    return sorted(found)


def test_every_unit_has_a_layer():
    units = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())}
    assert units - set(LAYER_OF) == set(), "add the new unit to LAYERS here and in pipeline/ARCHITECTURE.md"


def test_imports_go_down_the_layers():
    upward = [f"{path.relative_to(PACKAGE.parent)}:{line}: {unit} (layer {LAYER_OF[unit]}) imports {target} "
              f"(layer {LAYER_OF[target]})" for path, line, unit, target in _imports()
              if LAYER_OF[target] > LAYER_OF[unit]]
    assert upward == []


def test_no_package_level_import_circle():
    graph: dict[str, set[str]] = defaultdict(set)
    for _, _, unit, target in _imports():
        graph[unit].add(target)
    graph = dict(graph)

    def reaches(start: str, goal: str, seen: set) -> bool:
        return any(n == goal or (n not in seen and not seen.add(n) and reaches(n, goal, seen))
                   for n in graph.get(start, ()))

    circles = sorted(f"{a} -> {b} -> ... -> {a}" for a in graph for b in graph[a] if reaches(b, a, set()))
    assert circles == []


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_stay_small(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE.parent)} has {lines} lines; split it where it has seams"


def test_architecture_page_lists_the_layers():
    page = (PACKAGE / "ARCHITECTURE.md").read_text(encoding="utf-8")
    for units in LAYERS:
        for unit in units:
            assert f"`{unit}`" in page, f"pipeline/ARCHITECTURE.md does not place `{unit}`"

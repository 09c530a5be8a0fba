"""The package's shape (pipeline/ARCHITECTURE.md): its units import one way down the layers, no import cycle
anywhere in pipeline/ (function-level imports included; `if TYPE_CHECKING:` imports, which never run, aside) and
none between its units, no module over its line cap (400 lines; a model file 600, see `line_cap`); a model is one
file of pipeline/rerank/models/, found by the registry without being listed anywhere."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pipeline"
# Low to high: a unit (a package or module right under pipeline/) imports from its own layer and lower ones only.
LAYERS = [
    {"version", "errors", "log", "validate", "declared", "java", "environment"},  # the base: errors, logging, option checks and
                                                  # declarations, the JVM, the environment
    {"data"},                                     # formats and the dataset registry: files only
    {"engine"},                                   # where work runs (local, Ray): shards, actors, resumable jobs
    {"retrieve"},                                 # Lucene: indexes, search, keyword dictionaries
    {"rerank"},                                   # models, the BERT backbone, checkpoints, stores, scoring
    {"evaluation", "trec_eval", "significance"},  # ir-measures; trec_eval's flags and output over them; paired tests
    {"training"},                                 # examples, negatives, the loop, recipes
    {"cache", "binding"},                         # the stage cache; what a pipeline is bound to
    {"stage", "stages", "on_frames"},             # the algebra, and the stages (bind resolves, transform computes);
                                                  # a stage on PyTerrier's frames
    {"spec", "compare", "experiment", "experiment_inputs", "tune", "leaderboard", "pyterrier", "api",  # specs, experiments, tables, PyTerrier,
     "provenance", "reproduce", "cold_runs", "cold_attempts", "html_page", "browser", "prose", "result_text"},  # the Python front door; reproductions and their page
    {"commands", "cli"},                          # the command line
]
LAYER_OF = {unit: number for number, units in enumerate(LAYERS) for unit in units}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the pipeline modules it imports anywhere in its body (top level or inside functions)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        unrun = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and
                 isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING" for n in ast.walk(block)}
        for node in ast.walk(tree):
            if id(node) in unrun:
                continue
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + [base]).strip(".")
                targets |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
            elif isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, found = {}, {}, [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_a_cycle_hidden_in_a_function():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.slow
def test_no_import_cycle_in_the_package():
    assert cycles(import_graph()) == []


def _unit(module: str) -> str:
    return module.split(".")[1]


@pytest.mark.slow
def test_every_unit_has_a_layer():
    units = {_unit(module) for module in import_graph() if module != "pipeline"}
    assert units - set(LAYER_OF) == set(), "place the new unit in LAYERS and in pipeline/ARCHITECTURE.md"
    page = (PACKAGE / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert [unit for unit in LAYER_OF if f"`{unit}`" not in page] == []


@pytest.mark.slow
def test_imports_go_down_the_layers():
    upward = sorted(f"{module} (layer {LAYER_OF[_unit(module)]}) imports {target} (layer {LAYER_OF[_unit(target)]})"
                    for module, targets in import_graph().items() if module != "pipeline" for target in targets
                    if target != "pipeline" and LAYER_OF[_unit(target)] > LAYER_OF[_unit(module)])
    assert upward == []


@pytest.mark.slow
def test_no_module_imports_the_front_door():
    """pipeline/__init__.py is the top (`import pipeline as ir`); what a module needs of it lives lower (the version in
    pipeline/version.py). Before: rerank/checkpoint.py, training/loop.py, training/identity.py, experiment.py and
    cli.py imported `__version__` from it."""
    assert sorted(module for module, targets in import_graph().items() if module != "pipeline" and
                  "pipeline" in targets) == []


@pytest.mark.slow
def test_no_import_cycle_between_units():
    units: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        if module != "pipeline":
            units.setdefault(_unit(module), set()).update(_unit(t) for t in targets if t != "pipeline")
    assert cycles({unit: targets - {unit} for unit, targets in units.items()}) == []


def test_every_model_file_registers_itself_under_its_own_name():
    from pipeline.rerank import models
    from pipeline.stages import get_stage_class, stage_names

    assert {"biencoder", "hcan", "monobert"} <= set(models.model_names())
    for name in models.model_names():
        model = models.model_class(name)
        assert model.name == name and get_stage_class(name).model_class is model and name in stage_names()


LINE_CAP = 400        # any module
MODEL_LINE_CAP = 600  # a model's equations: pipeline/rerank/models/<name>.py, or <name>/network.py of a model package


def line_cap(path: Path) -> int:
    """A model's equations get the larger cap because its layers and forward pass, with the paper's equation numbers
    and tensor shapes beside them, are read together against docs/models.md: a cap must never be the reason an
    equation leaves its file. A model with inputs of its own is a package (config.py, inputs.py, network.py): the
    plumbing (vocabularies, ids, caches, assets) and the config keep the plain cap, as does every other module."""
    models = PACKAGE / "rerank" / "models"
    is_model = ((path.parent == models and not path.name.startswith("_")) or
                (path.parent.parent == models and path.name == "network.py"))
    return MODEL_LINE_CAP if is_model else LINE_CAP


def test_line_caps_tell_model_files_from_their_helpers():
    models = PACKAGE / "rerank" / "models"
    assert line_cap(models / "addax.py") == line_cap(models / "mrnn" / "network.py") == MODEL_LINE_CAP
    assert {line_cap(p) for p in (models / "mrnn" / "inputs.py", models / "__init__.py", PACKAGE / "stage.py")} == {400}


def test_no_module_over_its_line_cap():
    """400 lines a module, 600 a model file (`line_cap` says why)."""
    long = {str(p.relative_to(PACKAGE)): (n, line_cap(p)) for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > line_cap(p)}
    assert long == {}


def test_command_line_code_lives_in_commands():
    """argparse only in pipeline/commands/ and cli.py: library modules hold no CLI code (the benchmark commands are
    bench/'s, outside the package)."""
    allowed = {"cli.py"}
    offenders = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                 if "argparse" in p.read_text(encoding="utf-8") and p.parts[-2] != "commands"
                 and p.name not in allowed]
    assert offenders == []


MODELS_PAGE = PACKAGE.parent / "docs" / "models.md"
SECTION = r"(?:§|\\u00a7)(\d+(?:\.\d+)*)"  # §4 or §4.1; "\u00a7" where a JSON record escapes it


def test_every_cited_section_of_docs_models_exists():
    """Docstrings, tests and eval records cite a model's equations as "docs/models.md §N" (or §N.M): every section
    so cited is a heading of docs/models.md ("## §N ..."), and every model file cites its own."""
    headings = set(re.findall(r"^#+ §(\d+(?:\.\d+)*) ", MODELS_PAGE.read_text(encoding="utf-8"), re.M))
    root = PACKAGE.parent
    files = [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.md"), *(root / "tests").rglob("*.py"), root / "README.md",
             *(p for p in (root / "eval").rglob("*") if p.suffix in (".py", ".md", ".yaml", ".json"))]
    cited = {(str(p.relative_to(root)), section) for p in files
             for section in re.findall(r"docs/models\.md " + SECTION, p.read_text(encoding="utf-8"))}
    assert {section for _, section in cited} >= {"0", "1", "2", "3", "4", "5"}
    assert sorted(c for c in cited if c[1] not in headings) == []
    from pipeline.rerank import models

    citing = {file for file, _ in cited}
    assert [name for name in models.model_names() if f"pipeline/rerank/models/{name}.py" not in citing and
            f"pipeline/rerank/models/{name}/network.py" not in citing] == []


def test_eval_scripts_use_the_package_as_it_is_published():
    """eval/'s scripts import no private module or name of the package (`pipeline.x._y`, `from pipeline.x import
    _y`), nothing of tests/, and leave sys.path alone: a helper they need is public in the package, or the script's
    logic is a benchmark module (`python -m bench.X`)."""
    def unpublished(name: str) -> bool:
        parts = name.split(".")
        return parts[0] in ("tests", "support", "conftest") or \
            (parts[0] == "pipeline" and any(p.startswith("_") and not p.startswith("__") for p in parts))

    offenders = []
    for path in sorted((PACKAGE.parent / "eval").rglob("*.py")):
        where = path.relative_to(PACKAGE.parent)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                module = getattr(node, "module", None) or ""
                names = [module] if unpublished(module) else \
                    [".".join(filter(None, (module, alias.name))) for alias in node.names]
                offenders += [f"{where}:{node.lineno} imports {name}" for name in names if unpublished(name)]
            if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", "") == "sys":
                offenders.append(f"{where}:{node.lineno} uses sys.path")
    assert offenders == []


def test_the_repositorys_tooling_is_outside_the_installed_package():
    """Benchmarks and studies are bench/ (`python -m bench.NAME` from the checkout), which setup.cfg does not install;
    no module of the package imports them. Before: pipeline/benchmarks/ (4,200 lines, a fifth of the package) wrote
    eval/benchmarks/ relative to the installed file, and eval/ held Python too."""
    import configparser

    root = PACKAGE.parent
    setup = configparser.ConfigParser()
    setup.read(root / "setup.cfg")
    assert setup["options.packages.find"]["include"].split(", ") == ["pipeline", "pipeline.*"]
    assert not (PACKAGE / "benchmarks").exists() and (root / "bench" / "__init__.py").is_file()
    assert [str(p.relative_to(root)) for p in (root / "eval").rglob("*.py")] == []
    assert [str(p.relative_to(root)) for p in PACKAGE.rglob("*.py")
            if re.search(r"^\s*(from|import) bench\b", p.read_text(encoding="utf-8"), re.M)] == []


def test_the_model_registry_and_the_models_import_one_way():
    """The registry (rerank/models/__init__.py) imports each model module by name and takes its RerankModel by `name`;
    no model module imports the registry back (before: `@register_model` from it, a circle through importlib)."""
    models = PACKAGE / "rerank" / "models"
    back = [str(p.relative_to(PACKAGE)) for p in models.rglob("*.py") if p.name != "__init__.py" or p.parent != models
            if re.search(r"^\s*from pipeline\.rerank\.models import", p.read_text(encoding="utf-8"), re.M)]
    assert back == []

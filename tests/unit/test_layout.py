"""The layout rules the code relies on: what may import what."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(path):
    """Every module a file imports, by its dotted name."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module


def test_benchmarks_import_no_test_module():
    """A benchmark may use the plain references of tests/oracles.py (numpy only), never a test module."""
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        tests = [m for m in imported_modules(path) if m == "tests" or m.startswith("tests.")]
        assert set(tests) <= {"tests.oracles"}, f"{path.name} imports {tests}"
    oracle_imports = set(imported_modules(ROOT / "tests" / "oracles.py"))
    assert oracle_imports <= {"math", "numpy"}


# Which layers each package may import: the direction is one way, flows -> tasks -> pll,
# flows -> tracking / cache -> pll.  Prefect and MLflow count as layers: the library runs without them.
# The pipeline's layers are imported by their installed names, pll_pipeline.<layer>, never by their folders'.
LAYERS = ("pll", "tasks", "tracking", "cache", "flows", "prefect", "mlflow")
ALLOWED = {
    "pll": {"pll"},
    "tasks": {"tasks", "pll", "cache", "prefect"},
    "cache": {"cache", "pll", "prefect"},
    "tracking": {"tracking", "pll", "prefect", "mlflow"},
    "flows": {"flows", "tasks", "tracking", "cache", "pll", "prefect", "mlflow"},
}


def layer_of(module):
    """The layer a dotted module name belongs to (``pll_pipeline.flows.cli`` -> ``flows``), or None."""
    parts = module.split(".")
    if parts[0] == "pll_pipeline":
        return parts[1] if len(parts) > 1 else None
    return parts[0] if parts[0] in LAYERS else None


def test_each_package_imports_only_the_layers_below_it():
    """No import against the direction above, not even inside a function."""
    wrong = []
    for package, allowed in ALLOWED.items():
        for path in sorted((ROOT / package).rglob("*.py")):
            for module in imported_modules(path):
                layer = layer_of(module)
                if layer and layer not in allowed:
                    wrong.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_a_layer_by_its_folder_name():
    """``import flows`` would load a second copy of a layer (and fails in an installed wheel)."""
    wrong = []
    for path in sorted(ROOT.glob("*/**/*.py")):
        if path.relative_to(ROOT).parts[0] in {".venv", "site", "build"}:
            continue
        for module in imported_modules(path):
            if module.split(".")[0] in {"flows", "tasks", "tracking", "cache"}:
                wrong.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_tasks_hold_stage_wrappers_only():
    """A stage wrapper is a few lines around a library call: no file of tasks/ over 80 lines, 700 in all."""
    lengths = {p.name: len(p.read_text().splitlines()) for p in (ROOT / "tasks").glob("*.py")}
    assert max(lengths.values()) <= 80, lengths
    assert sum(lengths.values()) <= 700, lengths

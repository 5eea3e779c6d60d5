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

"""The layout rules the code relies on: what may import what."""

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIPELINE_LAYERS = ("tasks", "tracking", "cache", "flows")


def module_name(path):
    """The dotted name a file is imported by: ``pll/neighbors/index.py`` -> ``pll.neighbors.index``.

    A package's ``__init__.py`` is the package; a pipeline layer's file goes by its installed name
    (``flows/cli.py`` -> ``pll_pipeline.flows.cli``).
    """
    parts = list(Path(path).resolve().relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts[0] in PIPELINE_LAYERS:
        parts.insert(0, "pll_pipeline")
    return ".".join(parts)


def _import_nodes(tree, module_level):
    """A tree's import statements; with ``module_level``, none inside a function (those run when it is called)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif not (module_level and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))):
            todo.extend(ast.iter_child_nodes(node))


def imports(path, *, module_level=False):
    """``(module, line)`` of every import of a file, inside functions too unless ``module_level``.

    A relative import is resolved against the file's package (:func:`module_name`);
    ``from . import name`` gives ``<package>.name``: a submodule, or a name the package defines.
    """
    tree = ast.parse(path.read_text(), str(path))
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _import_nodes(tree, module_level):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif not node.level:
            yield node.module, node.lineno
        else:
            parts = package.split(".")
            assert node.level <= len(parts), f"{path.relative_to(ROOT)}:{node.lineno}: relative import beyond the top"
            base = ".".join(parts[: len(parts) - node.level + 1])
            if node.module:
                yield f"{base}.{node.module}", node.lineno
            else:
                yield from ((f"{base}.{alias.name}", node.lineno) for alias in node.names)


def imported_modules(path, *, module_level=False):
    """Every module a file imports, by its dotted name (relative imports resolved: :func:`imports`)."""
    return [module for module, _ in imports(path, module_level=module_level)]


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
        top = path.relative_to(ROOT).parts[0]
        if top.startswith(".") or top in {"site", "build"}:  # virtual environments, caches, build outputs
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


# --- The library's subpackages -------------------------------------------------------------------

# pll's subpackages (and top-level modules), bottom-up: a subpackage imports only ones before it.
SUBPACKAGE_ORDER = (
    "errors", "utils", "data", "noise", "neighbors", "preprocessing", "methods", "reject", "evaluation", "audit",
    "experiment", "serving", "reporting",
)
# What each may import besides itself, at module level or inside a function: what the code imports today.
# pll/__init__.py, the facade above them all, names its public names lazily (strings, not imports).
SUBPACKAGE_IMPORTS = {
    "errors": set(),
    "utils": {"errors"},
    "data": {"errors", "utils"},
    "noise": {"errors", "utils", "data"},
    "neighbors": {"errors", "utils"},
    "methods": {"errors", "utils", "neighbors"},
    "preprocessing": {"errors", "utils", "data", "neighbors"},
    "reject": {"errors", "utils", "neighbors", "methods"},
    "evaluation": {"errors", "utils", "methods", "reject"},
    "audit": {"errors", "utils", "neighbors", "preprocessing", "methods"},
    "experiment": {"errors", "utils", "data", "noise", "neighbors", "methods", "preprocessing", "evaluation", "reject"},
    "serving": {
        "errors", "utils", "data", "neighbors", "methods", "preprocessing", "evaluation", "reject", "experiment",
    },
    "reporting": {"utils", "evaluation", "experiment"},
    "pll": set(SUBPACKAGE_ORDER),
}
def subpackage_of(module):
    """``pll.neighbors.index`` -> ``neighbors``, ``pll.audit`` -> ``audit``, ``pll`` -> ``pll``; None outside pll."""
    parts = module.split(".")
    if parts[0] != "pll":
        return None
    return parts[1] if len(parts) > 1 else "pll"


def library_files():
    return sorted(path for path in (ROOT / "pll").rglob("*.py") if "__pycache__" not in path.parts)


def test_subpackage_table_points_down_the_order():
    """The table has no cycle: every allowed import is of a subpackage earlier in the order; it covers pll/."""
    assert set(SUBPACKAGE_IMPORTS) == {*SUBPACKAGE_ORDER, "pll"}
    on_disk = {subpackage_of(module_name(path)) for path in library_files()}
    assert on_disk == set(SUBPACKAGE_IMPORTS), on_disk ^ set(SUBPACKAGE_IMPORTS)
    rank = {name: i for i, name in enumerate(SUBPACKAGE_ORDER)}
    for name, allowed in SUBPACKAGE_IMPORTS.items():
        if name != "pll":
            assert all(rank[other] < rank[name] for other in allowed), (name, allowed)


def test_each_subpackage_imports_only_the_ones_below_it():
    """No import of pll's subpackages outside the table, relative or absolute, at module level or in a function."""
    wrong = []
    for path in library_files():
        importer = subpackage_of(module_name(path))
        for module, line in imports(path):
            imported = subpackage_of(module)
            if imported is None or imported == importer or imported in SUBPACKAGE_IMPORTS[importer]:
                continue
            wrong.append(f"{path.relative_to(ROOT)}:{line} ({importer}) imports {module} ({imported})")
    assert not wrong, "\n".join(wrong)


def _cycles(graph):
    """The strongly connected components of ``graph`` (node -> set of nodes) that are cycles (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _owning_module(name, modules):
    """The module of ``modules`` that ``name`` (a module, or a name a module defines) lies in: its longest prefix."""
    while name not in modules and "." in name:
        name = name.rpartition(".")[0]
    return name if name in modules else None


def test_no_import_cycle_inside_a_subpackage():
    """The modules of one subpackage import each other (at module level) without a cycle.

    Importing a submodule runs its package's ``__init__`` first; that is not counted, but an
    ``__init__`` that imports a module importing a name of that ``__init__`` is a cycle.
    """
    by_subpackage = defaultdict(dict)
    for path in library_files():
        name = module_name(path)
        by_subpackage[subpackage_of(name)][name] = path
    cycles = []
    for modules in by_subpackage.values():
        graph = {
            name: {
                owner
                for module in imported_modules(path, module_level=True)
                if (owner := _owning_module(module, modules)) and owner != name
                and not (owner == name.rpartition(".")[0] and module == owner)  # the package itself, run first
            }
            for name, path in modules.items()
        }
        cycles += _cycles(graph)
    assert not cycles, "\n".join(" <-> ".join(cycle) for cycle in cycles)

"""The documentation keeps its promises: every code block runs, the site builds strictly, the README is a front door.

Python blocks run here, each page's in one namespace and in order, as a reader would run them in a
notebook; shell blocks run in tests/e2e/test_docs_commands.py.  Blocks that must not run carry the
marker ``<!-- test: skip (why) -->`` (tests/docs_blocks.py, docs/development.md).
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys

import numpy as np
import pytest

from tests.docs_blocks import ROOT, all_blocks, blocks, pages, shell_commands

README = ROOT / "README.md"
PYTHON_PAGES = [p for p in pages() if any(b.lang == "python" and b.skip is None for b in blocks(p))]
DEEP = re.compile(r"Proden|CroSel|ViPll|SoftVoting|audit_bags|audit_dataset")
"""What a page's examples run that needs the deep extra: a deep learner, or the audit with its default learners."""
CHEAP_PLL = re.compile(r"^(\.venv/bin/)?pll( [a-z-]+)? (--help|-h)$|^(\.venv/bin/)?pll (datasets|--help|-h)$")


def _checks(code, ns):
    """What the examples promise beyond running: the numbers their comments state, within a margin."""
    if "DstPll(n_neighbors=10, random_state=0).fit(X_train, train.S)" in code:
        report = ns["pll"].evaluation.reject_report(ns["test"].y, ns["r"].labels, ns["r"].accept)
        assert report["accuracy"] > 0.9
        assert report["covered_accuracy"] >= report["accuracy"]
    if "pll.ConformalSets(method, alpha=0.1)" in code and "sets = " in code:
        sets, ds, test = ns["sets"], ns["ds"], ns["test"]
        if not isinstance(sets, np.ndarray):
            sets = sets.predict_sets(ds.X[test])
        assert sets[np.arange(test.size), ds.y[test]].mean() >= 0.85  # 1 − α = 0.9 in expectation; 447 rows
        assert sets.sum(axis=1).mean() < 5  # far from all ten digits
    if "pd.crosstab(r.reason" in code:
        r, ds, test = ns["r"], ns["ds"], ns["test"]
        wrong = r.labels != ds.y[test]
        assert ((r.reason == "none") == r.accept).all()
        conflict = r.reason == "conflict"
        assert conflict.sum() > 20 and wrong[conflict].mean() > 5 * wrong[r.accept].mean()


@pytest.mark.parametrize("page", [
    pytest.param(p, marks=pytest.mark.deep) if any(DEEP.search(b.code) for b in blocks(p) if b.lang == "python")
    else p for p in PYTHON_PAGES
], ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a block that writes a file writes it here
    namespace = {"__name__": "__docs__"}
    for block in (b for b in blocks(page) if b.lang == "python" and b.skip is None):
        # Line numbers in a traceback are the page's own.
        code = compile("\n" * (block.line - 1) + block.code, block.page, "exec")
        with contextlib.redirect_stdout(io.StringIO()):
            exec(code, namespace)
        _checks(block.code, namespace)


def test_yaml_blocks_are_valid_grids(tmp_path):
    from pll.experiment.grid import load_grid

    grids = [b for b in all_blocks() if b.lang == "yaml" and b.skip is None]
    assert grids, "the grid format is documented with an example"
    for block in grids:
        path = tmp_path / "grid.yaml"
        path.write_text(block.code)
        assert load_grid(path).cells, block


def test_every_block_runs_or_says_why_not():
    for block in all_blocks():
        if block.skip is not None:
            assert re.fullmatch(r"\(.+\)", block.skip), f"{block}: a skip marker says why, in parentheses"
        if block.lang == "sh" and block.skip is None:
            for command in shell_commands(block):
                assert CHEAP_PLL.match(command), f"{block}: {command!r} is not a cheap pll command; mark it skip"


def test_site_builds_with_warnings_as_errors(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
                          "--site-dir", str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-3000:]
    for page in ("index.html", "algorithms/index.html", "api/estimators/index.html", "operations/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    api = (tmp_path / "site" / "api" / "estimators" / "index.html").read_text()
    # every public method of every estimator that pll defines, inherited ones included (NeighborMethod's,
    # BagWeightClassifier's); scikit-learn's own (get_params, ...) and the metadata-routing setters it generates
    # on every subclass (set_fit_request, ...) are scikit-learn's to document
    import pll

    def defined_by_pll(cls, name):
        owner = next(c for c in cls.__mro__ if name in vars(c))
        return owner.__module__.startswith("pll.") and not re.fullmatch(r"set_\w+_request", name)

    for name in ("DstPll", "PlKnn", "PlAknn", "Ipal", "PlClassifier", "Proden", "CroSel", "ViPll", "SoftVoting"):
        estimator = getattr(pll, name)
        methods = {m for m in dir(estimator) if not m.startswith("_") and callable(getattr(estimator, m))
                   and defined_by_pll(estimator, m)}
        missing = sorted(m for m in methods if f'id="pll.methods.{name}.{m}"' not in api)
        assert not missing, (name, missing)
        assert {"fit", "predict_with_reject", "predict"} <= methods


def test_readme_is_a_short_front_door():
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    first_block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.splitlines() if line.strip()]
    assert commands == ["make run", "make test"]
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        assert not target.startswith(("http:", "https:", "/", "..")), f"README links outside the repository: {target}"
        assert (ROOT / target).exists(), f"README links to a missing file: {target}"


def test_nothing_refers_outside_the_repository():
    for page in [README, *sorted((ROOT / "docs").rglob("*.md"))]:
        if page.name.startswith("results") or page.name == "strong-learners.md":
            continue  # written by pll report and benchmarks/strong_learners.py
        text = page.read_text()
        for needle in ("../shared", "ALGORITHMS.md", "DESIGN.md", "/work/"):
            assert needle not in text, f"{page.relative_to(ROOT)} refers to {needle}"


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()

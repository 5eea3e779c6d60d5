"""The README keeps its promises: two set-up commands first, and its library example runs."""

import re
from pathlib import Path

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_readme_opens_with_exactly_the_two_make_commands():
    first_block = re.search(r"```sh\n(.*?)```", README, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.splitlines() if line.strip()]
    assert commands == ["make run", "make test"]


def test_ci_runs_the_readme_test_command():
    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    assert "make test" in ci


def test_library_example_runs_and_is_far_above_chance():
    code = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    namespace = {}
    exec(compile(code.replace("print(", "_ = ("), "README.md", "exec"), namespace)
    report = namespace["pll"].evaluation.reject_report(
        namespace["test"].y, namespace["r"].labels, namespace["r"].accept
    )
    assert report["accuracy"] > 0.9
    assert report["covered_accuracy"] >= report["accuracy"]


def test_conformal_example_runs_and_covers():
    code = next(block for block in re.findall(r"```python\n(.*?)```", README, re.S) if "ConformalSets" in block)
    namespace = {}
    exec(compile(code.replace("print(", "_ = ("), "README.md", "exec"), namespace)
    sets, ds, test = namespace["sets"], namespace["ds"], namespace["test"]
    coverage = sets[namespace["np"].arange(test.size), ds.y[test]].mean()
    assert coverage >= 0.85  # 1 − α = 0.9 in expectation; 447 test rows
    assert sets.sum(axis=1).mean() < 5  # far from all ten digits


def test_reasons_example_runs_and_its_conflicts_are_the_errors():
    code = next(block for block in re.findall(r"```python\n(.*?)```", README, re.S) if ".reason" in block)
    namespace = {}
    exec(compile(code.replace("print(", "_ = ("), "README.md", "exec"), namespace)
    r, ds, test = namespace["r"], namespace["ds"], namespace["test"]
    wrong = r.labels != ds.y[test]
    assert ((r.reason == "none") == r.accept).all()
    conflict = r.reason == "conflict"
    assert conflict.sum() > 20 and wrong[conflict].mean() > 5 * wrong[r.accept].mean()

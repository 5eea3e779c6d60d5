"""The grid format: validation with errors that name the bad key, expansion into cells, stable keys."""

import hashlib
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pll.errors import DataFileError, InvalidParameterError, PllError
from pll.experiment.grid import (
    Cell, load_grid, parse_grid, results_table, stable_hash, summarize,
)
from pll.reporting.grids import risk_figures, summary_tables
from pll.methods import METHODS

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "benchmarks" / "grids" / "smoke.yaml"


def minimal(**changes):
    spec = {"name": "g", "datasets": ["iris"], "seeds": [0], "methods": {"pl_knn": {}}}
    spec.update(changes)
    return spec


def test_cells_are_the_cross_product_in_a_fixed_order():
    grid = parse_grid(
        minimal(
            datasets=["iris", "wine"],
            seeds=[3, 4],
            noise=["none", {"model": "uniform", "p": [0.2, 0.4], "r": 1}],
            methods={"pl_knn": {"n_neighbors": [3, 5]}, "dst_pll": {}},
        )
    )
    assert len(grid.cells) == 2 * 3 * 3 * 2
    first = grid.cells[0]
    assert (first.dataset, first.noise, first.method, first.method_params, first.seed) == (
        "iris", "none", "pl_knn", {"n_neighbors": 3}, 3)
    # Seeds vary fastest, data sets slowest.
    assert [c.seed for c in grid.cells[:4]] == [3, 4, 3, 4]
    assert [c.dataset for c in grid.cells[:18]] == ["iris"] * 18
    combos = {(c.dataset, c.noise, json.dumps(c.noise_params, sort_keys=True), c.method,
               json.dumps(c.method_params, sort_keys=True), c.seed) for c in grid.cells}
    assert len(combos) == len(grid.cells)
    noises = {(c.noise, c.noise_params.get("p")) for c in grid.cells}
    assert noises == {("none", None), ("uniform", 0.2), ("uniform", 0.4)}


def test_pipeline_parameters_run_one_method():
    cell = parse_grid(minimal(methods={"pl_aknn": {"c1": 0.3}}, method_features={"pl_aknn": "pl_aknn_real"},
                              knn_options={"n_jobs": 1}, val_fraction=0.25)).cells[0]
    params = cell.pipeline_parameters()
    assert params == {
        "dataset": "iris", "protocol": "none", "noisy_bags": False, "noise": "auto", "noise_params": {}, "seed": 0,
        "methods": ["pl_aknn"],
        "method_params": {"pl_aknn": {"c1": 0.3}}, "features": "pl_aknn_real", "knn": "auto",
        "knn_options": {"n_jobs": 1}, "val_fraction": 0.25,
    }
    assert cell.label == "iris / auto / pl_aknn c1=0.3 / seed 0"


def test_cells_that_differ_in_method_settings_share_one_execution():
    grid = parse_grid(minimal(datasets=["iris", "wine"], seeds=[0, 1], knn=["exact", "nndescent"],
                              methods={"pl_knn": {"n_neighbors": [3, 5]}, "pl_aknn": {}},
                              method_features={"pl_aknn": "pl_aknn_real"}))
    executions = grid.executions
    assert len(executions) == 2 * 2 * 2 and sum(len(e.cells) for e in executions) == len(grid.cells)
    first = executions[0]
    assert [c.variant for c in first.cells] == ["pl_knn k=3", "pl_knn k=5", "pl_aknn"]
    params = first.pipeline_parameters()
    assert params["methods"] == ["pl_knn", "pl_aknn"]
    assert params["method_params"] == {"pl_knn": [{"n_neighbors": 3}, {"n_neighbors": 5}], "pl_aknn": {}}
    assert params["features"] == "minmax"
    assert params["method_features"] == {"pl_knn": "minmax", "pl_aknn": "pl_aknn_real"}
    # Names unique in the grid: what varies between executions (the kNN backend here) is in the name.
    names = [e.run_name for e in executions]
    assert len(set(names)) == len(names) and first.run_name == "iris / auto / seed 0 / knn=exact"
    assert len({e.key for e in executions}) == len(executions)
    # The plan of the execution's pipeline names its method runs as the cells do.
    from pll.experiment import plan_run

    plan = plan_run(params["methods"], params["method_params"], params["features"], params["method_features"])
    assert [r.name for r in plan.runs] == [c.variant for c in first.cells]


def test_file_data_sets_are_named_by_their_stem_unless_stems_clash():
    grid = parse_grid(minimal(datasets=["data/a/bird-song.mat", "data/b/msrc-v2.mat"]), source="<test>")
    assert [e.run_name for e in grid.executions] == ["bird-song / auto / seed 0", "msrc-v2 / auto / seed 0"]
    clash = parse_grid(minimal(datasets=["a/x.csv", "b/x.csv"]))
    assert [e.run_name for e in clash.executions] == ["a/x / auto / seed 0", "b/x / auto / seed 0"]


def test_cell_key_hashes_the_canonical_pipeline_parameters():
    cell = parse_grid(minimal(methods={"pl_knn": {"n_neighbors": 7}})).cells[0]
    canonical = json.dumps(cell.pipeline_parameters(), sort_keys=True, separators=(",", ":"))
    assert cell.key == hashlib.sha256(canonical.encode()).hexdigest()[:12]


def test_keys_do_not_depend_on_the_order_of_keys_in_the_file():
    a = parse_grid(minimal(noise=[{"model": "uniform", "p": 0.3, "r": 1}],
                           methods={"pl_aknn": {"c1": 0.3, "delta": 0.2}}))
    b = parse_grid({"methods": {"pl_aknn": {"delta": 0.2, "c1": 0.3}},
                    "noise": [{"r": 1, "p": 0.3, "model": "uniform"}],
                    "seeds": [0], "datasets": ["iris"], "name": "g"})
    assert [c.key for c in a.cells] == [c.key for c in b.cells]
    assert a.key == b.key


def test_any_changed_parameter_changes_the_key():
    base = parse_grid(minimal()).cells[0].key
    variants = [minimal(seeds=[1]), minimal(datasets=["wine"]), minimal(noise="none"), minimal(protocol="dst-pll"),
                minimal(noisy_bags=True),
                minimal(methods={"pl_knn": {"n_neighbors": 3}}), minimal(features="standard"),
                minimal(val_fraction=0.3), minimal(knn_options={"n_jobs": 2})]
    keys = [parse_grid(v).cells[0].key for v in variants]
    assert base not in keys and len(set(keys)) == len(keys)
    # The grid's experiment and concurrency say where and how, not what: same cells.
    assert parse_grid(minimal(experiment="other", max_concurrency=5)).cells[0].key == base


def test_stable_hash_ignores_dict_order():
    assert stable_hash({"a": 1, "b": [1, {"x": 2, "y": 3}]}) == stable_hash({"b": [1, {"y": 3, "x": 2}], "a": 1})
    assert stable_hash({"a": 1}) != stable_hash({"a": 1.5})


@settings(max_examples=40, deadline=None)
@given(
    seeds=st.lists(st.integers(0, 50), min_size=1, max_size=4, unique=True),
    ks=st.lists(st.integers(1, 20), min_size=1, max_size=3, unique=True),
    ps=st.lists(st.sampled_from([0.1, 0.3, 0.5, 0.9]), min_size=1, max_size=3, unique=True),
    datasets=st.lists(st.sampled_from(["iris", "wine", "digits"]), min_size=1, max_size=3, unique=True),
)
def test_expansion_matches_a_brute_force_product(seeds, ks, ps, datasets):
    grid = parse_grid(minimal(datasets=datasets, seeds=seeds, noise={"model": "uniform", "p": ps},
                              methods={"pl_knn": {"n_neighbors": ks}, "dst_pll": {}}))
    expected = [(d, p, m, k, s) for d, p, (m, k), s in
                itertools.product(datasets, ps, [("pl_knn", k) for k in ks] + [("dst_pll", None)], seeds)]
    got = [(c.dataset, c.noise_params["p"], c.method, c.method_params.get("n_neighbors"), c.seed) for c in grid.cells]
    assert got == expected
    assert len({c.key for c in grid.cells}) == len(expected)


@pytest.mark.parametrize(
    "spec, match",
    [
        (minimal(colour="red"), r"key 'colour': unknown key"),
        ({"name": "g", "datasets": ["iris"], "seeds": [0]}, r"key 'methods': required key is missing"),
        (minimal(name="my grid"), r"name: must be letters"),
        (minimal(datasets=[]), r"datasets: an empty list leaves no cells"),
        (minimal(datasets=["iris", 3]), r"datasets\[1\]: must be a non-empty string, got 3"),
        (minimal(seeds=[0, "one"]), r"seeds\[1\]: must be a non-negative integer, got 'one'"),
        (minimal(seeds=[True]), r"seeds\[0\]: must be a non-negative integer"),
        (minimal(seeds=[-1]), r"seeds\[0\]"),
        (minimal(methods={"knn": {}}), r"methods.knn: unknown method 'knn'; choose from pl_knn"),
        (minimal(methods={"pl_knn": {"k": 3}}), r"methods.pl_knn: .*no parameter\(s\) k"),
        (minimal(methods={"pl_knn": {"n_neighbors": []}}), r"methods.pl_knn.n_neighbors: an empty list"),
        (minimal(methods={"pl_knn": 5}), r"methods.pl_knn: must be a mapping"),
        (minimal(methods={}), r"methods: must be a non-empty mapping"),
        (minimal(noise="gaussian"), r"noise: unknown noise model 'gaussian'"),
        (minimal(noise=[{"p": 0.5}]), r"noise\[0\]: a noise mapping needs a 'model' key"),
        (minimal(noise=[7]), r"noise\[0\]: must be a noise model name"),
        (minimal(features="sift"), r"features: unknown feature pipeline 'sift': choose one of minmax"),
        (minimal(features=["minmax", "sift"]), r"features\[1\]: unknown feature pipeline 'sift'"),
        (minimal(knn="faiss"), r"knn: unknown value 'faiss'"),
        (minimal(knn_options=[1]), r"knn_options: must be a mapping"),
        (minimal(protocol="paper"), r"protocol: unknown value 'paper'; choose from none, dst-pll"),
        (minimal(noisy_bags="yes"), r"noisy_bags: must be true or false, got 'yes'"),
        (minimal(max_concurrency=0), r"max_concurrency: must be a positive integer, got 0"),
        (minimal(val_fraction=1.5), r"val_fraction must be a number in \(0, 1\), got 1.5"),
        (minimal(seeds=[0, 0]), r"cells: 'iris / auto / pl_knn / seed 0' appears twice"),
        (minimal(method_features={"dst_pll": "minmax"}), r"method_features.dst_pll: names a method the grid does not"),
        (minimal(method_features={"pl_knn": "sift"}), r"method_features.pl_knn: unknown feature pipeline 'sift'"),
        ([1, 2], r"a grid must be a mapping of keys, got list"),
    ],
)
def test_bad_grids_get_errors_naming_the_source_and_key(spec, match):
    with pytest.raises(InvalidParameterError, match=match) as info:
        parse_grid(spec, source="grids/bad.yaml")
    assert str(info.value).startswith("grids/bad.yaml: ")


def test_unreadable_files_are_data_file_errors(tmp_path):
    with pytest.raises(DataFileError, match=r"missing.yaml: cannot read the grid file"):
        load_grid(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    with pytest.raises(DataFileError, match=r"broken.yaml: not valid YAML"):
        load_grid(broken)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(PllError, match=r"empty.yaml: a grid must be a mapping"):
        load_grid(empty)


def test_smoke_grid_is_two_builtin_datasets_two_seeds_every_method():
    grid = load_grid(SMOKE)
    assert grid.name == "smoke"
    assert sorted({c.dataset for c in grid.cells}) == ["iris", "wine"]
    assert len({c.seed for c in grid.cells}) == 2
    assert {c.method for c in grid.cells} == set(METHODS)
    assert len(grid.cells) == 2 * 2 * len(METHODS)


@pytest.mark.parametrize("path", sorted((ROOT / "benchmarks" / "grids").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_grid_parses_and_names_data_sets_that_exist(path):
    grid = load_grid(path)
    assert grid.cells and grid.name
    for dataset in {c.dataset for c in grid.cells}:
        assert "/" not in dataset or (ROOT / dataset).is_file(), dataset


def execution_tables(grid, metrics, options=("native",)):
    """Execution key -> the table its pipeline run would log: a row per method run and option, ``metrics(cell)``."""
    return {e.key: pd.DataFrame([{"method": c.variant, "reject": o, **metrics(c)} for c in e.cells for o in options])
            for e in grid.executions}


def test_results_table_and_summary_across_seeds():
    grid = parse_grid(minimal(seeds=[0, 1, 2], methods={"pl_knn": {"n_neighbors": [3, 5]}}))
    rng = np.random.default_rng(0)
    acc = {c.key: float(rng.uniform(0.5, 1.0)) for c in grid.cells}
    tables = execution_tables(grid, lambda c: {"accuracy": acc[c.key], "risk_0.10": 1 - acc[c.key]})
    del tables[grid.executions[-1].key]  # the last execution failed
    table = results_table(grid.executions, tables)
    assert len(table) == 4
    assert list(table.columns[:7]) == ["cell", "dataset", "noise", "seed", "variant", "features", "knn"]
    assert set(table["variant"]) == {"pl_knn k=3", "pl_knn k=5"}
    assert set(table["cell"]) == {c.key for e in grid.executions[:-1] for c in e.cells}

    summary = summarize(table)
    row = summary[(summary["metric"] == "accuracy") & (summary["method"] == "pl_knn k=3")].iloc[0]
    values = [acc[c.key] for e in grid.executions[:-1] for c in e.cells if c.method_params["n_neighbors"] == 3]
    assert row["mean"] == pytest.approx(np.mean(values))
    assert row["std"] == pytest.approx(np.std(values, ddof=1))
    assert row["n"] == 2
    assert set(summary["metric"]) == {"accuracy", "risk_0.10"}
    # Exactly one best per metric, and for risk the best is the one with the lower mean.
    for metric, group in summary.groupby("metric"):
        assert group["best"].sum() == 1
    risk = summary[summary["metric"] == "risk_0.10"]
    assert risk.loc[risk["best"], "mean"].iloc[0] == risk["mean"].min()


def test_summary_compares_label_metrics_once_per_method_setting():
    """Accuracy does not depend on the trust score's reject decisions: no [native] and [trust] twins."""
    grid = parse_grid(minimal(seeds=[0, 1, 2], methods={"pl_knn": {}, "dst_pll": {}}))
    rng = np.random.default_rng(3)
    values = {c.key: rng.uniform(0.5, 1.0, 2) for c in grid.cells}
    tables = execution_tables(grid, lambda c: {"accuracy": values[c.key][0], "risk_0.10": values[c.key][1]},
                              options=("native", "trust", "conformal"))
    summary = summarize(results_table(grid.executions, tables))
    accuracy = summary[summary["metric"] == "accuracy"]
    assert sorted(accuracy["method"]) == ["dst_pll", "dst_pll [conformal]", "pl_knn", "pl_knn [conformal]"]
    risk = summary[summary["metric"] == "risk_0.10"]
    assert len(risk) == 2 * 3  # the risk depends on what is rejected: one row per option


def test_paper_tables_and_risk_figures_of_a_grid():
    grid = parse_grid(minimal(datasets=["iris", "wine"], seeds=[0, 1], methods={"pl_knn": {}, "dst_pll": {}}))
    rng = np.random.default_rng(1)
    drawn = {c.key: (rng.uniform(0.6, 0.9), rng.uniform(0.0, 0.3)) for c in grid.cells}
    tables = execution_tables(grid, lambda c: {
        "accuracy": drawn[c.key][0], "risk_0.00": 1 - drawn[c.key][0],
        "risk_0.10": 1 - drawn[c.key][0] + 0.1 * drawn[c.key][1], "cal_risk_0.10": 1 - drawn[c.key][0] + 0.05})
    by_cell = {c.key: tables[e.key][tables[e.key]["method"] == c.variant].iloc[0] for e in grid.executions
               for c in e.cells}
    table = results_table(grid.executions, tables)
    paper = summary_tables(summarize(table))
    assert set(paper) == {"table_accuracy", "table_risk_0.10"}
    accuracy = paper["table_accuracy"]
    assert list(accuracy.columns) == ["method", "iris / auto", "wine / auto"]
    cell = accuracy.set_index("method").loc["pl_knn", "iris / auto"]
    values = [by_cell[c.key]["accuracy"] for c in grid.cells if c.dataset == "iris" and c.method == "pl_knn"]
    assert cell.strip("*").startswith(f"{100 * np.mean(values):.2f} (± {100 * np.std(values, ddof=1):.2f})")

    figures = risk_figures(table)
    assert sorted(figures) == ["risk_iris_auto", "risk_wine_auto"]
    own = figures["risk_iris_auto"].axes[0]
    line = next(l for l in own.get_lines() if l.get_label().startswith("pl_knn"))
    iris_pl_knn = [c for c in grid.cells if c.dataset == "iris" and c.method == "pl_knn"]
    expected = [np.mean([by_cell[c.key][f"risk_{lam}"] for c in iris_pl_knn]) for lam in ("0.00", "0.10")]
    assert list(line.get_xdata()) == [0.0, 0.1]
    assert np.allclose(line.get_ydata(), expected)


def test_summary_of_no_finished_cells_is_empty():
    grid = parse_grid(minimal())
    assert summarize(results_table(grid.executions, {})).empty


def test_cell_is_plain_data():
    cell = Cell("iris", "none", False, "none", {}, 0, "pl_knn", {}, "minmax", "exact", {}, 0.2, "minmax")
    assert cell.label == "iris / none / pl_knn / seed 0"

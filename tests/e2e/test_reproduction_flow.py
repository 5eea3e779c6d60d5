"""The "Reproducing the papers' tables" commands of docs/benchmarks.md, run as written, and the page checked against MLflow."""

import re
import shlex
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from pll_pipeline.flows.cli import main
from pll.experiment.grid import load_grid

ROOT = Path(__file__).resolve().parents[2]
SECTION = re.search(r"## Reproducing the papers' tables\n(.*?)\n## ", (ROOT / "docs" / "benchmarks.md").read_text(),
                    re.S).group(1)


def readme_blocks():
    """The section's shell blocks, each a list of argument lists (without ``.venv/bin/pll`` and comments)."""
    blocks = re.findall(r"```sh\n(.*?)```", SECTION, re.S)
    return [[shlex.split(line.split("#")[0])[1:] for line in block.splitlines() if line.strip()] for block in blocks]


def test_every_grid_the_section_names_is_valid_and_runs_the_papers_methods():
    for argv in (a for block in readme_blocks() for a in block if a[0] == "benchmark"):
        grid = load_grid(ROOT / argv[1])
        assert {c.method for c in grid.cells} <= {"pl_knn", "dst_pll", "ipal", "pl_aknn", "proden"}
        assert len({c.seed for c in grid.cells}) == 5


def test_readme_quick_block_writes_the_page_and_its_numbers_are_the_logged_ones(prefect_harness, shared_data, tmp_path,
                                                                               monkeypatch):
    """In a checkout's layout (grids under ``benchmarks/``, data in ``../shared``), the first block as written."""
    repo = tmp_path / "pll"
    repo.mkdir()
    (repo / "benchmarks").symlink_to(ROOT / "benchmarks")
    (tmp_path / "shared").symlink_to(shared_data.parent)
    monkeypatch.chdir(repo)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("PLL_CACHE_DIR", raising=False)
    quick = readme_blocks()[0]
    assert [a[0] for a in quick] == ["benchmark", "report"]
    for argv in quick:
        assert main(argv) == 0, argv
    page = (repo / "docs" / "results.md").read_text()
    # The page's real-world DST-PLL cell is the mean and std of the accuracies the method runs logged.
    client = MlflowClient(f"sqlite:///{repo / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("pll-paper-dst-pll")
    runs = client.search_runs([experiment.experiment_id], "tags.`pll.kind` = 'method' and params.method = 'dst_pll'")
    accuracy = np.array([r.data.metrics["accuracy"] for r in runs]) * 100
    assert len(runs) == 10
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in page.splitlines() if line.startswith("| ")]
    (dst,) = [r for r in rows if r[:2] == ["real-world / none", "DST-PLL"]]
    assert dst[2:6] == ["2", "10", f"{accuracy.mean():.1f} (± {accuracy.std(ddof=1):.1f})", "52.1 (± 11.6)"]
    # The grid ran under its preset, and the page took the preset's aggregation and test from it.
    assert "preset `authors_code`; risks aggregated as `authors_script`; t-tests `unpaired`" in page
    assert all(0.0 <= r.data.metrics["native.script_rejection_rate"] <= 1.0 for r in runs)
    assert "| real-world / none | PL-kNN" in page and "Ordering (the paper: DST-PLL below PL-kNN" in page


def test_benchmark_preset_option_overrides_the_grids_and_tags_the_grid_run(prefect_harness, tmp_path, monkeypatch,
                                                                           tracking_uri):
    monkeypatch.chdir(tmp_path)
    grid = tmp_path / "g.yaml"
    grid.write_text("name: g\npreset: authors_code\ndatasets: [iris]\nnoise: [uniform]\nseeds: [0]\n"
                    "methods: {dst_pll: {}}\n")
    assert main(["benchmark", str(grid), "--preset", "paper_text", "--tracking-uri", tracking_uri]) == 0
    client = MlflowClient(tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("pll-benchmark").experiment_id])
    (parent,) = [r for r in runs if r.data.tags["pll.kind"] == "grid"]
    assert parent.data.tags["pll.preset"] == "paper_text"
    assert {r.info.run_name for r in runs if r.data.tags["pll.kind"] == "pipeline"} == {
        "iris / uniform(p=0.7, r=3) / seed 0"}
    with pytest.raises(SystemExit):  # argparse refuses an unknown preset, naming the choices
        main(["benchmark", str(grid), "--preset", "paper"])


def test_pl_aknn_density_k_of_the_papers_text_runs_through_pll_run_and_mlflow(prefect_harness, tmp_path, monkeypatch,
                                                                              tracking_uri):
    """The PL A-kNN paper's text says k = 100 for the density step, its code 50: a feature spec picks the text's."""
    monkeypatch.chdir(tmp_path)
    spec = "pl_aknn_real(density_k=100)"
    argv = ["run", "--dataset", "wine", "--methods", "pl_aknn", "--method-features", f'{{"pl_aknn": "{spec}"}}',
            "--tracking-uri", tracking_uri]
    assert main(argv) == 0
    client = MlflowClient(tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("pll").experiment_id])
    (pipeline,) = [r for r in runs if r.data.tags["pll.kind"] == "pipeline"]
    (method,) = [r for r in runs if r.data.tags["pll.kind"] == "method"]
    assert "knn.pl_aknn_real_density_k_100.build_seconds" in pipeline.data.metrics
    assert method.data.params["features"] == spec
    assert main(argv[:6] + ['{"pl_aknn": "pl_aknn_real(density=100)"}']) == 2  # refused before anything starts

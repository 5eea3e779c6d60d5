"""End to end: benchmark grids against a real Prefect server, MLflow store and Dask LocalCluster."""

import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.io
from distributed import Client, LocalCluster, get_task_stream
from mlflow.tracking import MlflowClient
from prefect import tags
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterTags

import pll
from pll_pipeline.flows.benchmark import GridProgress, benchmark
from pll_pipeline.flows.cli import main
from pll.experiment.grid import parse_grid
from pll.methods import METHODS
from pll_pipeline.tracking.grid import CELL_KEY_TAG, EXECUTION_KEY_TAG, GRID_KEY_TAG, PARENT_TAG

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run in ``tmp_path``, so that the stage cache (``.pll-cache``) starts empty."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def task_states(tag, stages=(), runs_per_stage=0, wait=180.0):
    """(task name, state name) -> count, over the task runs carrying ``tag``.

    The server records task runs and their final states from events, a little
    after the tasks end (much later on a loaded machine), so this reads again,
    for up to ``wait`` seconds, while some run shows a state that is not final
    or one of ``stages`` has fewer than ``runs_per_stage`` runs recorded.
    """
    deadline = time.monotonic() + wait
    with get_client(sync_client=True) as client:
        while True:
            runs = client.read_task_runs(task_run_filter=TaskRunFilter(tags=TaskRunFilterTags(all_=[tag])), limit=200)
            names = Counter(run.task_key.rsplit("-", 1)[0].split(".")[-1] for run in runs)
            settled = all(run.state.is_final() for run in runs) and all(names[s] >= runs_per_stage for s in stages)
            if settled or time.monotonic() > deadline:
                return Counter((run.task_key.rsplit("-", 1)[0].split(".")[-1], run.state.name) for run in runs)
            time.sleep(1.0)


def grid_runs(uri, experiment):
    """The grid's runs, its pipeline runs and their method runs, each oldest first."""
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    by_kind = {kind: [r for r in runs if r.data.tags.get("pll.kind") == kind] for kind in ("grid", "pipeline", "method")}
    assert sum(map(len, by_kind.values())) == len(runs)
    assert all(GRID_KEY_TAG in r.data.tags and PARENT_TAG not in r.data.tags for r in by_kind["grid"])
    return by_kind["grid"], by_kind["pipeline"], by_kind["method"]


def test_progress_line_counts_cells_by_state():
    grid = parse_grid({"name": "p", "datasets": ["iris", "wine"], "seeds": [0, 1, 2],
                       "methods": {"pl_knn": {"n_neighbors": [3, 5]}}})
    executions = grid.executions
    progress = GridProgress(executions, {executions[0].key}, concurrency=2)
    assert progress.line() == "2/12 cells done, 0 failed; 2 executions running"
    for execution in executions[1:4]:
        progress.finish(execution, ok=True)
    progress.finish(executions[4], ok=False)
    assert progress.line() == "8/12 cells done, 2 failed; 1 execution running"


def test_grid_on_a_local_cluster_logs_parent_and_children_and_a_rerun_hits_the_cache(
    prefect_harness, in_tmp, tracking_uri
):
    spec = {"name": "two-by-two", "datasets": ["iris", "wine"], "seeds": [0, 1],
            "methods": {"pl_knn": {"n_neighbors": 5}}, "knn": "dask", "knn_options": {"n_shards": 2}}
    grid = parse_grid(spec)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        workers = set(client.scheduler_info()["workers"])
        with tags("grid-first"), get_task_stream(client) as stream:
            first = benchmark(grid=spec, dask_address=cluster.scheduler_address, tracking_uri=tracking_uri,
                              experiment="grid-e2e")
        with tags("grid-second"):
            second = benchmark(grid=spec, dask_address=cluster.scheduler_address, tracking_uri=tracking_uri,
                               experiment="grid-e2e")

    assert (first["cells"], first["finished"], first["failures"]) == (4, 4, [])
    # Each (small) execution's protocol ran as a Dask task on the cluster's workers, its kNN search sharded.
    ran = Counter(t["key"].rsplit("-", 1)[0] for t in stream.data)
    assert ran["run_protocol"] == 4
    assert any(key.startswith("pll-knn-shard") for key in ran)
    assert {t["worker"] for t in stream.data} <= workers

    # MLflow: a run per grid run, a pipeline run per execution below it, a method run per cell below that.
    parents, pipelines, methods = grid_runs(tracking_uri, "grid-e2e")
    assert [p.info.run_id for p in parents] == [first["parent_run_id"], second["parent_run_id"]]
    assert all(p.info.status == "FINISHED" and p.data.tags[GRID_KEY_TAG] == grid.key for p in parents)
    assert parents[0].info.run_name == "grid two-by-two"
    first_pipelines = [r for r in pipelines if r.data.tags[PARENT_TAG] == first["parent_run_id"]]
    assert sorted(r.data.tags[EXECUTION_KEY_TAG] for r in first_pipelines) == sorted(e.key for e in grid.executions)
    assert sorted(r.info.run_name for r in first_pipelines) == sorted(e.run_name for e in grid.executions)
    ids = {r.info.run_id for r in first_pipelines}
    first_methods = [r for r in methods if r.data.tags[PARENT_TAG] in ids]
    assert sorted(c.data.tags[CELL_KEY_TAG] for c in first_methods) == sorted(c.key for c in grid.cells)
    assert all(c.info.status == "FINISHED" and c.info.run_name == "pl_knn k=5" for c in first_methods)
    by_key = {c.data.tags[CELL_KEY_TAG]: c for c in first_methods}
    for cell in grid.cells:
        params = by_key[cell.key].data.params
        assert (params["dataset"], params["seed"], params["knn"]) == (cell.dataset, str(cell.seed), "dask")
        assert params["method"] == "pl_knn" and params["n_neighbors"] == "5"

    # The parent holds the combined table and the across-seeds summary, computed from the children's metrics.
    parent = MlflowClient(tracking_uri)
    assert parents[0].data.metrics["cells_finished"] == 4 and parents[0].data.metrics["cells_failed"] == 0
    names = {a.path for a in parent.list_artifacts(first["parent_run_id"])}
    assert {"grid_metrics.csv", "grid_metrics.md", "summary.csv", "summary.md", "table_accuracy.md",
            "failures.json", "figures"} <= names
    figures = {a.path for a in parent.list_artifacts(first["parent_run_id"], "figures")}
    assert figures == {"figures/risk_iris_auto.png", "figures/risk_wine_auto.png"}
    logged = pd.read_csv(parent.download_artifacts(first["parent_run_id"], "grid_metrics.csv", str(in_tmp)))
    assert sorted(set(logged["cell"])) == sorted(c.key for c in grid.cells)
    summary = first["summary"]
    for dataset in ("iris", "wine"):
        seeds = [by_key[c.key].data.metrics["accuracy"] for c in grid.cells if c.dataset == dataset]
        row = summary[(summary["dataset"] == dataset) & (summary["metric"] == "accuracy")
                      & (summary["method"] == "pl_knn k=5")].iloc[0]
        assert row["mean"] == pytest.approx(np.mean(seeds))
        assert row["std"] == pytest.approx(np.std(seeds, ddof=1))
        assert row["n"] == 2

    # The first grid computed every execution; the second found each in the cache and got the same numbers.
    computed, cached = (task_states(tag, ("run_protocol",), 4) for tag in ("grid-first", "grid-second"))
    assert computed[("run_protocol", "Completed")] == 4 and computed[("run_protocol", "Cached")] == 0, computed
    # Every entry a worker wrote is found, whichever worker runs the stage again (issue 39: the workers once
    # hashed the source tree each at its own first stage, and disagreed when a file changed in between).
    assert cached[("run_protocol", "Cached")] == 4 and cached[("run_protocol", "Completed")] == 0, cached
    pd.testing.assert_frame_equal(
        first["metrics"].drop(columns="cell").reset_index(drop=True),
        second["metrics"].drop(columns="cell").reset_index(drop=True),
    )


def write_palm_mat(path, name="wine"):
    ds = pll.load_dataset(name)
    T = np.zeros((ds.n_classes, ds.n_rows))
    T[ds.y, np.arange(ds.n_rows)] = 1
    scipy.io.savemat(path, {"data": ds.X, "partial_target": T, "target": T})


def test_failing_cell_is_reported_and_a_restart_runs_only_the_missing_cells(
    prefect_harness, in_tmp, tracking_uri, capsys
):
    late = in_tmp / "late.mat"
    grid_file = in_tmp / "grid.yaml"
    grid_file.write_text(
        f"name: resume\ndatasets: [iris, {late}]\nseeds: [3]\nmethods: {{pl_knn: {{n_neighbors: 5}}}}\n"
    )
    code = main(["benchmark", str(grid_file), "--tracking-uri", tracking_uri, "--experiment", "resume"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAILED cell" in out and "DataFileError" in out and "late.mat" in out
    assert "Cells: 1 of 2 finished, 1 failed" in out

    parents, pipelines, methods = grid_runs(tracking_uri, "resume")
    assert len(parents) == 1 and parents[0].info.status == "FAILED"
    parent_id = parents[0].info.run_id
    # The missing file is refused before the execution's run is created: its failure is on the grid's run only.
    assert sorted(c.info.status for c in pipelines + methods) == ["FINISHED"] * 2
    iris_run = next(c for c in pipelines if c.data.params["dataset"] == "iris")
    failures_file = MlflowClient(tracking_uri).download_artifacts(parent_id, "failures.json", str(in_tmp))
    failures = json.loads(open(failures_file).read())
    assert [f["label"] for f in failures] == [f"{late} / auto / pl_knn k=5 / seed 3"]
    assert "no such file" in failures[0]["error"]

    # The missing data arrives and the grid starts again: same parent, only the failed cell runs.
    write_palm_mat(late)
    state = benchmark(grid=str(grid_file), tracking_uri=tracking_uri, experiment="resume", return_state=True)
    assert state.is_completed()
    result = state.result()
    assert result["parent_run_id"] == parent_id
    assert (result["cells"], result["finished"], result["failures"]) == (2, 2, [])
    parents, pipelines, methods = grid_runs(tracking_uri, "resume")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    iris_runs = [c for c in pipelines if c.data.params["dataset"] == "iris"]
    assert [c.info.run_id for c in iris_runs] == [iris_run.info.run_id]  # not run twice
    late_runs = sorted(c.info.status for c in pipelines if c.data.params["dataset"] == str(late))
    assert late_runs == ["FINISHED"] and len(methods) == 2
    # The combined table covers both cells, the earlier one read back from its MLflow run.
    assert sorted(set(result["metrics"]["dataset"])) == sorted(["iris", str(late)])
    assert parents[0].data.metrics["cells_finished"] == 2 and parents[0].data.metrics["cells_failed"] == 0


def test_bad_grid_file_is_one_line_on_stderr(in_tmp, capsys):
    bad = in_tmp / "bad.yaml"
    bad.write_text("name: x\ndatasets: [iris]\nseeds: [0]\nmethods: {pl_knn: {k: 3}}\n")
    assert main(["benchmark", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pll: error: {bad}: methods.pl_knn:") and "no parameter(s) k" in err


def test_smoke_grid_as_the_readme_runs_it_compares_in_mlflow_by_shared_columns(prefect_harness, in_tmp, tracking_uri,
                                                                               capsys):
    """``pll benchmark benchmarks/grids/smoke.yaml``, then what the README's three UI steps rely on, via the API."""
    assert main(["benchmark", str(ROOT / "benchmarks" / "grids" / "smoke.yaml"), "--tracking-uri", tracking_uri]) == 0
    cells = 2 * 2 * len(METHODS)  # two data sets, two seeds, every method
    assert f"Cells: {cells} of {cells} finished, 0 failed" in capsys.readouterr().out
    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("pll-benchmark")
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    # Step 1 and 2: the method runs, sorted by one risk column, every one with a value and the same columns.
    methods = client.search_runs([experiment.experiment_id], "tags.`pll.kind` = 'method'",
                                 order_by=["metrics.`native.risk_0.10` ASC"])
    assert len(methods) == cells
    risks = [r.data.metrics["native.risk_0.10"] for r in methods]
    assert risks == sorted(risks)
    assert len({frozenset(r.data.metrics) for r in methods}) == 1
    assert {r.data.params["method"] for r in methods} == set(METHODS)
    # Names: unique under each parent and readable.
    runs = client.search_runs([experiment.experiment_id])
    siblings = Counter((r.data.tags.get(PARENT_TAG), r.info.run_name) for r in runs)
    assert max(siblings.values()) == 1
    names = {r.info.run_name for r in runs}
    assert {"grid smoke", "iris / class_dependent(p=0.7, eps=0.7) / seed 0", "dst_pll k=10"} <= names
    assert all(r.inputs.dataset_inputs[0].dataset.name in ("iris", "wine") for r in runs if r.data.tags["pll.kind"] != "grid")
    # Step 3: the curves as metric series, one line per run.
    history = client.get_metric_history(methods[0].info.run_id, "native.risk_by_lambda")
    assert [m.step for m in history] == [0, 5, 10, 15, 20]
    # The grid's accuracy table: one row per method setting (not per reject option), bold only where tested.
    (grid,) = [r for r in runs if r.data.tags["pll.kind"] == "grid"]
    table = pd.read_csv(client.download_artifacts(grid.info.run_id, "summary.csv", str(in_tmp)))
    accuracy = table[(table["metric"] == "accuracy") & (table["dataset"] == "iris")]
    assert len(accuracy) == 2 * len(METHODS)  # each method setting, and its conformal model fitted apart
    assert not accuracy["method"].str.contains(r"\[native\]|\[trust\]").any()
    # Two seeds: no t-test on one degree of freedom; bold is the best and what ties with it on every seed.
    best = accuracy.loc[accuracy["best"], "mean"].iloc[0]
    assert (accuracy.loc[accuracy["marked"], "mean"] == best).all()
    assert (accuracy.loc[accuracy["marked"] & ~accuracy["best"], "p_value"] == 1.0).all()


def _http_error(status):
    import httpx
    from prefect.exceptions import PrefectHTTPStatusError

    request = httpx.Request("POST", "http://127.0.0.1:1/api/flow_runs/")
    return PrefectHTTPStatusError(f"{status}", request=request, response=httpx.Response(status, request=request))


def test_an_execution_the_busy_server_refuses_is_started_again_and_a_client_error_is_not(monkeypatch):
    """Fault injection: the subflow's start fails as a loaded Prefect server's 503 made it fail in a real grid."""
    import pll_pipeline.flows.benchmark as bench

    calls, sleeps = [], []

    def starts_after(failures, status):
        def start(**parameters):
            calls.append(parameters)
            if len(calls) <= failures:
                raise _http_error(status)
            return "state"
        return start

    monkeypatch.setattr(bench.time, "sleep", sleeps.append)
    monkeypatch.setattr(bench, "on_dask", lambda flow, address: starts_after(2, 503))
    assert bench.run_execution({"seed": 0}, None) == "state"
    assert len(calls) == 3 and sleeps == [2.0, 4.0]
    calls.clear()
    monkeypatch.setattr(bench, "on_dask", lambda flow, address: starts_after(1, 422))
    with pytest.raises(Exception, match="422"):
        bench.run_execution({"seed": 0}, None)
    assert len(calls) == 1
    calls.clear()
    monkeypatch.setattr(bench, "on_dask", lambda flow, address: starts_after(99, 503))
    with pytest.raises(Exception, match="503"):
        bench.run_execution({"seed": 0}, None)
    assert len(calls) == bench.START_ATTEMPTS

"""End to end: the Prefect flow against a real temporary Prefect server and MLflow store."""

import json
import time

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from prefect import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    FlowRunFilter,
    FlowRunFilterId,
    LogFilter,
    LogFilterFlowRunId,
)

from pll_pipeline.flows.pipeline import pipeline



@pytest.fixture(scope="module")
def digits_run(prefect_harness, tmp_path_factory):
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    result = pipeline(dataset="digits", seed=0, methods=["pl_knn", "dst_pll"],
                      method_params={"pl_knn": [{"n_neighbors": 5}, {"n_neighbors": 10}]},
                      tracking_uri=uri, experiment="e2e")
    return uri, result


def method_runs(client, result):
    return {name: client.get_run(run_id) for name, run_id in result["method_run_ids"].items()}


def test_parent_run_holds_what_the_method_runs_share(digits_run):
    uri, result = digits_run
    client = MlflowClient(uri)
    run = client.get_run(result["run_id"])
    assert run.info.status == "FINISHED" and run.info.run_name == "digits / auto / seed 0"
    assert run.data.tags["pll.kind"] == "pipeline"
    params = run.data.params
    assert params["dataset"] == "digits" and params["seed"] == "0"
    # The default backend, auto, searches small data exactly.
    assert params["knn"] == "auto" and params["knn.minmax.backend"] == "exact"
    assert set(run.data.metrics) == {"knn.minmax.build_seconds", "knn.minmax.query_seconds"}
    tags = run.data.tags
    assert len(tags["git_commit"]) in (40, len("unknown"))
    assert tags["version.numpy"] != "absent"
    assert len(tags["data_fingerprint"]) == 16
    assert "pl_knn k=5, pl_knn k=10, dst_pll" in tags["mlflow.note.content"]
    experiment = client.get_experiment_by_name("e2e")
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"  # MLflow's classic view


def test_one_run_per_method_run_with_plain_params_and_the_same_metric_names(digits_run):
    uri, result = digits_run
    client = MlflowClient(uri)
    runs = method_runs(client, result)
    assert list(runs) == ["pl_knn k=5", "pl_knn k=10", "dst_pll"]
    for name, run in runs.items():
        assert run.info.run_name == name and run.info.status == "FINISHED"
        assert run.data.tags["mlflow.parentRunId"] == result["run_id"] and run.data.tags["pll.kind"] == "method"
        assert run.data.tags["mlflow.note.content"].startswith(f"{name} on digits")
        params = run.data.params
        assert params["method"] == name.split()[0] and params["dataset"] == "digits" and params["seed"] == "0"
        assert params["features"] == "minmax" and params["truth"] == result["truth"]
    assert runs["pl_knn k=5"].data.params["n_neighbors"] == "5" and runs["pl_knn k=10"].data.params["n_neighbors"] == "10"
    assert runs["dst_pll"].data.params["n_neighbors"] == "10"  # the method's default, as a plain param
    keys = {frozenset(run.data.metrics) for run in runs.values()}
    assert len(keys) == 1
    metrics = runs["pl_knn k=10"].data.metrics
    # Digits with class-dependent noise: PL-kNN is far above chance (0.1).
    assert metrics["accuracy"] > 0.9
    assert 0.0 <= metrics["native.rejection_rate"] < 0.5
    assert metrics["native.risk_0.10"] == pytest.approx(metrics["native.risk_0.00"] + 0.1 * metrics["native.rejection_rate"])
    assert {"trust.covered_accuracy", "conformal.coverage", "native.cal_risk_0.10"} <= set(metrics)
    assert not any(k.startswith(("pl_knn", "dst_pll")) for k in metrics)  # no method in the metric names
    # Sortable by one column across methods, every method run with a value.
    exp = client.get_experiment_by_name("e2e")
    ordered = client.search_runs([exp.experiment_id], "tags.`pll.kind` = 'method'",
                                 order_by=["metrics.`native.risk_0.10` ASC"])
    values = [r.data.metrics["native.risk_0.10"] for r in ordered]
    assert len(ordered) == 3 and values == sorted(values)


def test_risk_curves_are_metric_series_one_line_per_run(digits_run):
    uri, result = digits_run
    client = MlflowClient(uri)
    run_id = result["method_run_ids"]["dst_pll"]
    metrics = client.get_run(run_id).data.metrics
    by_lambda = client.get_metric_history(run_id, "native.risk_by_lambda")
    assert [m.step for m in by_lambda] == [0, 5, 10, 15, 20]
    assert [m.value for m in by_lambda] == [metrics[f"native.risk_{lam:.2f}"] for lam in (0, 0.05, 0.1, 0.15, 0.2)]
    by_coverage = client.get_metric_history(run_id, "trust.risk_by_coverage")
    steps = [m.step for m in by_coverage]
    assert steps == sorted(steps) and steps[-1] == 100 and all(s % 5 == 0 for s in steps)
    assert by_coverage[-1].value == pytest.approx(1 - metrics["accuracy"])  # every row accepted: the error rate


def test_data_set_is_a_dataset_input_of_every_run(digits_run):
    uri, result = digits_run
    client = MlflowClient(uri)
    for run_id in [result["run_id"], *result["method_run_ids"].values()]:
        inputs = client.get_run(run_id).inputs.dataset_inputs
        assert len(inputs) == 1
        dataset = inputs[0].dataset
        assert dataset.name == "digits" and len(dataset.digest) == 16 and dataset.source_type == "code"
        assert json.loads(dataset.source)["uri"] == "sklearn.datasets.load_digits"


def test_artifacts_hold_config_summary_table_and_each_method_runs_predictions(digits_run, tmp_path):
    uri, result = digits_run
    client = MlflowClient(uri)
    run_id = result["run_id"]
    names = {a.path for a in client.list_artifacts(run_id)}
    assert {"config.json", "dataset_summary.json", "metrics.csv", "metrics.md", "report.md", "figures"} <= names
    summary = json.loads(open(client.download_artifacts(run_id, "dataset_summary.json", str(tmp_path))).read())
    assert summary["rows"] == 1797 and summary["features"] == 64 and summary["classes"] == 10
    assert 1.0 < summary["average_bag_size"] < 2.0
    assert summary["noise"] == "class_dependent"
    method_run = result["method_run_ids"]["pl_knn k=10"]
    pred = pd.read_parquet(client.download_artifacts(method_run, "predictions/test.parquet", str(tmp_path)))
    assert {"row", "y_true", "label", "accept", "score", "trust_score", "conformal_set"} <= set(pred.columns)
    assert len(pred) == 360
    accuracy = (pred["label"] == pred["y_true"]).mean()
    assert accuracy == pytest.approx(client.get_run(method_run).data.metrics["accuracy"])
    assert {a.path for a in client.list_artifacts(method_run, "curves")} >= {"curves/native.sweep.csv"}


def test_flow_returns_the_metrics_table(digits_run):
    _, result = digits_run
    table = result["metrics"]
    # Every method run is evaluated with its own reject option, with the trust score and with conformal sets,
    # its options together.
    names = ["pl_knn k=5", "pl_knn k=10", "dst_pll"]
    assert list(zip(table["method"], table["reject"])) == [
        (n, o) for n in names for o in ("native", "trust", "conformal")]


def stage_log_lines(prefect, flow_run_id, wait=60.0):
    """The flow run's log messages, read again until its stage lines arrived (logs reach the server in batches)."""
    deadline = time.monotonic() + wait
    while True:
        logs = prefect.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
        messages = [log.message for log in logs]
        if any(m.startswith("MLflow: parent run") for m in messages) or time.monotonic() > deadline:
            return messages
        time.sleep(1.0)


def test_flow_run_and_mlflow_runs_name_each_other(digits_run):
    uri, result = digits_run
    client = MlflowClient(uri)
    run = client.get_run(result["run_id"])
    flow_run_id = run.data.tags["prefect.flow_run_id"]
    assert all(r.data.tags["prefect.flow_run_id"] == flow_run_id for r in method_runs(client, result).values())
    with get_client(sync_client=True) as prefect:
        flow_run = prefect.read_flow_run(flow_run_id)
        artifacts = prefect.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))
        messages = stage_log_lines(prefect, flow_run_id)
    assert flow_run.name == run.info.run_name == run.data.tags["prefect.flow_run_name"]
    assert f"mlflow-run:{result['run_id']}" in flow_run.tags
    assert any(a.type == "markdown" and "pl_knn k=10" in a.data for a in artifacts)
    assert any(m.startswith("neighbors minmax: k=10, backend exact") for m in messages), messages
    assert any(m.startswith("data: digits, 1797 rows, 64 features, 10 classes") for m in messages)
    # The harness's server is not this command's temporary one: the flow run's address is recorded.
    assert run.data.tags["prefect.flow_run_url"].endswith(f"/flow-runs/flow-run/{flow_run_id}")


def logged_metrics(client, result):
    """Every metric the pipeline run and its method runs logged, by run and name; seconds left out."""
    runs = {"pipeline": client.get_run(result["run_id"]), **method_runs(client, result)}
    return {(name, key): value for name, run in runs.items() for key, value in run.data.metrics.items()
            if not key.endswith("_seconds")}


def test_small_and_staged_runs_compute_the_same(prefect_harness, tracking_uri):
    """Below pll.experiment.catalog.STAGE_TASKS_MIN_ROWS the protocol is one task; a task per stage logs every metric equal."""
    kwargs = dict(dataset="iris", seed=1, methods=["pl_knn", "pl_aknn"], tracking_uri=tracking_uri, experiment="paths")
    whole, staged = pipeline(**kwargs), pipeline(**kwargs, stage_tasks=True)
    pd.testing.assert_frame_equal(whole["metrics"], staged["metrics"])
    client = MlflowClient(tracking_uri)
    logged = logged_metrics(client, whole)
    assert len(logged) > 200 and logged == logged_metrics(client, staged)
    # The same run again: its name gets a number, in MLflow and in Prefect.
    again = MlflowClient(tracking_uri).get_run(staged["run_id"])
    assert again.info.run_name == "iris / auto / seed 1 (2)"
    with get_client(sync_client=True) as prefect:
        assert prefect.read_flow_run(again.data.tags["prefect.flow_run_id"]).name == "iris / auto / seed 1 (2)"
    with get_client(sync_client=True) as prefect:
        names = {}
        for result in (whole, staged):
            flow_run_id = MlflowClient(tracking_uri).get_run(result["run_id"]).data.tags["prefect.flow_run_id"]
            runs = prefect.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
            names[result["run_id"]] = {r.name for r in runs}
    assert any(n.startswith("protocol-") for n in names[whole["run_id"]])
    assert "method-pl_knn" not in names[whole["run_id"]]
    assert {"method-pl_knn", "trust-pl_aknn", "neighbors-minmax"} <= names[staged["run_id"]]


def test_staged_run_without_conformal_sets_still_calibrates_on_the_hold_out_split(prefect_harness, tracking_uri):
    """With ``conformal_alpha=None`` the hold-out split still serves the thresholds; both paths agree."""
    kwargs = dict(dataset="iris", seed=2, methods=["dst_pll"], conformal_alpha=None, tracking_uri=tracking_uri,
                  experiment="no-sets")
    whole, staged = pipeline(**kwargs), pipeline(**kwargs, stage_tasks=True)
    pd.testing.assert_frame_equal(whole["metrics"], staged["metrics"])
    assert set(staged["metrics"]["reject"]) == {"native", "trust"}
    assert staged["metrics"]["cal_threshold_0.10"].notna().all()

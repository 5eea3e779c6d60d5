"""End to end: the Prefect flow against a real temporary Prefect server and MLflow store."""

import json

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from flows.pipeline import pipeline

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def digits_run(prefect_harness, tmp_path_factory):
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    result = pipeline(dataset="digits", seed=0, methods=["pl_knn"], tracking_uri=uri, experiment="e2e")
    return uri, result


def test_run_is_logged_with_parameters_metrics_and_tags(digits_run):
    uri, result = digits_run
    client = MlflowClient(uri)
    run = client.get_run(result["run_id"])
    assert run.info.status == "FINISHED"
    params = run.data.params
    assert params["dataset"] == "digits"
    assert params["seed"] == "0"
    # The default backend, auto, searches small data exactly.
    assert params["knn_backend"] == "auto" and params["knn.minmax.backend"] == "exact"
    metrics = run.data.metrics
    # Digits with class-dependent noise: PL-kNN is far above chance (0.1).
    assert metrics["pl_knn.native.accuracy"] > 0.9
    assert 0.0 <= metrics["pl_knn.native.rejection_rate"] < 0.5
    assert metrics["pl_knn.native.risk_0.10"] == pytest.approx(
        metrics["pl_knn.native.risk_0.00"] + 0.1 * metrics["pl_knn.native.rejection_rate"]
    )
    tags = run.data.tags
    assert len(tags["git_commit"]) in (40, len("unknown"))
    assert tags["version.numpy"] != "absent"
    assert len(tags["data_fingerprint"]) == 16


def test_artifacts_hold_config_summary_predictions_and_table(digits_run, tmp_path):
    uri, result = digits_run
    client = MlflowClient(uri)
    run_id = result["run_id"]
    names = {a.path for a in client.list_artifacts(run_id)}
    assert {"config.json", "dataset_summary.json", "metrics.csv", "metrics.md", "predictions"} <= names
    summary = json.loads(open(client.download_artifacts(run_id, "dataset_summary.json", str(tmp_path))).read())
    assert summary["rows"] == 1797 and summary["features"] == 64 and summary["classes"] == 10
    assert 1.0 < summary["average_bag_size"] < 2.0
    assert summary["noise"] == "class_dependent"
    pred = pd.read_parquet(client.download_artifacts(run_id, "predictions/pl_knn.parquet", str(tmp_path)))
    assert {"row", "y_true", "label", "accept", "score"} <= set(pred.columns)
    assert len(pred) == 360
    accuracy = (pred["label"] == pred["y_true"]).mean()
    assert accuracy == pytest.approx(client.get_run(run_id).data.metrics["pl_knn.native.accuracy"])


def test_flow_returns_the_metrics_table(digits_run):
    _, result = digits_run
    table = result["metrics"]
    # Every method is evaluated with its own reject option, with the trust score and with conformal sets.
    assert sorted(zip(table["method"], table["reject"])) == [("pl_knn", o) for o in ("conformal", "native", "trust")]

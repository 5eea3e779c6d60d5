"""MLflow logging: one run per pipeline execution, written through an explicit client.

An explicit :class:`~mlflow.tracking.MlflowClient` and run id (rather than
MLflow's thread-local active run) lets any task, in any thread or Dask
worker, log to the right run.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path

from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE

from pll.plots import precision_figure, risk_figure, tradeoff_figure
from pll.report import run_report
from pll.tables import markdown_table, risk_table
# The flows resolve their store through this module too.
from tasks.tracking_store import DEFAULT_TRACKING_URI, artifact_location, resolve_tracking_uri  # noqa: F401

KEY_PACKAGES = ("pll", "numpy", "scipy", "scikit-learn", "pynndescent", "dask", "prefect", "mlflow")
_BATCH = 900  # MLflow accepts at most 1000 entries per log_batch call
FIGURE_DPI = 120


def git_commit() -> str:
    """The commit of the code that ran (``unknown`` outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def package_versions() -> dict:
    versions = {}
    for name in KEY_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def flatten_params(config: dict, prefix="") -> dict:
    """Nested configuration as flat MLflow parameters (``methods.dst_pll.n_neighbors``)."""
    flat = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten_params(value, f"{name}."))
        else:
            flat[name] = value if isinstance(value, str) else json.dumps(value)
    return flat


@task(name="start-run", cache_policy=NO_CACHE)
def start_run(tracking_uri: str, experiment: str, run_name: str, config: dict, tags: dict | None = None) -> str:
    """Create the MLflow run, log the configuration as parameters and artifact; return its id."""
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp else client.create_experiment(experiment, artifact_location(tracking_uri))
    all_tags = {"git_commit": git_commit(), **{f"version.{k}": v for k, v in package_versions().items()}}
    all_tags.update(tags or {})
    run = client.create_run(exp_id, run_name=run_name, tags=all_tags)
    params = [Param(k, str(v)[:6000]) for k, v in flatten_params(config).items()]
    for i in range(0, len(params), _BATCH):
        client.log_batch(run.info.run_id, params=params[i : i + _BATCH])
    log_json(client, run.info.run_id, config, "config.json")
    return run.info.run_id


def log_json(client, run_id, obj, artifact_file):
    client.log_dict(run_id, obj, artifact_file)


def log_frame(client, run_id, frame, artifact_file):
    """Write a DataFrame as Parquet (``.parquet``), CSV (``.csv``) or Markdown (``.md``) artifact."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(artifact_file).name
        if path.suffix == ".parquet":
            frame.to_parquet(path, index=False)
        elif path.suffix == ".csv":
            frame.to_csv(path, index=False)
        else:
            path.write_text(markdown_table(frame))
        parent = str(Path(artifact_file).parent)
        client.log_artifact(run_id, str(path), None if parent == "." else parent)


def log_metrics(client, run_id, metrics: dict):
    entries = [Metric(k, float(v), 0, 0) for k, v in metrics.items()]
    for i in range(0, len(entries), _BATCH):
        client.log_batch(run_id, metrics=entries[i : i + _BATCH])


@task(name="end-run", cache_policy=NO_CACHE)
def end_run(tracking_uri: str, run_id: str, status: str = "FINISHED"):
    MlflowClient(tracking_uri).set_terminated(run_id, status)


def ui_command(tracking_uri: str) -> str:
    """The shell command that opens the MLflow UI on ``tracking_uri``."""
    if tracking_uri.startswith(("http://", "https://")):
        return f"open {tracking_uri}"
    return f"mlflow ui --backend-store-uri {tracking_uri}"



def log_figure(client, run_id, fig, artifact_file):
    """Write a matplotlib Figure as a PNG artifact."""
    client.log_figure(run_id, fig, artifact_file, save_kwargs={"dpi": FIGURE_DPI})


def curve_path(method, option, curve):
    """Artifact path of a curve table, e.g. ``curves/dst_pll.native.sweep.csv``."""
    return f"curves/{method}.{option}.{curve}.csv"


@task(name="log-results", cache_policy=NO_CACHE)
def log_results(tracking_uri: str, run_id: str, summary: dict, evaluation, predictions: dict, table):
    """Log metrics, curves, figures, predictions, tables and the Markdown report of a run.

    ``evaluation``: a :class:`pll.experiment.Evaluation`; ``predictions``:
    artifact path -> table (:func:`pll.experiment.prediction_frames`);
    ``table``: the metrics table (:func:`pll.tables.metrics_table`).
    """
    client = MlflowClient(tracking_uri)
    client.set_tag(run_id, "data_fingerprint", summary["fingerprint"])
    client.set_tag(run_id, "evaluated_against", evaluation.truth)
    client.log_param(run_id, "truth", evaluation.truth)  # what "correct" meant: comparable in the runs table
    log_json(client, run_id, summary, "dataset_summary.json")
    log_metrics(client, run_id, evaluation.metrics)
    for path, frame in predictions.items():
        log_frame(client, run_id, frame, path)
    for (method, option), sweep in evaluation.sweeps.items():
        log_frame(client, run_id, sweep, curve_path(method, option, "sweep"))
        log_frame(client, run_id, evaluation.precision[(method, option)], curve_path(method, option, "precision"))
        log_frame(client, run_id, evaluation.calibration[(method, option)], curve_path(method, option, "calibration"))
    risks = risk_table(evaluation.metrics)
    log_frame(client, run_id, table, "metrics.csv")
    log_frame(client, run_id, table, "metrics.md")
    log_frame(client, run_id, risks, "risks.csv")
    name = summary.get("name", "data")
    figures = {
        "Reject trade-off": ("figures/tradeoff.png", tradeoff_figure(
            evaluation.sweeps, evaluation.operating_points, f"Reject trade-off on {name} (test rows)")),
        "Risk against λ": ("figures/risk.png", risk_figure(risks, f"Reject-option risk on {name} (test rows)")),
        "Precision at percentile": ("figures/precision.png", precision_figure(
            evaluation.precision, f"Precision at percentile on {name} (test rows)")),
    }
    for path, fig in figures.values():
        log_figure(client, run_id, fig, path)
    report = run_report(summary, table, risks, {caption: path for caption, (path, _) in figures.items()},
                        truth=evaluation.truth)
    client.log_text(run_id, report, "report.md")

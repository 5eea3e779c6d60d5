"""MLflow logging: one run per pipeline execution, written through an explicit client.

An explicit :class:`~mlflow.tracking.MlflowClient` and run id (rather than
MLflow's thread-local active run) lets any task, in any thread or Dask
worker, log to the right run.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE

from pll.tables import markdown_table

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
DEFAULT_EXPERIMENT = "pll"
KEY_PACKAGES = ("pll", "numpy", "scipy", "scikit-learn", "pynndescent", "dask", "prefect", "mlflow")
_BATCH = 900  # MLflow accepts at most 1000 entries per log_batch call


def resolve_tracking_uri(uri: str | None) -> str:
    """The flag's URI, else ``MLFLOW_TRACKING_URI``, else a SQLite store in the working directory."""
    return uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI


def artifact_location(tracking_uri: str) -> str | None:
    """Artifacts of a local SQLite store live beside its database file; other stores decide themselves."""
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix):
        return None
    return (Path(tracking_uri[len(prefix):]).resolve().parent / "mlartifacts").as_uri()


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



@task(name="log-results", cache_policy=NO_CACHE)
def log_results(tracking_uri: str, run_id: str, summary: dict, metrics: dict, predictions: dict, table):
    """Log metrics, the data set summary, per-method predictions and the metrics table."""
    client = MlflowClient(tracking_uri)
    client.set_tag(run_id, "data_fingerprint", summary["fingerprint"])
    log_json(client, run_id, summary, "dataset_summary.json")
    log_metrics(client, run_id, metrics)
    for method, frame in predictions.items():
        log_frame(client, run_id, frame, f"predictions/{method}.parquet")
    log_frame(client, run_id, table, "metrics.csv")
    log_frame(client, run_id, table, "metrics.md")

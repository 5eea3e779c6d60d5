"""MLflow logging helpers: runs created, configured and filled through an explicit client.

An explicit :class:`~mlflow.tracking.MlflowClient` and run id (rather than
MLflow's thread-local active run) lets any task, in any thread or Dask
worker, log to the right run.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from pathlib import Path

from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE

from pll.utils.atomic_files import write_atomically
from pll.utils.provenance import git_commit, package_versions
from pll.reporting.tables import markdown_table
from pll_pipeline.tracking import store as tracking_store
from pll_pipeline.tracking.store import SQLITE_PREFIX, artifact_location

BATCH_ENTRIES = 1000  # MLflow's limits of one log_batch call
BATCH_PARAMS_OR_TAGS = 100
FIGURE_DPI = 120


_CREATED = set()  # SQLite stores this process has opened once under the folder's lock


def resolve_tracking_uri(uri: str | None) -> str:
    """The store a run writes to (:func:`pll_pipeline.tracking.store.resolve_tracking_uri`); a SQLite store opened once.

    MLflow creates a SQLite store's tables on its first use, and processes
    that start at once on a new file race on that schema migration (alembic's
    ``CommandError``, ``sqlite3.OperationalError``), as scheduled runs do on a
    fresh install.  Here the first use happens under an exclusive lock on the
    database's folder: one process creates the tables, the others find them.
    A new store is created under another name and renamed into place once
    complete: a process stopped during the migration (SIGTERM, Ctrl-C) leaves
    no half-migrated file that every later run would fail to open.
    """
    uri = tracking_store.resolve_tracking_uri(uri)
    path = uri[len(SQLITE_PREFIX):] if uri.startswith(SQLITE_PREFIX) else ":memory:"
    if path != ":memory:" and uri not in _CREATED:
        path = Path(path).resolve()
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            fcntl.flock(folder, fcntl.LOCK_EX)
            if path.exists():
                MlflowClient(uri).search_experiments(max_results=1)
            else:
                _create_store(path)
        finally:
            os.close(folder)  # releases the lock
        _CREATED.add(uri)
    return uri


def _create_store(path: Path):
    """Create MLflow's tables in a new SQLite file at ``path``: in a file beside it, renamed when complete."""
    write_atomically({path: lambda creating: MlflowClient(f"{SQLITE_PREFIX}{creating}").search_experiments(max_results=1)})


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


EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
CLASSIC_KIND = "custom_model_development"  # MLflow 3 opens other experiments in its GenAI view
PARENT_TAG = "mlflow.parentRunId"
DESCRIPTION_TAG = "mlflow.note.content"  # the run's description in the UI
KIND_TAG = "pll.kind"


def experiment_id(client, experiment: str, tracking_uri: str) -> str:
    """The id of ``experiment``, created if missing; tagged as classic model development for MLflow's UI."""
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        try:
            exp_id = client.create_experiment(experiment, artifact_location(tracking_uri))
        except MlflowException as exc:  # another run, started at the same time, created it first
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            exp = client.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp else exp_id
    if exp is None or exp.tags.get(EXPERIMENT_KIND_TAG) != CLASSIC_KIND:
        client.set_experiment_tag(exp_id, EXPERIMENT_KIND_TAG, CLASSIC_KIND)
    return exp_id


def unique_run_name(tracking_uri: str, experiment: str, name: str) -> str:
    """``name``, or ``name (2)``, ``(3)``, ... if an active top-level run of ``experiment`` has it already.

    Child runs are named uniquely under their parent by construction; runs
    at the top (a ``pll run`` repeated, a grid started again after it had
    finished) get a number, so that every name is unique where it is shown.
    """
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return name
    pattern = name.replace("'", "\\'")
    runs = client.search_runs([exp.experiment_id], f"attributes.run_name LIKE '{pattern}%'", max_results=50000)
    taken = {r.info.run_name for r in runs if PARENT_TAG not in r.data.tags}
    if name not in taken:
        return name
    return next(f"{name} ({i})" for i in range(2, len(taken) + 3) if f"{name} ({i})" not in taken)


def provenance_tags() -> dict:
    """What produced a run: the code's commit and the key packages' versions."""
    return {"git_commit": git_commit(), **{f"version.{k}": v for k, v in package_versions().items()}}


@task(name="start-run", cache_policy=NO_CACHE)
def start_run(tracking_uri: str, experiment: str, run_name: str, config: dict, tags: dict | None = None,
              description: str | None = None) -> str:
    """Create the MLflow run, log the configuration as parameters and artifact; return its id.

    ``tags`` may name a parent run (``mlflow.parentRunId``); ``description``
    is the one sentence the UI shows as the run's description.
    """
    client = MlflowClient(tracking_uri)
    exp_id = experiment_id(client, experiment, tracking_uri)
    all_tags = {**provenance_tags(), **(tags or {})}
    if description:
        all_tags[DESCRIPTION_TAG] = description
    run = client.create_run(exp_id, run_name=run_name, tags=all_tags)
    log_entries(client, run.info.run_id, params=flatten_params(config))
    log_json(client, run.info.run_id, config, "config.json")
    return run.info.run_id


def log_entries(client, run_id, *, metrics=(), params=None, tags=None):
    """Metrics (:class:`~mlflow.entities.Metric`), params and tags in as few ``log_batch`` calls as MLflow allows.

    A call takes at most :data:`BATCH_ENTRIES` entries, of which at most
    :data:`BATCH_PARAMS_OR_TAGS` params and as many tags.
    """
    params = [Param(k, str(v)[:6000]) for k, v in (params or {}).items()]
    tags = [RunTag(k, str(v)[:5000]) for k, v in (tags or {}).items()]
    metrics = list(metrics)
    while metrics or params or tags:
        batch_params, params = params[:BATCH_PARAMS_OR_TAGS], params[BATCH_PARAMS_OR_TAGS:]
        batch_tags, tags = tags[:BATCH_PARAMS_OR_TAGS], tags[BATCH_PARAMS_OR_TAGS:]
        room = BATCH_ENTRIES - len(batch_params) - len(batch_tags)
        batch_metrics, metrics = metrics[:room], metrics[room:]
        client.log_batch(run_id, metrics=batch_metrics, params=batch_params, tags=batch_tags)


def now_ms() -> int:
    return int(time.time() * 1000)


def log_json(client, run_id, obj, artifact_file):
    client.log_dict(run_id, obj, artifact_file)


def upload(client, run_id, files: dict):
    """Write ``files`` (artifact path -> writer of a local path) to one folder and upload it in one call."""
    with tempfile.TemporaryDirectory() as tmp:
        for artifact, write in files.items():
            path = Path(tmp) / artifact
            path.parent.mkdir(parents=True, exist_ok=True)
            write(path)
        client.log_artifacts(run_id, tmp)


def frame_writer(frame):
    """A writer of ``frame`` as Parquet (``.parquet``), CSV (``.csv``) or Markdown (any other suffix)."""
    def write(path):
        if path.suffix == ".parquet":
            frame.to_parquet(path, index=False)
        elif path.suffix == ".csv":
            frame.to_csv(path, index=False)
        else:
            path.write_text(markdown_table(frame))
    return write


def text_writer(text):
    return lambda path: path.write_text(text)


def figure_writer(figure):
    return lambda path: figure.savefig(path, dpi=FIGURE_DPI, bbox_inches="tight")


def log_metrics(client, run_id, metrics: dict):
    """Scalar metrics (step 0), batched."""
    stamp = now_ms()
    log_entries(client, run_id, metrics=[Metric(k, float(v), stamp, 0) for k, v in metrics.items()])


@task(name="end-run", cache_policy=NO_CACHE)
def end_run(tracking_uri: str, run_id: str, status: str = "FINISHED"):
    MlflowClient(tracking_uri).set_terminated(run_id, status)


def log_figure(client, run_id, fig, artifact_file):
    """Write a matplotlib Figure as a PNG artifact."""
    client.log_figure(run_id, fig, artifact_file, save_kwargs={"dpi": FIGURE_DPI})

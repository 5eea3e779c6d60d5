"""MLflow bookkeeping of a benchmark grid: one parent run, a pipeline run per execution, a method run per cell.

The grid's run carries the tag ``pll.grid_key`` (the grid's hash), each
pipeline run ``mlflow.parentRunId`` and ``pll.execution_key``, each method
run below it ``pll.cell_key``.  Those tags are how a grid that was
interrupted finds its parent again and learns which executions already
finished, so that starting it again runs only the missing ones.
"""

from __future__ import annotations

import json
import tempfile
import time

import pandas as pd
from mlflow.entities import Metric, ViewType
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE

from pll.errors import InvalidParameterError

from pll_pipeline.tracking.runs import PARENT_TAG, figure_writer, frame_writer, text_writer, upload

GRID_KEY_TAG = "pll.grid_key"
CELL_KEY_TAG = "pll.cell_key"
EXECUTION_KEY_TAG = "pll.execution_key"


def _search(client, experiment, filter_string):
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs, token = [], None
    while True:
        page = client.search_runs(
            [exp.experiment_id], filter_string, ViewType.ACTIVE_ONLY, max_results=1000, page_token=token
        )
        runs += list(page)
        token = page.token
        if not token:
            return runs


@task(name="find-unfinished-grid", cache_policy=NO_CACHE)
def find_unfinished_grid(tracking_uri: str, experiment: str, grid_key: str) -> str | None:
    """The parent run of the latest unfinished attempt at this grid, reopened; else None.

    The grid key hashes the grid's cells, not the code: a grid restarted after
    a code change goes on in the same parent, each child run recording its
    own ``git_commit``.
    """
    client = MlflowClient(tracking_uri)
    runs = _search(client, experiment, f"tags.`{GRID_KEY_TAG}` = '{grid_key}'")
    parents = (r for r in runs if PARENT_TAG not in r.data.tags)  # children carry the grid key too
    unfinished = sorted((r for r in parents if r.info.status != "FINISHED"), key=lambda r: r.info.start_time)
    if not unfinished:
        return None
    run_id = unfinished[-1].info.run_id
    client.update_run(run_id, status="RUNNING")
    return run_id


@task(name="finished-executions", cache_policy=NO_CACHE)
def finished_executions(tracking_uri: str, experiment: str, parent_run_id: str) -> dict[str, str]:
    """Execution key -> run id of the grid's finished pipeline runs; the unfinished are deleted, with their method runs.

    An execution that did not finish runs again as a whole (its finished
    stages come from the cache), so its old runs would only repeat names.
    """
    client = MlflowClient(tracking_uri)
    done = {}
    for run in _search(client, experiment, f"tags.`{PARENT_TAG}` = '{parent_run_id}'"):
        key = run.data.tags.get(EXECUTION_KEY_TAG)
        if run.info.status == "FINISHED" and key:
            done[key] = run.info.run_id
            continue
        for child in _search(client, experiment, f"tags.`{PARENT_TAG}` = '{run.info.run_id}'"):
            client.delete_run(child.info.run_id)
        client.delete_run(run.info.run_id)
    return done


@task(name="execution-metrics", cache_policy=NO_CACHE)
def execution_metrics(tracking_uri: str, run_id: str) -> pd.DataFrame:
    """The metrics table a finished pipeline run logged (``metrics.csv``)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = MlflowClient(tracking_uri).download_artifacts(run_id, "metrics.csv", tmp)
        return pd.read_csv(path)


@task(name="log-grid-results", cache_policy=NO_CACHE)
def log_grid_results(tracking_uri: str, run_id: str, counts: dict, tables: dict, failures: list, figures: dict):
    """Attach the grid's tables (CSV and Markdown), failures and figures to the parent run."""
    client = MlflowClient(tracking_uri)
    now = int(time.time() * 1000)  # a restarted grid logs its counts again: the latest must win
    client.log_batch(run_id, metrics=[Metric(f"cells_{k}", float(v), now, 0) for k, v in counts.items()])
    files = {"failures.json": text_writer(json.dumps(failures, indent=2))}
    for name, frame in tables.items():
        files[f"{name}.csv"] = files[f"{name}.md"] = frame_writer(frame)
    files.update({f"figures/{name}.png": figure_writer(figure) for name, figure in figures.items()})
    upload(client, run_id, files)


def grid_results(tracking_uri: str, sources) -> tuple[pd.DataFrame, list[dict], set]:
    """The ``grid_metrics`` of the grid runs ``sources`` name: each a grid run's id, or an experiment (all its grid runs).

    Returns the tables joined (each source's oldest grid run first, so that
    a cell run again counts by its latest result), one record per grid run
    read (name, run id, status, cells finished, minutes from start to end)
    and the presets the grids ran under.  A plain function, not a task:
    ``pll report`` reads the store without starting Prefect.
    """
    client = MlflowClient(tracking_uri)
    frames, records, presets = [], [], set()
    for source in sources:
        runs = _grid_runs(client, tracking_uri, source)
        with tempfile.TemporaryDirectory() as tmp:
            for run in sorted(runs, key=lambda r: r.info.start_time):
                try:
                    path = client.download_artifacts(run.info.run_id, "grid_metrics.csv", tmp)
                except Exception:  # a grid run stopped before it logged its table
                    continue
                frames.append(pd.read_csv(path))
                end = run.info.end_time or run.info.start_time
                records.append({
                    "grid": run.data.tags.get("pll.experiment.grid", ""), "run": run.info.run_id, "status": run.info.status,
                    "cells finished": int(run.data.metrics.get("cells_finished", 0)),
                    "minutes": round((end - run.info.start_time) / 60000, 1),
                })
        presets |= {r.data.tags["pll.preset"] for r in runs if "pll.preset" in r.data.tags}
    if not frames:
        raise InvalidParameterError(f"no grid run of {', '.join(sources)} has logged its results (grid_metrics.csv) yet")
    return pd.concat(frames, ignore_index=True), records, presets


def _grid_runs(client, tracking_uri, source):
    """The grid runs ``source`` names: a grid run's id, or an experiment's grid runs."""
    exp = client.get_experiment_by_name(source)
    if exp is not None:
        runs = [r for r in _search(client, source, f"tags.`{GRID_KEY_TAG}` != ''") if PARENT_TAG not in r.data.tags]
        if not runs:
            raise InvalidParameterError(f"experiment {source!r} in {tracking_uri} has no benchmark grid runs")
    else:
        try:
            runs = [client.get_run(source)]
        except Exception:  # MLflow raises its own exception types for an unknown id
            raise InvalidParameterError(f"{source!r} is neither an experiment nor a run id in {tracking_uri}") from None
        if GRID_KEY_TAG not in runs[0].data.tags or PARENT_TAG in runs[0].data.tags:
            raise InvalidParameterError(f"run {source} is not a benchmark grid's run (`pll benchmark` makes those)")
    return runs

"""The benchmark grid flow: every execution of a grid a pipeline subflow, a few at a time.

Cells that differ only in method settings share one pipeline execution
(:class:`pll.experiment.grid.Execution`: one neighbor search, a method run per cell).
MLflow gets one parent run for the grid, a pipeline run per execution below
it and a method run per cell below that; the grid's run holds the combined metrics table, the across-seeds summary (mean,
std, paired t-tests against the best), the papers' table layout of the key
metrics and a risk-against-λ figure per data set and noise.

A failing execution is reported with its error, once per cell, and the
others go on; the flow then ends in a ``Failed`` state whose message counts
the failed cells (its data is the same result dict a clean run returns), and
the grid's MLflow run ends FAILED.  Starting an unfinished grid again (same
grid file) reopens its run and runs only the executions without a finished
pipeline run; stages they had finished come from the cache.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextvars import copy_context
from pathlib import Path

from mlflow.tracking import MlflowClient
from prefect import flow, get_run_logger
from prefect.exceptions import PrefectHTTPStatusError
from prefect.states import Failed

from pll_pipeline.flows import LOG_PRINTS
from pll_pipeline.flows.cluster import dask_cluster, on_dask
from pll_pipeline.flows.links import flow_run_tags, name_flow_run, publish_table, tag_flow_run
from pll_pipeline.flows.tracked import ending_on_error
from pll_pipeline.flows.pipeline import pipeline
from pll.reporting.tables import markdown_table
from pll.experiment.grid import load_grid, parse_grid, results_table, summarize
from pll.reporting.grids import risk_figures, summary_tables
from pll_pipeline.tracking.grid import (
    CELL_KEY_TAG,
    EXECUTION_KEY_TAG,
    GRID_KEY_TAG,
    execution_metrics,
    find_unfinished_grid,
    finished_executions,
    log_grid_results,
)
from pll_pipeline.tracking.runs import (
    KIND_TAG,
    PARENT_TAG,
    end_run,
    resolve_tracking_uri,
    start_run,
    unique_run_name,
)
from pll_pipeline.tracking.store import handed_on

GRID_KIND = "grid"


class GridProgress:
    """Cells of a grid by state, and executions running; ``running`` assumes the pool keeps every worker busy."""

    def __init__(self, executions, finished, concurrency: int):
        self.total = sum(len(e.cells) for e in executions)
        self.done = sum(len(e.cells) for e in executions if e.key in finished)
        self.failed, self.concurrency = 0, concurrency
        self.pending = len(executions) - len(finished)

    def finish(self, execution, ok: bool):
        """Count ``execution``'s cells as done (``ok``) or failed."""
        self.pending -= 1
        if ok:
            self.done += len(execution.cells)
        else:
            self.failed += len(execution.cells)

    @property
    def running(self) -> int:
        return min(self.concurrency, self.pending)

    def line(self) -> str:
        return (f"{self.done}/{self.total} cells done, {self.failed} failed; "
                f"{self.running} execution{'s' * (self.running != 1)} running")


START_ATTEMPTS = 4
"""Tries at starting an execution's subflow while the Prefect server answers 5xx (busy), 2, 4 and 8 s apart."""


def _server_busy(exc) -> bool:
    response = getattr(exc, "response", None)
    return isinstance(exc, PrefectHTTPStatusError) and response is not None and response.status_code >= 500


def run_execution(parameters: dict, scheduler_address: str | None):
    """One execution: the pipeline as a subflow (its tasks on the Dask cluster if there is one); its final state.

    A loaded machine's temporary Prefect server may refuse the subflow's
    creation with 503 (seen under a grid of 315 cells beside other work);
    starting it again a little later is safe, since nothing was created.
    """
    for attempt in range(START_ATTEMPTS):
        try:
            return on_dask(pipeline, scheduler_address)(**parameters, return_state=True)
        except PrefectHTTPStatusError as exc:
            if not _server_busy(exc) or attempt == START_ATTEMPTS - 1:
                raise
            time.sleep(2.0 * 2**attempt)


def _error(state) -> str:
    exc = state.result(raise_on_failure=False)
    return f"{type(exc).__name__}: {exc}" if isinstance(exc, BaseException) else str(state.message)


@flow(name="pll-benchmark", log_prints=LOG_PRINTS)
def benchmark(
    grid: str | dict = "benchmarks/grids/smoke.yaml",
    dask_address: str | None = None,
    max_concurrency: int | None = None,
    tracking_uri: str | None = None,
    experiment: str | None = None,
    preset: str | None = None,
):
    """Run every cell of ``grid`` (a grid file path, or the grid as a mapping; see :mod:`pll.experiment.grid`).

    ``dask_address``: None, ``"local"`` or a scheduler address (see
    :mod:`pll_pipeline.flows.cluster`); ``max_concurrency``, ``experiment`` and ``preset``
    (:mod:`pll.experiment.presets`) override the grid's.  Returns a dict: ``parent_run_id``, ``experiment``,
    ``tracking_uri``, ``cells`` (the total), ``finished``, ``failures``
    (cell, label, error), ``metrics`` (every cell's table) and ``summary``.
    """
    spec = load_grid(grid, preset) if isinstance(grid, (str, Path)) else parse_grid(grid, preset=preset)
    tracking_uri = resolve_tracking_uri(tracking_uri)
    experiment = experiment or spec.experiment
    limit = max_concurrency or spec.max_concurrency
    parent = find_unfinished_grid(tracking_uri, experiment, spec.key)
    finished = finished_executions(tracking_uri, experiment, parent) if parent else {}
    executions = spec.executions
    if parent is None:
        config = {"grid": spec.spec, "source": spec.source, "cells": len(spec.cells), "executions": len(executions)}
        tags = {GRID_KEY_TAG: spec.key, "pll.experiment.grid": spec.name, KIND_TAG: GRID_KIND}
        if spec.preset:
            tags["pll.preset"] = spec.preset
        description = (f"Benchmark grid {spec.name}: {len(spec.cells)} method runs in {len(executions)} pipeline "
                       f"runs. {spec.description}").strip()
        name = unique_run_name(tracking_uri, experiment, f"grid {spec.name}")
        parent = start_run(tracking_uri, experiment, name, config, {**tags, **flow_run_tags(name)}, description)
    name_flow_run(MlflowClient(tracking_uri).get_run(parent).info.run_name)
    tag_flow_run(parent)
    todo = [e for e in executions if e.key not in finished]
    logger = get_run_logger()
    logger.info(f"grid {spec.name}: {len(spec.cells)} cells in {len(executions)} executions, {len(finished)} "
                f"finished before, {len(todo)} to run (MLflow experiment {experiment!r}, parent run {parent})")
    progress = GridProgress(executions, finished, limit)
    tables, failures = {}, []
    with ending_on_error(tracking_uri, parent):
        with dask_cluster(dask_address) as address, ThreadPoolExecutor(limit, thread_name_prefix="cell") as pool:
            futures = {}
            try:
                for execution in todo:
                    tags = {PARENT_TAG: parent, EXECUTION_KEY_TAG: execution.key, GRID_KEY_TAG: spec.key}
                    cell_tags = {c.variant: {CELL_KEY_TAG: c.key, "pll.cell": c.label} for c in execution.cells}
                    parameters = {**execution.pipeline_parameters(), "tracking_uri": handed_on(tracking_uri),
                                  "experiment": experiment, "dask_address": address, "run_tags": tags,
                                  "method_run_tags": cell_tags, "figures": False}
                    # Each execution a subflow of this flow: it runs in a copy of this thread's Prefect context.
                    futures[pool.submit(copy_context().run, run_execution, parameters, address)] = execution
                logger.info(f"progress: {progress.line()}")
                for future in as_completed(futures):
                    execution = futures[future]
                    try:
                        state, error = future.result(), None
                    except Exception as exc:  # the subflow never started: this execution fails, the others go on
                        state, error = None, f"{type(exc).__name__}: {exc}"
                    if state is not None and state.is_completed():
                        result = state.result()
                        finished[execution.key], tables[execution.key] = result["run_id"], result["metrics"]
                    else:
                        error = error or _error(state)
                        failures += [{"cell": c.key, "label": c.label, "error": error} for c in execution.cells]
                        logger.warning(f"execution failed: {execution.run_name}: {error}")
                    progress.finish(execution, error is None)
                    logger.info(f"progress: {progress.line()}")
            finally:
                pool.shutdown(cancel_futures=True)  # interrupted: start no further executions
        for key, run_id in finished.items():
            if key not in tables:
                tables[key] = execution_metrics(tracking_uri, run_id)
        table = results_table(executions, tables)
        summary = summarize(table)
        counts = {"total": len(spec.cells), "finished": progress.done, "failed": len(failures)}
        grid_tables = {"grid_metrics": table, "summary": summary, **summary_tables(summary)}
        log_grid_results(tracking_uri, parent, counts, grid_tables, failures, risk_figures(table))
        if "table_risk_0.10" in grid_tables:
            publish_table(markdown_table(grid_tables["table_risk_0.10"]),
                          f"Grid {spec.name}: risk_0.10 in %, mean (± std) over seeds (MLflow run {parent})")
    end_run(tracking_uri, parent, "FAILED" if failures else "FINISHED")
    result = {
        "parent_run_id": parent,
        "experiment": experiment,
        "tracking_uri": tracking_uri,
        "cells": len(spec.cells),
        "finished": progress.done,
        "failures": failures,
        "metrics": table,
        "summary": summary,
    }
    if failures:
        return Failed(message=f"grid {spec.name}: {len(failures)} of {len(spec.cells)} cells failed", data=result)
    return result

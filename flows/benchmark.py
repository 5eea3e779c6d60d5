"""The benchmark grid flow: every cell of a grid a pipeline subflow, a few at a time.

MLflow gets one parent run for the grid and a child run per cell; the
parent holds the combined metrics table, the across-seeds summary (mean,
std, paired t-tests against the best), the papers' table layout of the key
metrics and a risk-against-λ figure per data set and noise.

A failing cell is reported with its error and the other cells go on; the
flow then ends in a ``Failed`` state whose message counts the failed cells
(its data is the same result dict a clean run returns), and the parent
MLflow run ends FAILED.  Starting an unfinished grid again (same grid file)
reopens its parent run and runs only the cells without a finished child
run; stages those cells had finished come from the cache.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed
from contextvars import copy_context
from pathlib import Path

from prefect import flow, get_run_logger
from prefect.states import Failed

from flows import LOG_PRINTS
from flows.cluster import dask_cluster, on_dask
from flows.pipeline import pipeline
from pll.grid import load_grid, parse_grid, results_table, risk_figures, summarize, summary_tables
from tasks.grid_tracking import (
    CELL_KEY_TAG,
    GRID_KEY_TAG,
    PARENT_TAG,
    cell_metrics,
    find_unfinished_grid,
    finished_cells,
    log_grid_results,
)
from tasks.tracking import end_run, resolve_tracking_uri, start_run


class GridProgress:
    """Cells of a grid by state; ``running`` assumes the pool keeps every worker busy."""

    def __init__(self, total: int, done: int, concurrency: int):
        self.total, self.done, self.failed, self.concurrency = total, done, 0, concurrency

    @property
    def running(self) -> int:
        return min(self.concurrency, self.total - self.done - self.failed)

    def line(self) -> str:
        return f"{self.done}/{self.total} done, {self.running} running, {self.failed} failed"


def run_cell(cell, parameters: dict, scheduler_address: str | None):
    """One cell: the pipeline as a subflow (its tasks on the Dask cluster if there is one); its final state."""
    subflow = on_dask(pipeline, scheduler_address).with_options(flow_run_name=f"cell {cell.key}: {cell.label}")
    return subflow(**parameters, return_state=True)


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
):
    """Run every cell of ``grid`` (a grid file path, or the grid as a mapping; see :mod:`pll.grid`).

    ``dask_address``: None, ``"local"`` or a scheduler address (see
    :mod:`flows.cluster`); ``max_concurrency`` and ``experiment`` override
    the grid's.  Returns a dict: ``parent_run_id``, ``experiment``,
    ``tracking_uri``, ``cells`` (the total), ``finished``, ``failures``
    (cell, label, error), ``metrics`` (every cell's table) and ``summary``.
    """
    spec = load_grid(grid) if isinstance(grid, (str, Path)) else parse_grid(grid)
    tracking_uri = resolve_tracking_uri(tracking_uri)
    experiment = experiment or spec.experiment
    limit = max_concurrency or spec.max_concurrency
    parent = find_unfinished_grid(tracking_uri, experiment, spec.key)
    finished = finished_cells(tracking_uri, experiment, parent) if parent else {}
    if parent is None:
        config = {"grid": spec.spec, "source": spec.source, "cells": len(spec.cells)}
        tags = {GRID_KEY_TAG: spec.key, "pll.grid": spec.name}
        parent = start_run(tracking_uri, experiment, f"grid-{spec.name}", config, tags)
    todo = [cell for cell in spec.cells if cell.key not in finished]
    logger = get_run_logger()
    logger.info(f"grid {spec.name}: {len(spec.cells)} cells, {len(finished)} finished before, {len(todo)} to run "
          f"(MLflow experiment {experiment!r}, parent run {parent})")
    progress = GridProgress(len(spec.cells), len(finished), limit)
    cell_tables, failures = {}, []
    try:
        with dask_cluster(dask_address) as address, ThreadPoolExecutor(limit, thread_name_prefix="cell") as pool:
            futures = {}
            try:
                for cell in todo:
                    tags = {PARENT_TAG: parent, CELL_KEY_TAG: cell.key, GRID_KEY_TAG: spec.key, "pll.cell": cell.label}
                    parameters = {**cell.pipeline_parameters(), "tracking_uri": tracking_uri,
                                  "experiment": experiment, "dask_address": address, "run_tags": tags}
                    # Each cell a subflow of this flow: it runs in a copy of this thread's Prefect context.
                    futures[pool.submit(copy_context().run, run_cell, cell, parameters, address)] = cell
                logger.info(f"progress: {progress.line()}")
                for future in as_completed(futures):
                    cell, state = futures[future], future.result()
                    if state.is_completed():
                        result = state.result()
                        finished[cell.key], cell_tables[cell.key] = result["run_id"], result["metrics"]
                        progress.done += 1
                    else:
                        failures.append({"cell": cell.key, "label": cell.label, "error": _error(state)})
                        progress.failed += 1
                        logger.warning(f"cell failed: {cell.label}: {failures[-1]['error']}")
                    logger.info(f"progress: {progress.line()}")
            finally:
                pool.shutdown(cancel_futures=True)  # interrupted: start no further cells
        for key, run_id in finished.items():
            if key not in cell_tables:
                cell_tables[key] = cell_metrics(tracking_uri, run_id)
        table = results_table(spec.cells, cell_tables)
        summary = summarize(table)
        counts = {"total": len(spec.cells), "finished": len(finished), "failed": len(failures)}
        tables = {"grid_metrics": table, "summary": summary, **summary_tables(summary)}
        log_grid_results(tracking_uri, parent, counts, tables, failures, risk_figures(table))
    except BaseException as exc:
        end_run(tracking_uri, parent, "KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED")
        raise
    end_run(tracking_uri, parent, "FAILED" if failures else "FINISHED")
    result = {
        "parent_run_id": parent,
        "experiment": experiment,
        "tracking_uri": tracking_uri,
        "cells": len(spec.cells),
        "finished": len(finished),
        "failures": failures,
        "metrics": table,
        "summary": summary,
    }
    if failures:
        return Failed(message=f"grid {spec.name}: {len(failures)} of {len(spec.cells)} cells failed", data=result)
    return result

"""What a benchmark grid costs beyond its compute: per-cell overhead, and a re-run served by the stage cache.

Three measurements in one process, in a fresh folder (empty stage cache, new
SQLite MLflow store), against one temporary Prefect server:

1. the baseline: the grid's compute alone, each pipeline execution run by
   the library (:func:`pll.experiment.run_protocol`, no Prefect, no MLflow,
   no cache); it also warms numba's kernels and the data sets;
2. the grid's first run (``pll benchmark``'s flow), every stage computed;
3. the same grid again: a new grid run whose stages all come from the cache.

The MLflow store is created before anything is timed.  Printed: the three wall times, the re-run's ratio to the first run, and the
per-cell overhead, ``(first run − baseline) / cells``: what orchestration
(Prefect), tracking (MLflow) and figures add to each cell.  Process start-up
and the server's start are not counted: they are paid once per command, not
per cell.  Cells run one at a time (``--concurrency``, default 1), so that
wall times add up.

Run: ``.venv/bin/python benchmarks/grid_overhead.py [grid.yaml]`` (default: the smoke grid).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def compute_seconds(grid) -> float:
    """Seconds the library takes to run every execution of ``grid`` (no orchestration, tracking or cache)."""
    import pll
    from pll.experiment import run_protocol

    protocol_keys = ("seed", "noise", "noise_params", "methods", "method_params", "features", "method_features",
                     "val_fraction", "knn", "knn_options")
    t0 = time.perf_counter()
    for execution in grid.executions:
        params = execution.pipeline_parameters()
        noisy = params["noisy_bags"]
        ds = pll.load_dataset(params["dataset"], protocol=params["protocol"], allow_empty_bags=noisy,
                              allow_true_label_outside=noisy)
        run_protocol(ds, **{k: params[k] for k in protocol_keys})
    return time.perf_counter() - t0


def grid_seconds(spec, concurrency, tracking_uri) -> float:
    from pll_pipeline.flows.benchmark import benchmark

    t0 = time.perf_counter()
    state = benchmark(grid=spec, max_concurrency=concurrency, tracking_uri=tracking_uri, return_state=True)
    seconds = time.perf_counter() - t0
    if not state.is_completed():
        raise SystemExit(f"the grid failed: {state.message}")
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("grid", nargs="?", default=str(ROOT / "benchmarks/grids/smoke.yaml"))
    parser.add_argument("--concurrency", type=int, default=1, help="executions at once (default: 1)")
    args = parser.parse_args()
    grid_file = Path(args.grid).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # the stage cache (.pll-cache) and the MLflow store start empty here
        from mlflow.tracking import MlflowClient

        from pll_pipeline.flows.server import temporary_server
        from pll.experiment.grid import load_grid

        grid = load_grid(grid_file)
        spec = grid.spec
        tracking_uri = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        cells, executions = len(grid.cells), len(grid.executions)
        with temporary_server():
            MlflowClient(tracking_uri).search_experiments()  # creates the store: once per store, not per cell
            baseline = compute_seconds(grid)
            first = grid_seconds(spec, args.concurrency, tracking_uri)
            again = grid_seconds(spec, args.concurrency, tracking_uri)
    print(f"grid {grid.name}: {cells} cells in {executions} pipeline executions, concurrency {args.concurrency}")
    print(f"{'baseline: library compute':<34}{baseline:8.1f} s")
    print(f"{'first run (stages computed)':<34}{first:8.1f} s   {first / baseline:5.2f} x baseline")
    print(f"{'re-run (stages from the cache)':<34}{again:8.1f} s   {again / first:5.2f} x first run")
    print(f"{'per-cell overhead':<34}{(first - baseline) / cells:8.2f} s   (first run − baseline) / cells")
    print(f"{'per-cell wall, re-run':<34}{again / cells:8.2f} s")


if __name__ == "__main__":
    main()

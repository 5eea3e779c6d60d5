"""Neighbor stage: :func:`pll.experiment.find_neighbors` as a cached Prefect task."""

from prefect import task

from pll import experiment
from pll.experiment import CalibrationSplit, NeighborSet
from cache.policy import CACHED, RETRIES
from tasks.progress import logged_progress


@task(name="neighbors", **CACHED, **RETRIES, task_run_name="neighbors-{split.features}")
def find_neighbors(split, calibration: CalibrationSplit, k: int, backend: str, options: dict | None) -> NeighborSet:
    """``k`` neighbors of the split's training and test rows; the validation rows' come from ``calibration``."""
    with logged_progress():
        return experiment.find_neighbors(split, calibration, k, backend, options)

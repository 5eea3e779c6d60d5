"""Neighbor stage: :func:`pll.experiment.find_neighbors` as a cached Prefect task."""

from prefect import task

from pll import experiment
from pll.experiment import NeighborSet
from tasks.caching import CACHED, RETRIES
from tasks.progress import logged_progress


@task(name="neighbors", **CACHED, **RETRIES, task_run_name="neighbors-{split.features}")
def find_neighbors(split, rows, k: int, backend: str, options: dict | None) -> NeighborSet:
    """``k`` neighbors for every query set of the split (validation indices refer to ``rows.fit``)."""
    with logged_progress():
        return experiment.find_neighbors(split, rows, k, backend, options)

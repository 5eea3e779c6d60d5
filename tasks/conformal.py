"""Conformal stage: :func:`pll.experiment.conformal_option`, prediction sets as a reject option, as a Prefect task."""

from __future__ import annotations

from prefect import task

from pll import catalog, experiment
from pll.experiment import MethodOutput, NeighborSet
from tasks.caching import CACHED, RETRIES
from tasks.progress import logged_progress


@task(name="conformal", **CACHED, **RETRIES, task_run_name="conformal-{name}")
def conformal_option(name: str, params: dict | None, split, rows, neighbors: NeighborSet, seed: int,
                     alpha: float = catalog.DEFAULT_CONFORMAL_ALPHA) -> MethodOutput:
    """Method ``name`` fitted on the fitting rows, calibrated on the validation rows: sets with coverage ≥ 1 − α."""
    with logged_progress():
        return experiment.conformal_option(name, params, split, rows, neighbors, seed, alpha)

"""Conformal stage: :func:`pll.experiment.conformal_option` as a Prefect task."""

from __future__ import annotations

from prefect import task

from pll import catalog, experiment
from pll.experiment import CalibrationSplit, MethodOutput, MethodRun
from cache.policy import CACHED, RETRIES
from tasks.progress import logged_progress


@task(name="conformal", **CACHED, **RETRIES, task_run_name="conformal-{run.name}")
def conformal_option(run: MethodRun, calibration: CalibrationSplit, seed: int,
                     alpha: float = catalog.DEFAULT_CONFORMAL_ALPHA) -> MethodOutput:
    """The method run fitted on the fitting rows, calibrated on the validation rows: sets with coverage ≥ 1 − α."""
    with logged_progress():
        return experiment.conformal_option(run, calibration, seed, alpha)

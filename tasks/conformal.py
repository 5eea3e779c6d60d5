"""Conformal stage: :func:`pll.experiment.calibration_split` and :func:`~pll.experiment.conformal_option` as Prefect tasks."""

from __future__ import annotations

from prefect import task

from pll import catalog, experiment
from pll.experiment import CalibrationSplit, MethodOutput, MethodRun
from tasks.caching import CACHED, RETRIES
from tasks.progress import logged_progress


@task(name="calibration-split", **CACHED, **RETRIES, task_run_name="calibration-split-{features}")
def calibration_split(ds, rows, features: str, k: int, knn_backend: str, knn_options: dict | None) -> CalibrationSplit:
    """Features and a kNN index fitted on the fitting rows alone; validation and test rows as new rows."""
    with logged_progress():
        return experiment.calibration_split(ds, rows, features, k, knn_backend, knn_options)


@task(name="conformal", **CACHED, **RETRIES, task_run_name="conformal-{run.name}")
def conformal_option(run: MethodRun, calibration: CalibrationSplit, seed: int,
                     alpha: float = catalog.DEFAULT_CONFORMAL_ALPHA) -> MethodOutput:
    """The method run fitted on the fitting rows, calibrated on the validation rows: sets with coverage ≥ 1 − α."""
    with logged_progress():
        return experiment.conformal_option(run, calibration, seed, alpha)

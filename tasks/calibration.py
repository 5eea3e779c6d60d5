"""Hold-out split stage: :func:`pll.experiment.calibration_split`, where every calibration happens, as a Prefect task."""

from __future__ import annotations

from prefect import task

from pll import experiment
from pll.experiment import CalibrationSplit
from cache.policy import CACHED, RETRIES
from tasks.progress import logged_progress


@task(name="calibration-split", **CACHED, **RETRIES, task_run_name="calibration-split-{features}")
def calibration_split(ds, rows, features: str, k: int, knn_backend: str, knn_options: dict | None,
                      fit_neighbors=None) -> CalibrationSplit:
    """Features and a kNN index fitted on the fitting rows alone; validation and test rows as new rows.

    ``fit_neighbors``: the full split's ``subset_neighbors`` (:func:`pll.features.featurize`).
    """
    with logged_progress():
        return experiment.calibration_split(ds, rows, features, k, knn_backend, knn_options, fit_neighbors)

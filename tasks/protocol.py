"""The whole protocol of a small run as one cached Prefect task: :func:`pll.experiment.run_protocol`.

On a few thousand rows every stage takes milliseconds, and a task per stage
would cost more in orchestration than the stages compute; the pipeline runs
such data through this one task (see :data:`pll.catalog.STAGE_TASKS_MIN_ROWS`).
"""

from __future__ import annotations

from prefect import task

from pll import experiment
from pll.experiment import RunResult
from cache.policy import CACHED, RETRIES
from tasks.progress import logged_progress


@task(name="protocol", **CACHED, **RETRIES)
def run_protocol(ds, seed: int, noise: str, noise_params: dict | None, methods: list, method_params: dict | None,
                 features: str, method_features: dict | None, val_fraction: float, knn_backend: str,
                 knn_options: dict | None, conformal_alpha: float | None) -> RunResult:
    """Noise, split, features, neighbors, every method run and reject option, evaluation: one task."""
    with logged_progress():
        return experiment.run_protocol(
            ds, seed=seed, noise=noise, noise_params=noise_params, methods=methods, method_params=method_params,
            features=features, method_features=method_features, val_fraction=val_fraction, knn_backend=knn_backend,
            knn_options=knn_options, conformal_alpha=conformal_alpha)

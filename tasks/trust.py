"""Trust stage: :func:`pll.experiment.trust_option`, the trust score as a second reject option, as a Prefect task."""

from __future__ import annotations

from prefect import task

from pll import experiment
from pll.experiment import CalibrationSplit, MethodOutput, NeighborSet
from pll.neighbors import DEFAULT_BACKEND
from pll.trust_score import DEFAULT_CLASS_SETS, DEFAULT_THRESHOLD
from cache.policy import CACHED, RETRIES
from tasks.progress import logged_progress


@task(name="trust", **CACHED, **RETRIES, task_run_name="trust-{output.name}")
def trust_option(
    output: MethodOutput,
    split,
    rows,
    neighbors: NeighborSet,
    calibration: CalibrationSplit,
    class_sets: str = DEFAULT_CLASS_SETS,
    threshold: float = DEFAULT_THRESHOLD,
    knn_backend: str = DEFAULT_BACKEND,
    knn_options: dict | None = None,
) -> MethodOutput:
    """``output`` with the trust score (in the method's features) as its reject option."""
    with logged_progress():
        return experiment.trust_option(output, split, rows, neighbors, calibration, class_sets, threshold, knn_backend,
                                       knn_options)

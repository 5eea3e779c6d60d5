"""Method stage: :func:`pll.experiment.run_method` as a cached Prefect task."""

from prefect import task

from pll import experiment
from pll.experiment import CalibrationSplit, MethodOutput, MethodRun
from cache.policy import CACHED, RETRIES
from tasks.progress import logged_progress


@task(name="method", **CACHED, **RETRIES, task_run_name="method-{run.name}")
def run_method(run: MethodRun, split, calibration: CalibrationSplit, neighbors, seed: int) -> MethodOutput:
    """Fit the method run on the split's training rows, reusing the precomputed ``neighbors``; its hold-out on ``calibration``."""
    with logged_progress():
        return experiment.run_method(run, split, calibration, neighbors, seed)

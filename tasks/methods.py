"""Method stage: :func:`pll.experiment.run_method` as a cached Prefect task."""

from prefect import task

from pll import experiment
from pll.experiment import MethodOutput
from tasks.caching import CACHED, RETRIES
from tasks.progress import logged_progress


@task(name="method", **CACHED, **RETRIES, task_run_name="method-{name}")
def run_method(name: str, params: dict | None, split, rows, neighbors, seed: int) -> MethodOutput:
    """Fit ``name`` on the split's training rows, reusing the precomputed ``neighbors``."""
    with logged_progress():
        return experiment.run_method(name, params, split, rows, neighbors, seed)

"""Evaluation stage: :func:`pll.experiment.evaluate` as a Prefect task."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from pll import experiment
from pll.evaluation import DEFAULT_LAMBDAS
from pll.experiment import Evaluation


@task(name="evaluate", cache_policy=NO_CACHE)
def evaluate(outputs, ds, rows, lambdas=DEFAULT_LAMBDAS) -> Evaluation:
    """Evaluate every method output on the test rows, with thresholds calibrated on the validation rows."""
    return experiment.evaluate(outputs, ds, rows, lambdas)

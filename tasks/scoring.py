"""Scoring stage: score a file with a fitted model, as a Prefect task."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from pll.serving import FittedModel, score_file


@task(name="score-file", cache_policy=NO_CACHE, task_run_name="score-{input_path}")
def score(model: FittedModel, input_path: str, output_path: str):
    """Score one file; the output and its review queue appear atomically (see :func:`pll.serving.score_file`)."""
    return score_file(model, input_path, output_path)

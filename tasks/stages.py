"""The run protocol's stages as Prefect tasks: one declared stage per task, or the whole protocol in one.

On a few thousand rows every stage takes milliseconds, and a task per stage
would cost more in orchestration than the stages compute; the pipeline runs
such data through :func:`run_protocol` (see :data:`pll.experiment.catalog.STAGE_TASKS_MIN_ROWS`).
"""

from __future__ import annotations

from prefect import task

from pll_pipeline.cache.policy import CACHED, CACHED_BY_LINEAGE, RETRIES
from pll.experiment import Protocol, RunResult, Stage, run_stages
from pll_pipeline.tasks.progress import logged_progress


@task(name="stage", **CACHED_BY_LINEAGE, **RETRIES, task_run_name="{stage.label}")
def run_stage(stage: Stage, lineage: str, values: tuple):
    """``stage`` on the ``values`` it reads; cached by ``lineage``, its key (:func:`pll_pipeline.cache.policy.lineage_keys`)."""
    with logged_progress():
        return stage.run(*values)


@task(name="protocol", **CACHED, **RETRIES)
def run_protocol(protocol: Protocol, raw) -> RunResult:
    """Every stage of ``protocol`` in order, on the loaded data set ``raw``: one task."""
    with logged_progress():
        return run_stages(protocol, raw)

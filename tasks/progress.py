"""Progress of a stage's long row loops, as INFO lines of its Prefect task run (shown on the console).

The same hook lets a run stop its stages: when one stage fails, the flow
calls :func:`stop_stages` and the others end at their next block of rows
(:class:`pll.utils.progress.Stopped`) instead of computing on for minutes.  Stages
that run on Dask workers, in other processes, do not hear of it.
"""

from contextlib import contextmanager

from prefect import get_run_logger
from prefect.context import TaskRunContext

from pll.utils.progress import reporting

# Flow runs whose stages should stop (one of their stages failed).
_STOPPED_RUNS = set()


def stop_stages(flow_run_id):
    """Ask the stages of flow run ``flow_run_id`` in this process to stop at their next block of rows."""
    _STOPPED_RUNS.add(str(flow_run_id))


@contextmanager
def logged_progress():
    """Log the progress of :mod:`pll.utils.progress` loops run inside this block through the task run's logger.

    Enter it in the task body: on a Dask worker the body runs in another
    process, which sees no listener its caller set.
    """
    logger = get_run_logger()
    run = str(TaskRunContext.get().task_run.flow_run_id)
    with reporting(lambda progress: logger.info("%s", progress), stop=lambda: run in _STOPPED_RUNS):
        yield

"""Progress of a stage's long row loops, as INFO lines of its Prefect task run (shown on the console)."""

from contextlib import contextmanager

from prefect import get_run_logger

from pll.progress import reporting


@contextmanager
def logged_progress():
    """Log the progress of :mod:`pll.progress` loops run inside this block through the task run's logger.

    Enter it in the task body: on a Dask worker the body runs in another
    process, which sees no listener its caller set.
    """
    logger = get_run_logger()
    with reporting(lambda progress: logger.info("%s", progress)):
        yield

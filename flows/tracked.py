"""A tracked run's lifetime: an error ends its MLflow run FAILED, an interruption KILLED."""

from __future__ import annotations

from contextlib import contextmanager

from prefect.context import FlowRunContext
from prefect.exceptions import TerminationSignal

from tasks.progress import stop_stages
from tracking.runs import end_run

INTERRUPTIONS = (KeyboardInterrupt, TerminationSignal)
"""Ctrl-C, and SIGTERM as Prefect raises it (a worker cancelling a flow run, ``systemd stop``, ``docker stop``)."""


@contextmanager
def ending_on_error(tracking_uri: str, run_id: str):
    """Within this block, an error ends MLflow run ``run_id`` FAILED and an interruption ends it KILLED.

    An interruption also asks this flow run's stages to stop at their next
    block of rows (:func:`tasks.progress.stop_stages`): without that, the
    task runner waits for them to compute to the end before the process can
    exit.
    """
    try:
        yield
    except BaseException as exc:
        interrupted = isinstance(exc, INTERRUPTIONS)
        flow = FlowRunContext.get()
        if interrupted and flow is not None:
            stop_stages(flow.flow_run.id)
        end_run(tracking_uri, run_id, "KILLED" if interrupted else "FAILED")
        raise

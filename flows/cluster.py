"""Where a flow's tasks run: Prefect's thread pool, or a Dask cluster through prefect-dask.

``dask_address`` is None (no Dask), ``"local"`` (a LocalCluster on this
machine for as long as the flow runs) or a scheduler address such as
``tcp://127.0.0.1:8786`` (a cluster started elsewhere, e.g. by hand with
``dask scheduler`` and ``dask worker``).

A LocalCluster's worker processes exit by themselves once this process dies, even by SIGKILL
(distributed ties them to their parent; gone within 0.1 s here), so they need no watchdog
such as the Prefect server's (flows/processes.py); its dashboard needs bokeh.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager, suppress

LOCAL = "local"
LOOPBACK = "127.0.0.1"


@contextmanager
def dask_cluster(dask_address: str | None):
    """Yield the scheduler address to use: None, a fresh LocalCluster's for ``"local"``, else ``dask_address``."""
    if dask_address != LOCAL:
        yield dask_address
        return
    from distributed import LocalCluster

    # Loopback only (the workers' ports accept pickled tasks); ":0": any free port, no clash with other clusters.
    with LocalCluster(host=LOOPBACK, dashboard_address=f"{LOOPBACK}:0") as cluster:
        try:
            yield cluster.scheduler_address
        finally:
            _quiet_while_closing(cluster)


def _worker_quiet():
    logging.getLogger("distributed.worker").setLevel(logging.CRITICAL)


def _quiet_while_closing(cluster):
    """Silence the tracebacks of distributed's closing races, once the flow is done with the cluster.

    A worker whose heartbeat is under way while its nanny closes it logs
    "Failed to communicate with scheduler during heartbeat" with a traceback,
    and the scheduler logs each worker stream that closed while it wrote
    ("Batched Comm Closed", at INFO, with a traceback): both seen at the end
    of runs that finished.
    """
    from distributed import Client

    logging.getLogger("distributed.batched").setLevel(logging.WARNING)
    with suppress(Exception), Client(cluster, set_as_default=False) as client:  # a worker gone has nothing to say
        client.run(_worker_quiet)


def on_dask(flow, scheduler_address: str | None):
    """``flow`` with its tasks submitted to the Dask scheduler at ``scheduler_address`` (None: unchanged)."""
    if scheduler_address is None:
        return flow
    from prefect_dask import DaskTaskRunner

    return flow.with_options(task_runner=DaskTaskRunner(address=scheduler_address))

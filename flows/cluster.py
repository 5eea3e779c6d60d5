"""Where a flow's tasks run: Prefect's thread pool, or a Dask cluster through prefect-dask.

``dask_address`` is None (no Dask), ``"local"`` (a LocalCluster on this
machine for as long as the flow runs) or a scheduler address such as
``tcp://127.0.0.1:8786`` (a cluster started elsewhere, e.g. by hand with
``dask scheduler`` and ``dask worker``).

A LocalCluster's worker processes exit by themselves once this process dies, even by SIGKILL
(distributed ties them to their parent; gone within 0.1 s here), so they need no watchdog
such as the Prefect server's (flows/processes.py); its dashboard needs bokeh.

A cluster started elsewhere outlives the run, and so do the Prefect services in its workers that send
task runs' events and logs: each is made once per process, for the server of the first run that used it.
A second run with a temporary server of its own would have its task runs sent to the first run's, which
has stopped (3 of 19 task runs recorded).  So a run on such a cluster flushes and stops those services on
every worker as it starts and as it ends, while its server still listens: each run's tasks start their own,
for the server the run names.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager, suppress

LOCAL = "local"
LOOPBACK = "127.0.0.1"


FLUSH_SECONDS = 30
"""How long a worker may take to send the Prefect events and logs it holds as a run ends."""
STALE_FLUSH_SECONDS = 5
"""As a run starts: what a worker still holds was meant for an earlier run's server, which may be gone."""
CONNECT_SECONDS = 10
"""How long a flush waits for the scheduler to answer."""


@contextmanager
def dask_cluster(dask_address: str | None):
    """Yield the scheduler address to use: None, a fresh LocalCluster's for ``"local"``, else ``dask_address``."""
    if dask_address is None:
        yield None
        return
    if dask_address != LOCAL:
        _flush_prefect_services(dask_address, STALE_FLUSH_SECONDS)
        try:
            yield dask_address
        finally:
            _flush_prefect_services(dask_address, FLUSH_SECONDS)
        return
    from distributed import LocalCluster

    # Loopback only (the workers' ports accept pickled tasks); ":0": any free port, no clash with other clusters.
    with LocalCluster(host=LOOPBACK, dashboard_address=f"{LOOPBACK}:0") as cluster:
        try:
            yield cluster.scheduler_address
        finally:
            _quiet_while_closing(cluster)


def _flush_prefect_services(address, timeout):
    """On every worker of the cluster at ``address``: send what Prefect's event and log services hold, and stop them."""
    from distributed import Client

    # No cluster there: nothing to flush, and the run itself says so when it submits its tasks.
    with suppress(Exception), Client(address, set_as_default=False, timeout=CONNECT_SECONDS) as client:
        client.run(_flush_worker_services, timeout)


def _flush_worker_services(timeout):
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for service in (EventsWorker, APILogWorker):
        service.drain_all(timeout=timeout, at_exit=False)


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

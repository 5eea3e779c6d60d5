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
import time
from collections import Counter
from concurrent.futures import CancelledError
from contextlib import contextmanager, suppress
from dataclasses import dataclass

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
    core_log = logging.getLogger("distributed.core")
    core_log.addFilter(_lost_connection_in_one_line)
    try:
        with LocalCluster(host=LOOPBACK, dashboard_address=f"{LOOPBACK}:0") as cluster:
            try:
                yield cluster.scheduler_address
            finally:
                _quiet_while_closing(cluster)
    finally:
        core_log.removeFilter(_lost_connection_in_one_line)


LOST_CONNECTION = "Lost connection to %r"
"""distributed's message (``distributed.core``, at INFO) when a peer's connection closes under a request."""


def _lost_connection_in_one_line(record: logging.LogRecord) -> bool:
    """Log distributed's "Lost connection to ..." without its traceback.

    The in-process scheduler logs it with the whole traceback of the closed
    stream when a worker dies while a value is being sent to it; the run
    says which worker it lost and sends the value again, so the traceback
    tells an operator nothing more (and reads like a crash).
    """
    if record.msg == LOST_CONNECTION:
        record.exc_info = record.exc_text = None
    return True


def _flush_prefect_services(address, timeout):
    """On every worker of the cluster at ``address``: send what Prefect's event and log services hold, and stop them."""
    from distributed import Client

    # No cluster there: nothing to flush, and the run itself says so when it submits its tasks.
    with suppress(Exception), Client(address, set_as_default=False, timeout=CONNECT_SECONDS) as client:
        client.run(_flush_worker_services, timeout)


async def _flush_worker_services(timeout):
    """A coroutine: ``client.run`` calls a plain function on the worker's event loop, where Prefect's
    ``drain_all`` returns its wait as an awaitable, which a plain function could only drop unawaited."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for service in (EventsWorker, APILogWorker):
        await service.drain_all(timeout=timeout, at_exit=False)


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


@dataclass(frozen=True)
class LostWorker:
    """A worker the cluster lost while a run used it, and the tasks it held that ran again elsewhere."""

    address: str
    name: str
    tasks: tuple[str, ...]

    def line(self) -> str:
        counts = Counter(self.tasks)
        tasks = ", ".join(f"{t} × {n}" if n > 1 else t for t, n in sorted(counts.items())) or "none"
        return f"Dask worker {self.name} ({self.address}) lost during the run; tasks run again elsewhere: {tasks}"


class FlowCluster:
    """A flow run's dealings with the Dask cluster of its task runner (with any other runner: none).

    **Values sent once.**  Handed over as they are, a task's arguments travel inside its task graph: the
    scheduler holds every array, and the same rows cross the network once for each task that reads them (17
    "large graph" warnings in one 50,000-row run).  :meth:`send` scatters each value once, as it first goes to a
    task (:func:`pll.neighbors.sharded.send`), and the task takes its future.

    **Lost values sent again.**  A worker that dies takes the values it held: Dask keeps no spare copy for long
    (its active memory manager drops replicas that no waiting task needs).  The flow holds every value, so a
    stage that the scheduler cancels for a lost one is :meth:`lost`, and :meth:`send` sends its values again
    when the stage is submitted again.

    **Lost workers said.**  The scheduler reruns what a killed worker held, and the run's results do not change;
    :meth:`lost_workers` reads the scheduler's events since the run began, so that the run can say which worker
    it lost and which tasks ran again (the stages by the labels :meth:`name_task` gave them).
    """

    def __init__(self, task_runner, since: float | None = None):
        """``since``: when the run began (default: now); the scheduler's events carry its clock, this machine's."""
        from prefect_dask import DaskTaskRunner

        self._client = task_runner.client if isinstance(task_runner, DaskTaskRunner) else None
        self._sent, self._labels, self._since = {}, {}, time.time() if since is None else since
        if self._client is not None:
            workers = self._client.scheduler_info(n_workers=-1)["workers"]
            self._names = {address: str(w.get("name", address)) for address, w in workers.items()}

    def send(self, names, values) -> tuple:
        """``values`` (named ``names``), as the arguments of a task."""
        if self._client is None:
            return tuple(values)
        from pll.neighbors.sharded import alive, send

        for name, value in zip(names, values):
            if name not in self._sent or not alive(self._sent[name]):
                self._sent[name] = send(self._client, value)
        return tuple(self._sent[name] for name in names)

    def lost(self, future) -> bool:
        """Whether the scheduler cancelled the task of the Prefect ``future`` for a value a dead worker took
        with it (the stage is to be submitted again); not for any error of its own."""
        if self._client is None:
            return False
        try:
            future.wrapped_future.result()
        except CancelledError:
            return True
        except Exception:  # noqa: BLE001 - the stage's own error, raised where its result is read
            return False
        return False

    def keep(self, names) -> None:
        """Let the cluster drop every value sent that is not in ``names``."""
        for name in [n for n in self._sent if n not in names]:
            self._sent.pop(name).release()

    def name_task(self, future, label: str) -> None:
        """Call the Dask task behind the Prefect ``future`` ``label`` when a lost worker's tasks are listed."""
        if self._client is not None:
            self._labels[future.wrapped_future.key] = label

    def lost_workers(self) -> list[LostWorker]:
        """The workers the scheduler removed unexpectedly (killed, crashed, unreachable) since this run began.

        A worker closed on purpose (a cluster shutting down or scaled down) is not lost; tasks without a
        label are named by their key's prefix (``pll-knn-query``).
        """
        if self._client is None:
            return []
        from dask.utils import key_split

        return [LostWorker(address, self._names.get(address, address),
                           tuple(self._labels.get(k, key_split(k)) for k in keys))
                for address, keys in self._client.run_on_scheduler(_removed_workers, self._since)]


def _removed_workers(since, dask_scheduler=None):
    """On the scheduler: ``(address, keys of the tasks it held)`` of each worker removed unexpectedly since
    ``since``, as plain data (some of the scheduler's events hold objects that do not leave it)."""
    return [(event["worker"], [str(k) for k in (*event.get("processing-tasks", ()),
                                                *event.get("lost-computed-tasks", ()))])
            for stamp, event in dask_scheduler.get_events("all")
            if stamp >= since and event.get("action") == "remove-worker" and not event.get("expected")]


def on_dask(flow, scheduler_address: str | None):
    """``flow`` with its tasks submitted to the Dask scheduler at ``scheduler_address`` (None: unchanged)."""
    if scheduler_address is None:
        return flow
    from prefect_dask import DaskTaskRunner

    return flow.with_options(task_runner=DaskTaskRunner(address=scheduler_address))

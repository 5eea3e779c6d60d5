"""Distributed k-nearest-neighbor search: the training set sharded over Dask workers.

Arrays reach the workers by scatter (:func:`send`), never inside a task graph,
which the scheduler would hold and resend with every task that reads it.  Each
shard's rows are sent once, and so is each block of query rows, which the
workers of the other shards fetch from the first.  The client holds the shard
futures, so an index is built once per shard and stays on its worker, warm
(numba compiled), for every later query.  The per-shard top-k lists, already in
float64, are merged by (distance, index), which for exact shards gives exactly
the exact result.

A worker that dies takes its values with it.  Spare copies do not prevent
that: Dask's active memory manager drops every replica beyond what waiting
tasks need, within seconds.  The client holds the training and query rows
instead, so a search that the scheduler cancels for a lost value is sent
again: its block, and its shard rebuilt from rows sent anew where those are
gone (:meth:`ShardedIndex.iter_search`).
"""

from __future__ import annotations

import atexit
import threading
import time
import uuid
from concurrent.futures import CancelledError
from contextlib import contextmanager

import numpy as np

from ..errors import ClusterError
from ..utils.validation import check_positive_int
from .backends import local_index
from .exact import top_k
from .nndescent import MAX_BREADTH, MAX_DEPTH
from .registry import BACKENDS, EXACT, check_options, check_shard_backend

# LocalClusters started for callers that named no scheduler, kept warm for the life of the process.
_LOCAL_CLIENTS = {}
_LOCAL_LOCK = threading.Lock()


def local_client(n_workers=2, threads_per_worker=1):
    """A client of this process's LocalCluster with ``n_workers`` worker processes (started once)."""
    from distributed import Client, LocalCluster

    key = (n_workers, threads_per_worker)
    with _LOCAL_LOCK:
        client = _LOCAL_CLIENTS.get(key)
        if client is None or client.status != "running":
            cluster = LocalCluster(
                n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True, host="127.0.0.1",
                dashboard_address=None,
            )
            client = _LOCAL_CLIENTS[key] = Client(cluster, set_as_default=False)
    return client


def _in_dask_task():
    from distributed.worker import thread_state

    return getattr(thread_state, "key", None) is not None and getattr(thread_state, "proceed", True)


def connect(address, n_workers, threads_per_worker):
    """``(client, owned)``: inside a Dask task the worker's own client when ``address`` is None or
    its scheduler; else a new client of ``address``; else this process's warm LocalCluster."""
    from distributed import Client, get_client, get_worker

    if _in_dask_task() and address in (None, get_worker().scheduler.address):
        return get_client(), False
    if address is not None:
        return Client(address, set_as_default=False), True
    return local_client(n_workers, threads_per_worker), False


@contextmanager
def _waiting():
    """Inside a Dask task, leave the worker's thread pool while waiting on other tasks, so that
    tasks which start searches can never hold every worker thread and deadlock the cluster."""
    if not _in_dask_task():
        yield
        return
    from distributed import rejoin, secede

    secede()
    try:
        yield
    finally:
        rejoin()


SEND_TRIES = 5
SEND_BACKOFF_SECONDS = 1.0


def send(client, value):
    """``value`` on the cluster of ``client``, as a future that tasks take in its place.

    Scattered once to one worker, not embedded in a task graph; the workers
    that read it fetch it from there.  A worker that dies as the value goes to
    it is let go by the scheduler, and the value sent again.  (No broadcast:
    the scheduler's replication waits forever on a worker that died.)
    """
    for attempt in range(SEND_TRIES):
        try:
            return client.scatter([value], hash=False)[0]
        except OSError:
            if attempt == SEND_TRIES - 1:
                raise
            time.sleep(SEND_BACKOFF_SECONDS * (attempt + 1))


def alive(future):
    """Whether ``future`` is computed or on its way; not cancelled or lost with a worker."""
    return future.status in ("pending", "finished")


def lost_too_often(what):
    """The error once the cluster has lost ``what`` :data:`SEND_TRIES` times, each sent again in vain."""
    return ClusterError(f"the Dask cluster lost {what} {SEND_TRIES} times: its workers keep dying")


@atexit.register
def _close_local_clients():
    for client in _LOCAL_CLIENTS.values():
        cluster = client.cluster
        client.close()
        cluster.close()
    _LOCAL_CLIENTS.clear()


class Shard:
    """One shard's index: training rows ``offset`` to ``offset + n_rows`` of the whole set."""

    def __init__(self, index, offset, n_rows):
        self.index, self.offset, self.n_rows = index, offset, n_rows

    def search(self, Q, k, exclude, breadth=0):
        """The shard's top-``k`` of each query in global training indices (-1 / inf padded), searched at ``breadth``."""
        local = np.asarray(exclude, dtype=np.int64) - self.offset
        local[(local < 0) | (local >= self.n_rows)] = -1
        wider = {"breadth": breadth} if breadth and hasattr(self.index, "widen") else {}
        indices, distances = self.index.search(Q, k, local, **wider)
        indices[indices >= 0] += self.offset
        return indices, distances


def build_shard(X_shard, offset, k, backend, options):
    """Dask task: the index of one shard, using the worker's threads."""
    from distributed import get_worker

    if "n_jobs" in BACKENDS[backend].options:
        options = {"n_jobs": get_worker().state.nthreads, **options}
    index = local_index(X_shard, k, backend, options)
    if hasattr(index, "prepare"):  # search structures built here, on the worker, not at the first query
        index.prepare()
    return Shard(index, offset, X_shard.shape[0])


def search_shard(shard, block, k, breadth=0):
    """Dask task: one query block, ``(Q, exclude)``, against one shard."""
    Q, exclude = block
    return shard.search(Q, k, exclude, breadth)


class ShardedIndex:
    """The training set split into shards, each indexed on a Dask worker.

    Parameters
    ----------
    X_train : array of shape (n_train, d)
    k : int
        The most neighbors any search will ask for.
    n_shards : int, optional
        Default: one per worker; never more than the training rows.
    shard_backend : {"exact", "nndescent"}, default="exact"
    address : str, optional
        Scheduler of an existing Dask cluster.  Without ``address`` or
        ``client``, a LocalCluster of ``n_workers`` processes is started once
        per process and kept warm (inside a Dask task: the task's own cluster).
    client : distributed.Client, optional
        An existing client (not closed by :meth:`close`).
    n_workers, threads_per_worker : int, default=2, 1
        Size of the LocalCluster.
    block_rows : int, default=4096
        Query rows per task.
    random_state : int, default=0
        Seeds each shard's index (from the seed and the shard's first row).
    **shard_options
        Options of ``shard_backend``.

    With nndescent shards the index escalates as one
    (:meth:`pll.neighbors.NeighborIndex.kneighbors`): :meth:`widen` widens
    every shard's queries, :meth:`deepen` rebuilds every shard thicker.
    """

    def __init__(
        self,
        X_train,
        k,
        *,
        n_shards=None,
        shard_backend=EXACT,
        address=None,
        client=None,
        n_workers=2,
        threads_per_worker=1,
        block_rows=4096,
        random_state=0,
        **shard_options,
    ):
        shards = check_shard_backend(shard_backend)
        check_options(f"dask with {shard_backend} shards", shard_options, shards.options)
        check_positive_int(block_rows, "block_rows")
        self.approximate = shards.approximate
        self.block_rows = int(block_rows)
        self._own_client = None
        if client is None:
            client, owned = connect(address, n_workers, threads_per_worker)
            self._own_client = client if owned else None
        self.client = client
        n_train = X_train.shape[0]
        n_shards = n_shards or max(1, len(self.client.scheduler_info()["workers"]))
        check_positive_int(n_shards, "n_shards")
        # A training set smaller than the shard count (a small class set) is searched in fewer shards.
        n_shards = min(int(n_shards), n_train)
        self._bounds = np.linspace(0, n_train, n_shards + 1).astype(int)
        self._build_args = (X_train, k, shard_backend, shard_options, random_state)
        self.breadth = self.depth = 0
        self.max_breadth = MAX_BREADTH if self.approximate else 0
        self.shards, self._rows = [], []
        self._build()

    def _build(self):
        """Submit one build task per shard at :attr:`depth` and wait for all of them."""
        self._token = uuid.uuid4().hex
        if not self._rows:  # sent once; a deeper rebuild reads the same rows
            self._rows = [None] * (len(self._bounds) - 1)
        self.shards = [self._submit_build(i) for i in range(len(self._rows))]
        with _waiting():
            for i in range(len(self.shards)):
                self._wait_for_build(i)

    def _wait_for_build(self, i):
        """Wait for shard ``i``; built again each time a dying worker takes its rows.  A failed build raises
        here, not at the first query."""
        for attempt in range(SEND_TRIES):
            try:
                return self.shards[i].result()
            except CancelledError as error:
                if attempt == SEND_TRIES - 1:
                    raise lost_too_often("a shard's rows") from error
                self.shards[i] = self._submit_build(i)

    def _submit_build(self, i):
        """The future of shard ``i`` built at :attr:`depth`, its rows sent (again, if the cluster lost them)."""
        X_train, k, backend, options, random_state = self._build_args
        if self.depth:
            options = {**options, "depth": self.depth}
        a, b = self._bounds[i], self._bounds[i + 1]
        if self._rows[i] is None or not alive(self._rows[i]):
            self._rows[i] = send(self.client, np.ascontiguousarray(X_train[a:b]))
        return self.client.submit(
            build_shard, self._rows[i], int(a), k, backend, self._seeded(backend, options, random_state, a),
            key=f"pll-knn-shard-{self._token}-{i}-{uuid.uuid4().hex}",
        )

    def widen(self):
        """Search every shard wider from now on (at most :attr:`max_breadth` steps)."""
        self.breadth = min(self.breadth + 1, self.max_breadth)

    def can_deepen(self):
        """Whether :meth:`deepen` can thicken the shards' graphs (nndescent shards, :data:`MAX_DEPTH` steps)."""
        return self.approximate and self.depth < MAX_DEPTH

    def deepen(self):
        """Rebuild every shard's graph one step thicker (:func:`~pll.neighbors.nndescent.deeper`)."""
        self.client.cancel(self.shards)
        self.depth += 1
        self._build()

    def effort(self, k=None):
        """The shards and the escalation they search at; None for exact shards."""
        if not self.approximate:
            return None
        return {"n_shards": len(self.shards), "breadth": self.breadth, "depth": self.depth}

    @staticmethod
    def _seeded(backend, options, random_state, offset):
        if "random_state" not in BACKENDS[backend].options:
            return options
        seed = int(np.random.SeedSequence([random_state, int(offset)]).generate_state(1)[0])
        return {"random_state": seed, **options}

    def iter_search(self, Q, k, exclude=None, breadth=None):
        """Yield ``(rows, indices, distances)`` for each block of query rows as it completes.

        At most ``2 * n_shards`` blocks are in flight, so client and scheduler
        memory stay bounded for any number of queries.
        """
        from distributed import as_completed

        breadth = self.breadth if breadth is None else breadth
        n_query = Q.shape[0]
        exclude = np.full(n_query, -1, dtype=np.int64) if exclude is None else np.asarray(exclude, dtype=np.int64)
        blocks = iter(enumerate(range(0, n_query, self.block_rows)))
        parts, meta = {}, {}
        running = as_completed(loop=self.client.loop)

        def submit_search(b, s):
            future = self.client.submit(
                search_shard, self.shards[s], parts[b][2], k, breadth,
                key=f"pll-knn-query-{self._token}-{uuid.uuid4().hex}",
            )
            meta[future.key] = (b, s)
            running.add(future)

        def submit_next():
            b, start = next(blocks, (None, None))
            if b is None:
                return
            rows = slice(start, min(start + self.block_rows, n_query))
            # Held until every shard's result is in: a result lost with its worker is recomputed from it.
            parts[b] = [rows, [None] * len(self.shards), self._send_block(Q, exclude, rows)]
            for s in range(len(self.shards)):
                submit_search(b, s)

        def search_again(b, s):
            """A search cancelled for a value lost with its worker: its block and shard sent again where lost."""
            tries[b, s] = tries.get((b, s), 0) + 1
            if tries[b, s] == SEND_TRIES:
                raise lost_too_often("a query block's values")
            if not alive(parts[b][2]):
                parts[b][2] = self._send_block(Q, exclude, parts[b][0])
            if not alive(self.shards[s]):
                self.shards[s] = self._submit_build(s)
            submit_search(b, s)

        tries = {}
        for _ in range(2 * len(self.shards)):
            submit_next()
        with _waiting():
            for future in running:
                b, s = meta.pop(future.key)
                try:
                    result = future.result()
                except CancelledError:  # a value it read was lost with a worker (even after it finished)
                    search_again(b, s)
                    continue
                rows, found, _ = parts[b]
                found[s] = result
                future.release()
                if all(f is not None for f in found):
                    del parts[b]
                    indices, distances = top_k(np.hstack([f[0] for f in found]), np.hstack([f[1] for f in found]), k)
                    submit_next()
                    yield rows, indices, distances

    def _send_block(self, Q, exclude, rows):
        return send(self.client, (np.ascontiguousarray(Q[rows]), exclude[rows]))

    def search(self, Q, k, exclude=None, breadth=None):
        """Merged top-``k`` over all shards at ``breadth`` (default :attr:`breadth`); see
        :meth:`pll.neighbors.exact.ExactIndex.search`."""
        indices = np.empty((Q.shape[0], k), dtype=np.int64)
        distances = np.empty((Q.shape[0], k))
        for rows, idx, dist in self.iter_search(Q, k, exclude, breadth):
            indices[rows], distances[rows] = idx, dist
        return indices, distances

    def close(self):
        """Release the shards (and the client, if this index opened it)."""
        if self.shards:
            self.client.cancel(self.shards + self._rows)
            self.shards, self._rows = [], []
        if self._own_client is not None:
            self._own_client.close()
            self._own_client = None

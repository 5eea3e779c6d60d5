"""Approximate k-nearest-neighbor search with a pynndescent index.

The index holds each distinct training row once
(:class:`~pll.neighbors.distinct.DistinctRows`): repeated rows would fill
its graph with zero distances and strand its searches among them.  The
training rows' own neighbors are read from the index's k-NN graph (built
anyway), new rows are searched through the index; both are reranked in
float64 like every backend and expanded into training rows by index.  The defaults were tuned on the
``benchmarks/knn.py`` data (200,000 x 32 blobs, k = 10): a thin graph started
from many random-projection trees with large leaves reaches recall@10 of
about 0.99 for the training rows' own neighbors with roughly 40% less work
than a 25-neighbor graph on pynndescent's default forest (11 trees of up to
125 rows), which spends most of its time in NN-descent iterations; see
that script.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numba
import numpy as np

from ..utils.progress import blocks, track
from .distinct import DistinctRows
from .exact import ExactIndex, rerank_distinct

QUERY_ROWS = 65_536
"""Queries searched per call to pynndescent: the unit of progress reports and of stopping a search."""


LARGE_GRAPH_ROWS = 500_000
"""From this many training rows the graph has at least :data:`LARGE_GRAPH_DEGREE` neighbors (:func:`graph_neighbors`)."""
LARGE_GRAPH_DEGREE = 30
WIDE_K = 32
"""Searches for this many neighbors or more are *wide*: a thinner graph margin, another query breadth."""


def graph_neighbors(k, n_train=0):
    """Default graph degree for serving ``k`` neighbors: the graph's own lists answer the training rows.

    On the blobs of ``benchmarks/knn.py`` (k = 10) 12 neighbors give recall@10
    0.990 and 14 give 0.992; the scale benchmark's table (32 noisy features,
    240,000 training rows) needs more: 14 give 0.950, 18 (with 32 trees and
    epsilon 0.35) 0.984 for the own graph and 0.995 for new queries, at 1.4
    times the time.  New queries also find their neighbors more easily in the
    thicker search graph.  A larger graph needs a thicker one still: on that
    table's 800,000 training rows (1M-row run, min-max scaled) the own graph's
    recall@10 was 0.937 with 18 neighbors (41 s), 0.965 with 24 (47 s), 0.982
    with 30 (68 s) and 0.988 with 36 (74 s), with 5 iterations or 30 alike; so
    from :data:`LARGE_GRAPH_ROWS` rows the degree is at least
    :data:`LARGE_GRAPH_DEGREE`.  Wide searches (``k >= WIDE_K``) need little
    slack: on 640,000 rows of that table in PL A-kNN's projection (cube root,
    L2), k = 50, a graph of 58 built in 86 s with own recall@50 0.9995 and new
    queries' 0.9996; one of 52 in 74 s with 0.9993 and 0.9993 (12 trees instead
    of 32 saved nothing).  The graph holds the row itself, so it needs at
    least ``k + 1`` for the own lists to be served without exact search.
    """
    degree = k + (2 if k >= WIDE_K else 8)
    return max(degree, LARGE_GRAPH_DEGREE) if n_train >= LARGE_GRAPH_ROWS else degree


# Forest and descent defaults.  On the blobs of benchmarks/knn.py, 24 trees of up to 250 rows give a starting
# graph of recall about 0.97 for 4.5 s of single-thread build, after which two NN-descent iterations suffice
# (delta 0.01 stops there; 0.001 adds a third for +0.0005 recall); pruning only half of the search graph's
# long edges (diversify_prob 0.5) and epsilon 0.3 keep new queries' recall@10 about 0.99.  The scale
# benchmark's noisier table (see graph_neighbors) needs 32 trees and a wider query (QUERY_BREADTH).
DEFAULTS = {"n_trees": 32, "leaf_size": 250, "delta": 0.01, "diversify_prob": 0.5, "parallel_batch_queries": True}
WIDE_GRAPH = {"max_candidates": 20, "n_iters": 2}
"""pynndescent's ``max_candidates`` and NN-descent iterations for a wide graph (degree of :data:`WIDE_K` or
more; otherwise its defaults: the degree up to 60, and iterations until fewer than ``delta`` of the lists
change).  On 640,000 rows of the scale table in PL A-kNN's projection, a graph of 52 built in 71 s with the
default candidates (52) at own recall@50 0.9994, in 70 s with 30 at 0.9987, and in 57-61 s with 20 at
0.9949-0.9956; new queries' recall stayed 0.9975-0.9997.  Three iterations give the default's recall; two
take 44 s at 0.9863 (on 800,000 rows 58 s at 0.9851 against 68 s at 0.9947, new queries 0.9970 alike); a
looser ``delta`` (0.06) instead built in 38 s at only 0.948."""
QUERY_BREADTH = {(False, False): (15, 0.25), (False, True): (5, 0.2), (True, True): (5, 0.1)}
"""pynndescent's query breadth, ``(candidates beyond k, epsilon)``, for a (narrow or wide, ``k >= WIDE_K``)
search in a (narrow or wide) graph.  A wider graph, and a wider search, need less epsilon: both widen
pynndescent's frontier already.  Measured on the scale table (20,000 new queries, seconds on both cores at
recall@k), (query_k, epsilon):

- k = 10 in a narrow graph, 640,000 training rows min-max scaled, graph of 30: (20, 0.35) 4.3 s at 0.9967,
  (20, 0.25) 2.7 s at 0.9880, (25, 0.25) 3.3 s at 0.9924, (20, 0.2) 2.5 s at 0.9755, (30, 0.2) 2.9 s at
  0.9896; on 240,000 rows, graph of 18: (20, 0.35) 2.9 s at 0.9933, (20, 0.3) 2.4 s at 0.9883, (30, 0.25)
  2.6 s at 0.9902, (30, 0.2) 2.1 s at 0.9820.  (25, 0.25) keeps 0.99 for three quarters of the time;
  narrower comes too close to 0.98;
- k = 10 in a wide graph (a 10-neighbor method beside PL A-kNN on its features; PL A-kNN's preprocessing
  searches narrower, :data:`pll.preprocessing.SEARCH_EPSILON`), 640,000 rows in PL A-kNN's projection (cube
  root, L2), graph of 52: (20, 0.35) 3.1 s at 0.9998, (20, 0.2) 1.5 s at 0.9980, (15, 0.2) 1.2 s at 0.9971,
  (15, 0.1) 0.8 s at 0.9864;
- k = 50, the same 640,000 rows and graph: (60, 0.2) 3.7 s at 0.9997, (55, 0.1) 2.3–2.7 s at 0.9964–0.9969,
  (55, 0.05) 2.2–2.3 s at 0.993, (52, 0) 1.6 s at 0.9837; on 240,000 rows, graph of 58: (100, 0.35) 7.8 s
  at 0.9999, (60, 0.35) 4.7 s, (60, 0.25) 3.2 s at 0.9997, (60, 0.2) 3.0 s at 0.9995."""


MAX_BREADTH = 2
WIDER = (1, 0.1)
"""Each step of query breadth fetches ``k`` more candidates and adds 0.1 to epsilon."""
MAX_DEPTH = 3
"""Steps of graph thickening (:func:`deeper`): a degree up to 1.5^3 = 3.4 times the default."""


def query_defaults(k, degree):
    """pynndescent's ``(query_k, epsilon)`` for a search of ``k`` neighbors in a graph of ``degree`` (see :data:`QUERY_BREADTH`)."""
    wide = k >= WIDE_K  # a wide search is measured only in a wide graph, and takes its breadth in any
    extra, epsilon = QUERY_BREADTH[wide, wide or degree >= WIDE_K]
    return k + extra, epsilon


class NNDescentIndex:
    """A pynndescent index over ``X_train`` that serves up to ``k`` neighbors.

    Parameters
    ----------
    X_train : array of shape (n_train, d)
    k : int
        The most neighbors any search will ask for.
    epsilon : float, optional
        pynndescent's query breadth (larger: better recall, slower queries);
        default: by the search's and the graph's width (:data:`QUERY_BREADTH`).
    query_k : int, optional
        Candidates fetched per new query before the float64 rerank
        (default: ``k + 15``, or ``k + 5`` in a wide graph, for a search of ``k`` neighbors,
        :data:`QUERY_BREADTH`, so that a 10-neighbor search of an index
        built for 50 fetches 15, not 55).
    random_state : int, default=0
    depth : int, default=0
        Steps of graph thickening (:func:`deeper`), as an escalating search
        (:meth:`pll.neighbors.NeighborIndex.kneighbors`) asks for them.
    **params
        Passed to :class:`pynndescent.NNDescent` (``n_neighbors``,
        ``n_trees``, ``n_iters``, ``diversify_prob``, ``n_jobs``, ...: the list
        is :data:`pll.neighbors.registry.NNDESCENT_OPTIONS`);
        unset ones default to :func:`graph_neighbors`, :data:`DEFAULTS` and,
        for a wide graph, :data:`WIDE_GRAPH`.
        ``n_jobs`` (default: numba's thread count, all cores) also bounds
        the threads of batched queries.

    Searches report progress and stop, when a failed stage asks them to
    (:mod:`pll.utils.progress`), between blocks of :data:`QUERY_ROWS` queries; the
    graph build is one call into pynndescent and cannot be stopped midway.
    """

    def __init__(self, X_train, k, *, epsilon=None, query_k=None, random_state=0, depth=0, **params):
        self.X_train, self.k = X_train, k
        self.distinct = DistinctRows(X_train)
        self._rows = X_train if self.distinct.all_distinct else X_train[self.distinct.first]
        self.epsilon = epsilon
        self.query_k = query_k
        self.breadth = 0
        self._random_state, self._params = random_state, params
        self._n_jobs = params.get("n_jobs")
        self._lock = threading.Lock()
        self._exact = None
        self._build(depth)

    def _build(self, depth):
        """(Re)build the graph at ``depth`` (:func:`deeper`): a thicker graph, more NN-descent iterations."""
        from pynndescent import NNDescent

        n_rows = self._rows.shape[0]
        params = {**DEFAULTS, **self._params}
        params["n_neighbors"] = min(params.get("n_neighbors") or graph_neighbors(self.k, n_rows), n_rows - 1)
        if params["n_neighbors"] >= WIDE_K:
            params = {**WIDE_GRAPH, **params}
        self.depth, self.params = depth, deeper(params, depth, n_rows)
        self._index = self._graph = None
        # Distinct rows that fit in one random-projection leaf are all compared with each other anyway
        # (pynndescent also needs more rows than its graph degree): those are searched exactly.
        if n_rows > self.params["leaf_size"]:
            self._index = NNDescent(self._rows, random_state=self._random_state, **self.params)
            self._graph = self._index.neighbor_graph[0]

    @property
    def approximate(self):
        """False when the rows fit in one leaf and are searched exactly."""
        return self._index is not None

    def widen(self):
        """Search wider from now on (at most :data:`MAX_BREADTH` steps)."""
        self.breadth = min(self.breadth + 1, MAX_BREADTH)

    max_breadth = MAX_BREADTH

    def can_deepen(self):
        """Whether :meth:`deepen` can thicken the graph (:data:`MAX_DEPTH` steps, at most every other row)."""
        return (self._index is not None and self.depth < MAX_DEPTH
                and self.params["n_neighbors"] < self._rows.shape[0] - 1)

    def deepen(self):
        """Rebuild the graph one step thicker (:func:`deeper`)."""
        self._build(self.depth + 1)
        self.prepare()

    def effort(self, k=None):
        """The settings searches of ``k`` neighbors (default: the index's) run with now."""
        if self._index is None:
            return {"exact": True}
        query_k, epsilon = self._breadth(self.k if k is None else k, self.breadth)
        return {"n_neighbors": self.params["n_neighbors"], "delta": self.params["delta"],
                "n_iters": self.params.get("n_iters"), "query_k": query_k, "epsilon": round(epsilon, 3),
                "breadth": self.breadth, "depth": self.depth}

    def _breadth(self, k, breadth):
        """``(query_k, epsilon)`` of a search of ``k`` neighbors at ``breadth`` (see :data:`WIDER`)."""
        default_k, default_epsilon = query_defaults(k, self._graph.shape[1])
        query_k = max(k, self.query_k or default_k) + breadth * WIDER[0] * k
        epsilon = (default_epsilon if self.epsilon is None else self.epsilon) + breadth * WIDER[1]
        return min(query_k, self._rows.shape[0]), epsilon

    def __getstate__(self):
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def prepare(self):
        """Build the search structures now rather than on the first query."""
        with self._lock:
            if self._index is not None:
                self._index.prepare()

    def search(self, Q, k, exclude=None, breadth=None):
        """Indices and float64 distances of the ``k`` nearest training rows of each row of ``Q``.

        Rows with ``exclude >= 0`` are training row ``exclude`` itself: their
        neighbors come from the k-NN graph with the row removed by index, and
        from ``breadth`` 1 on (default: :attr:`breadth`) also from a search
        through the index, as a new row's.  Others are searched through the
        index.  A row left with fewer than ``k`` candidates (a sparse graph
        row) is searched exactly.  See
        :meth:`pll.neighbors.exact.ExactIndex.search` for the return values.
        """
        breadth = self.breadth if breadth is None else breadth
        n_query = Q.shape[0]
        exclude = np.full(n_query, -1, dtype=np.int64) if exclude is None else np.asarray(exclude, dtype=np.int64)
        indices = np.full((n_query, k), -1, dtype=np.int64)
        distances = np.full((n_query, k), np.inf)
        if self._index is not None:
            query_k, epsilon = self._breadth(k, breadth)
            own = exclude >= 0
            for rows in track(blocks(n_query, QUERY_ROWS), "nndescent search"):
                part = np.arange(rows.start, rows.stop)
                mine = own[part]
                cand = None
                if breadth or not mine.all():
                    ask = part if breadth else part[~mine]
                    with self._lock, _numba_threads(self._n_jobs):
                        found, _ = self._index.query(Q[ask], k=min(query_k + mine.any(), self._rows.shape[0]),
                                                     epsilon=epsilon)
                    cand = np.full((part.size, found.shape[1]), -1, dtype=np.int64)
                    cand[np.isin(part, ask)] = found
                if mine.any():
                    # The row's own distinct row first: its other copies are its nearest neighbors.
                    of = self.distinct.of_row[exclude[part[mine]]]
                    graph = np.full((part.size, 1 + self._graph.shape[1]), -1, dtype=np.int64)
                    graph[mine] = np.column_stack([of, self._graph[of]])
                    cand = graph if cand is None else np.hstack([graph, cand])
                indices[part], distances[part] = rerank_distinct(self._rows, self.distinct, Q[part], cand, k,
                                                                 exclude=exclude[part])
        short = np.flatnonzero((indices < 0).any(axis=1))
        if short.size:
            if self._exact is None:
                self._exact = ExactIndex(self.X_train)
            indices[short], distances[short] = self._exact.search(Q[short], k, exclude[short])
        return indices, distances


def deeper(params, depth, n_rows):
    """pynndescent's parameters ``params`` made ``depth`` steps thicker.

    Each step multiplies the graph degree by 1.5 (at most ``n_rows - 1``),
    divides ``delta`` by 4 (NN-descent stops later) and adds 2 to a set
    ``n_iters``; a set ``max_candidates`` grows with the degree.  On data
    without cluster structure the graph's own recall grows with its degree
    (:func:`graph_neighbors`), which query breadth cannot give its own rows.
    """
    if depth == 0:
        return params
    grow = 1.5**depth
    params = dict(params, n_neighbors=min(int(np.ceil(params["n_neighbors"] * grow)), n_rows - 1),
                  delta=params["delta"] / 4**depth)
    if params.get("n_iters") is not None:
        params["n_iters"] += 2 * depth
    if params.get("max_candidates") is not None:
        params["max_candidates"] = int(np.ceil(params["max_candidates"] * grow))
    return params


@contextmanager
def _numba_threads(n_jobs):
    """Run numba-parallel code (batched queries) on at most ``n_jobs`` threads, as pynndescent's build does."""
    before = numba.get_num_threads()
    if n_jobs not in (None, -1):
        numba.set_num_threads(min(n_jobs, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(before)

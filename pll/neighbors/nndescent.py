"""Approximate k-nearest-neighbor search with a pynndescent index.

The training rows' own neighbors are read from the index's k-NN graph (built
anyway), new rows are searched through the index; both are reranked in
float64 like every backend.  The defaults reach recall@10 >= 0.98 on the
``benchmarks/knn.py`` data (200,000 x 32 blobs); see that script.
"""

from __future__ import annotations

import threading

import numpy as np

from .exact import ExactIndex, rerank

# Index parameters passed on to pynndescent.NNDescent as they are (n_neighbors defaults to graph_neighbors(k)).
INDEX_PARAMS = (
    "n_neighbors",
    "n_trees",
    "leaf_size",
    "n_iters",
    "delta",
    "max_candidates",
    "diversify_prob",
    "pruning_degree_multiplier",
    "low_memory",
    "n_jobs",
)
# Query parameters: pynndescent's search breadth and the candidates fetched per query before reranking.
OPTIONS = INDEX_PARAMS + ("epsilon", "query_k", "random_state")


def graph_neighbors(k):
    """Default graph degree for serving ``k`` neighbors: the graph's own lists answer the training rows.

    25 for k = 10 reaches recall@10 >= 0.98 on the benchmark data (20: about 0.97).
    """
    return max(25, 2 * k + 5)


class NNDescentIndex:
    """A pynndescent index over ``X_train`` that serves up to ``k`` neighbors.

    Parameters
    ----------
    X_train : array of shape (n_train, d)
    k : int
        The most neighbors any search will ask for.
    epsilon : float, default=0.2
        pynndescent's query breadth (larger: better recall, slower queries).
    query_k : int, optional
        Candidates fetched per new query before the float64 rerank
        (default ``2 * k``).
    random_state : int, default=0
    **params
        Passed to :class:`pynndescent.NNDescent` (``n_neighbors``,
        ``n_trees``, ``n_iters``, ``diversify_prob``,
        ``pruning_degree_multiplier``, ...).
    """

    def __init__(self, X_train, k, *, epsilon=0.2, query_k=None, random_state=0, **params):
        from pynndescent import NNDescent

        n_train = X_train.shape[0]
        self.X_train = X_train
        self.epsilon = epsilon
        self.query_k = query_k or 2 * k
        params["n_neighbors"] = min(params.get("n_neighbors") or graph_neighbors(k), n_train - 1)
        self._index = NNDescent(X_train, random_state=random_state, **params)
        self._graph = self._index.neighbor_graph[0]
        self._lock = threading.Lock()
        self._exact = None

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
            self._index.prepare()

    def search(self, Q, k, exclude=None):
        """Indices and float64 distances of the ``k`` nearest training rows of each row of ``Q``.

        Rows with ``exclude >= 0`` are training row ``exclude`` itself: their
        neighbors come from the k-NN graph with the row removed by index.
        Others are searched through the index.  A row left with fewer than
        ``k`` candidates (a sparse graph row) is searched exactly.  See
        :meth:`pll.neighbors.exact.ExactIndex.search` for the return values.
        """
        n_query = Q.shape[0]
        n_train = self.X_train.shape[0]
        exclude = np.full(n_query, -1, dtype=np.int64) if exclude is None else np.asarray(exclude, dtype=np.int64)
        indices = np.empty((n_query, k), dtype=np.int64)
        distances = np.empty((n_query, k))
        own = np.flatnonzero(exclude >= 0)
        new = np.flatnonzero(exclude < 0)
        if own.size:
            indices[own], distances[own] = rerank(self.X_train, Q[own], self._graph[exclude[own]], k, exclude=exclude[own])
        if new.size:
            with self._lock:
                cand, _ = self._index.query(Q[new], k=min(max(k, self.query_k), n_train), epsilon=self.epsilon)
            indices[new], distances[new] = rerank(self.X_train, Q[new], cand, k)
        short = np.flatnonzero((indices < 0).any(axis=1))
        if short.size:
            if self._exact is None:
                self._exact = ExactIndex(self.X_train)
            indices[short], distances[short] = self._exact.search(Q[short], k, exclude[short])
        return indices, distances

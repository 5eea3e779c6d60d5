"""A neighbor index built once over the training rows and queried any number of times."""

from __future__ import annotations

import time

import numpy as np

from ..errors import InvalidParameterError, NeighborsError
from ..validation import check_features, check_queries
from .auto import auto_exact_max_rows
from .backends import local_index
from .exact import ExactIndex
from .recall import measure_recall
from .registry import backend_entry, check_backend, resolve
from .result import NeighborResult


def use_backend(estimator, backend, options=None, keep=()):
    """Point the neighbor searches of ``estimator`` (its ``knn`` and ``knn_params``) at ``backend``.

    Parameters named in ``keep`` (e.g. set explicitly by the user) stay as
    they are, and a kept ``knn`` keeps its options; an estimator without
    these parameters searches no neighbors and is returned unchanged.
    """
    params = estimator.get_params(deep=False)
    updates = {"knn": backend, "knn_params": dict(options or {})}
    keep = {"knn", "knn_params"} if "knn" in keep else set(keep)
    updates = {name: value for name, value in updates.items() if name in params and name not in keep}
    return estimator.set_params(**updates) if updates else estimator


class NeighborIndex:
    """Search structure over ``X_train``, built once, serving every query of a split.

    Parameters
    ----------
    X_train : array of shape (n_train, d)
    k : int, default=10
        The most neighbors a query may ask for.
    backend : {"auto", "exact", "nndescent", "dask"}, default="exact"
        A name of :data:`pll.neighbors.registry.BACKENDS`.  ``auto`` picks
        ``exact`` up to :func:`auto_exact_max_rows` training rows (its option
        ``exact_max_rows``) and ``nndescent`` beyond; :attr:`backend` says which.
    recall_sample : int, default=1000
        Queries checked against exact search to measure an approximate
        backend's recall (0: do not measure).
    random_state : int, default=0
        Seeds the recall sample and the approximate index.
    **options
        Backend options: see :class:`pll.neighbors.nndescent.NNDescentIndex`
        and :class:`pll.neighbors.sharded.ShardedIndex`.

    Attributes
    ----------
    backend : str
        The backend in use (``auto`` resolved).
    approximate : bool
    build_seconds : float

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [1.0], [1.0], [3.0]])
    >>> with NeighborIndex(X, k=2) as index:
    ...     nb = index.kneighbors()
    >>> nb.indices.tolist()
    [[1, 2], [2, 0], [1, 0], [1, 2]]
    """

    def __init__(self, X_train, k=10, backend="exact", *, recall_sample=1000, random_state=0, **options):
        X_train = check_features(X_train, "training rows")
        check_backend(backend, options)
        _check_k(k)
        if k > X_train.shape[0]:
            raise NeighborsError(f"k={k} exceeds the {X_train.shape[0]} training rows")
        if not isinstance(recall_sample, (int, np.integer)) or recall_sample < 0:
            raise InvalidParameterError(f"recall_sample must be a non-negative integer, got {recall_sample!r}")
        backend, options = resolve(backend, options, X_train.shape[0], auto_exact_max_rows(k))
        entry = backend_entry(backend)
        self.X_train, self.k, self.backend = X_train, int(k), backend
        self.recall_sample, self.random_state = int(recall_sample), random_state
        self._exact = None
        t0 = time.perf_counter()
        if "random_state" in entry.options:
            options = {"random_state": random_state, **options}
        if entry.local:
            self._index = local_index(X_train, self.k, backend, options)
        else:
            self._index = entry.index_class()(X_train, self.k, **options)
        self.approximate = self._index.approximate if entry.approximate is None else entry.approximate
        self.build_seconds = time.perf_counter() - t0

    def kneighbors(self, X_query=None, k=None) -> NeighborResult:
        """The ``k`` nearest training rows of each query row.

        Parameters
        ----------
        X_query : array of shape (n_queries, d) or None
            None: the training rows' own neighbors, each row excluded by its
            index (an exact duplicate of a row stays, at distance 0).
        k : int, optional
            At most the ``k`` the index was built for (the default).

        Returns
        -------
        NeighborResult
            Timings ``build``, ``query`` and, for approximate backends,
            ``recall`` (seconds spent measuring it).
        """
        k = self.k if k is None else k
        _check_k(k)
        if k > self.k:
            raise NeighborsError(f"k={k} exceeds the k={self.k} this neighbor index was built for")
        exclude_self = X_query is None
        if exclude_self:
            Q, exclude = self.X_train, np.arange(self.X_train.shape[0])
        else:
            Q, exclude = check_queries(X_query, self.X_train.shape[1]), None
        available = self.X_train.shape[0] - exclude_self
        if k > available:
            raise NeighborsError(f"k={k} exceeds the {available} training rows available as neighbors")
        timings = {"build": self.build_seconds}
        t0 = time.perf_counter()
        indices, distances = self._index.search(Q, k, exclude)
        timings["query"] = time.perf_counter() - t0
        recall = None
        if self.approximate and self.recall_sample:
            t0 = time.perf_counter()
            self._exact = self._exact or ExactIndex(self.X_train)
            recall = measure_recall(
                self.X_train,
                Q,
                distances,
                self_excluded=exclude_self,
                sample=self.recall_sample,
                random_state=self.random_state,
                exact=self._exact,
            )
            timings["recall"] = time.perf_counter() - t0
        return NeighborResult(indices, distances, recall, self.backend, exclude_self, timings)

    def close(self):
        """Release what the index holds elsewhere (Dask shards)."""
        close = getattr(self._index, "close", None)
        if close is not None:
            close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _check_k(k):
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InvalidParameterError(f"k must be a positive integer, got {k!r}")


def kneighbors(X_train, X_query=None, k=10, backend="exact", **options) -> NeighborResult:
    """Find the ``k`` nearest training rows of each query row.

    Parameters
    ----------
    X_train : array of shape (n_train, d)
    X_query : array of shape (n_query, d) or None
        None means the training rows' own neighbors, each row excluded by its
        index (an exact duplicate of a row is a genuine neighbor at distance 0).
    k : int
    backend : {"auto", "exact", "nndescent", "dask"}
    **options
        See :class:`NeighborIndex`.

    Returns
    -------
    NeighborResult
        Indices sorted by float64 distance, ties by lower training index;
        ``recall`` measured for approximate backends, None for exact ones.

    Examples
    --------
    >>> import numpy as np
    >>> nb = kneighbors(np.array([[0.0], [2.0], [3.0]]), np.array([[1.0]]), k=2)
    >>> nb.indices.tolist(), nb.distances.tolist()
    ([[0, 1]], [[1.0, 1.0]])
    """
    X_train = check_features(X_train, "training rows")
    if X_query is not None:
        X_query = check_queries(X_query, X_train.shape[1])
    _check_k(k)
    available = X_train.shape[0] - (X_query is None)
    if k > available:
        raise NeighborsError(f"k={k} exceeds the {available} training rows available as neighbors")
    with NeighborIndex(X_train, k, backend, **options) as index:
        return index.kneighbors(X_query, k)

"""The neighbor result: the one object every method consumes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import NeighborsError


@dataclass(frozen=True, eq=False)
class NeighborResult:
    """The ``k`` nearest training rows of each query, nearest first.

    Attributes
    ----------
    indices : ndarray of shape (n_queries, k), int64
        Training row indices, sorted by distance, ties by lower index.
    distances : ndarray of shape (n_queries, k), float64
        Euclidean distances, recomputed in float64.
    recall : float or None
        Measured recall@k against exact search (None for exact backends).
    backend : str
        The backend that produced the result.
    self_excluded : bool
        True when the queries are the training rows themselves, each row
        excluded from its own neighbors by index.
    timings : dict
        Seconds spent per phase (``build``, ``query``, ...), for logging.
    effort : dict or None
        The settings the search ended with (approximate backends: graph
        degree, query breadth, ``steps`` of escalation), None for exact search.
    decision : str
        Why the search ended as it did: the target recall met, or exact
        search chosen and why (``auto``'s pick, or escalation priced above exact search).
    """

    indices: np.ndarray
    distances: np.ndarray
    recall: float | None = None
    backend: str = "exact"
    self_excluded: bool = False
    timings: dict = field(default_factory=dict)
    effort: dict | None = None
    decision: str = ""

    def __getstate__(self):
        """Pickled (stage cache, Dask transfers) with int32 indices where they fit: half the bytes, same values.

        Distances stay float64: rounding them for storage would let a result
        read from the cache order near-ties differently from a fresh one.
        """
        state = dict(self.__dict__)
        if self.indices.size == 0 or self.indices.max() < np.iinfo(np.int32).max:
            state["indices"] = self.indices.astype(np.int32)
        return state

    def __setstate__(self, state):
        state["indices"] = np.asarray(state["indices"]).astype(np.int64, copy=False)
        self.__dict__.update(state)

    @property
    def k(self) -> int:
        return self.indices.shape[1]

    @property
    def n_queries(self) -> int:
        return self.indices.shape[0]

    def take(self, k, n_queries=None, *, self_excluded=None) -> "NeighborResult":
        """The first ``k`` columns; raise NeighborsError if the result cannot serve the request."""
        if k > self.k:
            raise NeighborsError(f"a method needs {k} neighbors but the neighbor result holds only {self.k}")
        if n_queries is not None and n_queries != self.n_queries:
            raise NeighborsError(
                f"the neighbor result has {self.n_queries} queries but {n_queries} rows were given"
            )
        if self_excluded is not None and self_excluded != self.self_excluded:
            want = "the training rows' own neighbors" if self_excluded else "neighbors of new queries"
            raise NeighborsError(f"expected {want}, got the other kind of neighbor result")
        if k == self.k:
            return self
        return replace(self, indices=self.indices[:, :k], distances=self.distances[:, :k])


def check_indices(indices, n_train):
    """Raise NeighborsError unless every neighbor index names one of ``n_train`` training rows.

    Compiled kernels index training arrays without bounds checks; this guard
    runs at their boundary.
    """
    if indices.size and (indices.min() < 0 or indices.max() >= n_train):
        bad = int(np.argmax(((indices < 0) | (indices >= n_train)).any(axis=1)))
        raise NeighborsError(f"neighbor indices of query row {bad} fall outside the {n_train} training rows")

"""Neighbors among a subset of rows, read from neighbor lists over all of them.

A row's ``k`` nearest rows *of a subset* are the first ``k`` subset rows of
its list of nearest rows over all rows: a row left out of the list is no
nearer than every row in it.  So one search over a split's training rows
also answers the hold-out split's fitting rows, a subset of them, wherever
a list holds ``k`` subset rows; the rest are searched again.  For an exact
list this is exact, with the same order and ties (by lower index: the
subset keeps the rows' order); for an approximate one it is as good as the
list.  The pipeline uses it for PL A-kNN's smoothing neighbors, whose
projection learns nothing from the rows (:mod:`pll.preprocessing`).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import NeighborsError
from .exact import ExactIndex, rerank
from .result import NeighborResult


def subset_list_length(k, fraction, n_rows):
    """How long a list over all ``n_rows`` rows must be to hold ``k`` rows of a random subset holding ``fraction`` of them.

    The count of subset rows in a list of ``L`` is about Binomial(L, f); ``L``
    is the smallest with ``L f - 4 sqrt(L f (1 - f)) >= k`` (four standard
    deviations: on 640,000 rows a few dozen fall short, and are searched
    again), capped at ``n_rows - 1``.  For ``k = 10, f = 0.8``: 22.
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    root = 2.0 * math.sqrt(1.0 - fraction) + math.sqrt(4.0 * (1.0 - fraction) + k)
    return min(math.ceil(root * root / fraction - 1e-9), n_rows - 1)


def restrict_neighbors(indices, subset, k):
    """Each subset row's first ``k`` neighbors that lie in the subset, renumbered to positions in ``subset``.

    Parameters
    ----------
    indices : int array of shape (n, L)
        Every row's nearest other rows, nearest first (-1: none).
    subset : int array of shape (m,)
        Sorted, distinct row numbers.
    k : int

    Returns
    -------
    ndarray of shape (m, k), int64
        Positions in ``subset``, nearest first; -1 fills a row whose list
        holds fewer than ``k`` subset rows.
    """
    subset = np.asarray(subset, dtype=np.int64)
    position = np.full(indices.shape[0] + 1, -1, dtype=np.int64)  # the last entry maps the padding -1
    position[subset] = np.arange(subset.size)
    mapped = position[indices[subset]]
    order = np.argsort(mapped < 0, axis=1, kind="stable")[:, :k]  # subset rows first, in list order
    out = np.take_along_axis(mapped, order, axis=1)
    if out.shape[1] < k:
        out = np.hstack([out, np.full((out.shape[0], k - out.shape[1]), -1, dtype=np.int64)])
    return out


def own_neighbors_from(X, indices, k) -> NeighborResult:
    """The rows' own ``k`` nearest neighbors, given as lists (e.g. :func:`restrict_neighbors`'), as a result.

    Distances are recomputed in float64 and each list reordered by
    (distance, index), as every backend does; a row whose list holds fewer
    than ``k`` rows (-1 entries) is searched exactly over ``X``.
    """
    indices = np.asarray(indices)
    n = X.shape[0]
    if indices.ndim != 2 or indices.shape[0] != n or indices.shape[1] < k:
        raise NeighborsError(f"neighbor lists of shape {indices.shape} cannot give {n} rows {k} neighbors each")
    if indices.size and (indices.max() >= n or indices.min() < -1):
        raise NeighborsError(f"neighbor lists name rows outside the {n} rows")
    rows = np.arange(n)
    candidates = indices[:, :k]
    if (candidates == rows[:, None]).any():
        raise NeighborsError("neighbor lists hold a row as its own neighbor")
    idx, dist = rerank(X, X, candidates, k, exclude=rows)
    short = np.flatnonzero((idx < 0).any(axis=1))
    if short.size:
        idx[short], dist[short] = ExactIndex(X).search(X[short], k, short)
    return NeighborResult(idx, dist, None, "given", True)

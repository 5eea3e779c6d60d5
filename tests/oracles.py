"""Plain references the tests check the library against, written once; ``benchmarks/pl_aknn.py`` times one.

Distances come from coordinate differences in float64 (no BLAS expansion), and
neighbors are ordered by (distance, training index): the order every kNN
backend promises.  This module imports numpy only, so a benchmark can use it
without pytest or hypothesis.
"""

import math

import numpy as np


def distances(A, B):
    """Every pair's float64 Euclidean distance, shape (len(A), len(B))."""
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    return np.sqrt(((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))


def nearest(X_train, X_query=None, k=None):
    """``(indices, distances)`` of the ``k`` nearest training rows of each query, by (distance, index).

    ``X_query=None``: the training rows' own neighbors, each row excluded by
    its index (a duplicate of it stays).  ``k=None``: every training row.
    """
    self_excluded = X_query is None
    D = distances(X_train if self_excluded else X_query, X_train)
    n = D.shape[1]
    k = n - self_excluded if k is None else k
    indices = np.empty((D.shape[0], k), dtype=np.int64)
    for i, row in enumerate(D):
        order = np.lexsort((np.arange(n), row))
        indices[i] = order[order != i][:k] if self_excluded else order[:k]
    return indices, np.take_along_axis(D, indices, 1)


def loop_pl_aknn(order, S, start, n, T, c1, delta):
    """One query, exactly as ALGORITHMS.md describes PL A-kNN; returns (label, decided_at or None, best M of label)."""
    l = S.shape[1]
    A = c1 * math.sqrt(math.log(n) + math.log(l / delta))
    surviving = [y for y in range(l) if start[y]]
    tau = [0] * l
    M = {}
    for k in range(1, T + 1):
        for y in range(l):
            if S[order[k - 1], y]:
                tau[y] += 1
        values = sorted((tau[y] for y in surviving), reverse=True)
        m1 = values[0]
        m2 = values[1] if len(values) > 1 else values[0]
        delta_k = A / math.sqrt(k)
        for y in surviving:
            M[k, y] = math.sqrt(k) * (delta_k - (tau[y] - m2) / k)
        surviving = [y for y in surviving if not ((m1 - tau[y]) / k >= delta_k)]
        if len(surviving) == 1:
            return surviving[0], k, None
    best, label, _ = min((M[k, y], y, k) for y in surviving for k in range(1, T + 1))
    return label, None, best

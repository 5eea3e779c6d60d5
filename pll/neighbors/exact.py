"""Exact brute-force k-nearest-neighbor search, blocked to bound memory."""

from __future__ import annotations

import numpy as np

# Queries per block: the block's distance matrix is block x n_train float64.
_BLOCK_BYTES = 64 * 2**20
# Candidates kept beyond k before the exact float64 re-ranking, to absorb the
# rounding of the BLAS distance expansion at the k-th place.
_SLACK = 8


def exact_kneighbors(X_train, X_query, k, *, exclude_self=False, row_offset=0):
    """Indices and float64 distances of the ``k`` nearest training rows of each query.

    Ordered by distance, ties by lower training index.  With ``exclude_self``
    query ``i`` is training row ``row_offset + i`` and never its own neighbor.
    """
    n_train = X_train.shape[0]
    n_query = X_query.shape[0]
    block = max(1, _BLOCK_BYTES // (8 * max(n_train, 1)))
    sq_train = np.einsum("ij,ij->i", X_train, X_train, dtype=np.float64)
    kk = min(n_train - (1 if exclude_self else 0), k + _SLACK)
    indices = np.empty((n_query, k), dtype=np.int64)
    distances = np.empty((n_query, k), dtype=np.float64)
    for start in range(0, n_query, block):
        stop = min(start + block, n_query)
        Q = X_query[start:stop]
        d2 = sq_train[None, :] - 2.0 * (Q @ X_train.T).astype(np.float64, copy=False)
        d2 += np.einsum("ij,ij->i", Q, Q, dtype=np.float64)[:, None]
        if exclude_self:
            d2[np.arange(stop - start), row_offset + np.arange(start, stop)] = np.inf
        cand = np.argpartition(d2, kk - 1, axis=1)[:, :kk] if kk < n_train else np.argsort(d2, axis=1)[:, :kk]
        idx, dist = rerank(X_train, Q, cand, k)
        indices[start:stop], distances[start:stop] = idx, dist
    return indices, distances


def rerank(X_train, Q, candidates, k):
    """Recompute candidate distances in float64 and keep the ``k`` nearest, ties by lower index."""
    diff = X_train[candidates].astype(np.float64) - np.asarray(Q, dtype=np.float64)[:, None, :]
    dist = np.sqrt(np.einsum("qcd,qcd->qc", diff, diff))
    order = np.lexsort((candidates, dist), axis=1)[:, :k]
    return np.take_along_axis(candidates, order, 1), np.take_along_axis(dist, order, 1)

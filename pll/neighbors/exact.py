"""Exact brute-force k-nearest-neighbor search, blocked to bound memory.

Every backend finishes with :func:`rerank`: candidate distances recomputed in
float64 by one fixed formula, then ordered by (distance, training index).  So
two backends that found the same neighbors return them identically, and exact
search on shards merges into exactly the result of exact search on the whole.
"""

from __future__ import annotations

import numpy as np

from ..progress import blocks, track
from .screening import screening_queries, screening_rows, smallest

# Bytes of scratch memory a block of queries may use (candidate differences, distance rows).
_BLOCK_BYTES = 64 * 2**20
# Bytes of the candidate differences computed at once.
_CHUNK_BYTES = 2**20
# Candidates fetched beyond k, so that the k-th place can be certified despite rounding.
_SLACK = 8


def pair_distances(X_train, Q, candidates):
    """Float64 Euclidean distances from each query row to its candidate training rows.

    Parameters
    ----------
    X_train : array of shape (n_train, d)
    Q : array of shape (n_queries, d)
    candidates : int array of shape (n_queries, c)
        Training row indices; negative entries (padding) get distance inf.

    Returns
    -------
    ndarray of shape (n_queries, c), float64
    """
    n_query, width = candidates.shape
    out = np.empty((n_query, width))
    # Small chunks keep the differences in cache.
    step = max(1, _CHUNK_BYTES // (8 * max(width * X_train.shape[1], 1)))
    for start in range(0, n_query, step):
        rows = slice(start, start + step)
        diff = X_train[candidates[rows]].astype(np.float64)
        diff -= np.asarray(Q[rows], dtype=np.float64)[:, None, :]
        diff *= diff
        # One reduction over the contiguous last axis: a pair gives the same bits wherever it is computed.
        np.sqrt(diff.sum(axis=-1), out=out[rows])
    out[candidates < 0] = np.inf
    return out


def top_k(candidates, distances, k):
    """The ``k`` candidates of each row with the smallest (distance, index); inf entries become -1."""
    order = np.lexsort((candidates, distances), axis=1)[:, :k]
    idx = np.take_along_axis(candidates, order, 1)
    dist = np.take_along_axis(distances, order, 1)
    idx[np.isinf(dist)] = -1
    return idx, dist


def rerank(X_train, Q, candidates, k, *, exclude=None):
    """Recompute candidate distances in float64 and keep the ``k`` nearest, ties by lower index.

    ``exclude`` (int array of shape (n_queries,), -1 for none) names a training
    row that must not be returned for each query: the query itself.  Duplicate
    candidates count once.  Rows with fewer than ``k`` valid candidates are
    padded with index -1 at distance inf.
    """
    candidates = np.array(candidates, dtype=np.int64)
    if candidates.shape[1] < k:
        pad = np.full((candidates.shape[0], k - candidates.shape[1]), -1, dtype=np.int64)
        candidates = np.hstack([candidates, pad])
    candidates.sort(axis=1)
    candidates[:, 1:][candidates[:, 1:] == candidates[:, :-1]] = -1
    if exclude is not None:
        candidates[candidates == np.asarray(exclude)[:, None]] = -1
    return top_k(candidates, pair_distances(X_train, Q, candidates), k)


def rounding_bound(sq_query, sq_max, d, *dtypes):
    """Bound on how far a squared distance expanded as |q|^2 + |x|^2 - 2 q.x in the coarsest of ``dtypes``
    can be from the float64 squared distance of :func:`pair_distances`.

    Dot products and sums of d terms err by at most gamma_n (|q| + |x|)^2 with
    gamma_n = n u / (1 - n u) and u the unit roundoff; a few more terms cover
    the final additions, a square root and the float64 reference itself.
    """
    u = max(np.finfo(t).eps for t in dtypes) / 2
    n = d + 8
    return 4 * n * u / (1 - n * u) * (np.sqrt(sq_query) + np.sqrt(sq_max)) ** 2


def nearest_among(X_train, members, Q, exclude):
    """Exact nearest row among the training rows ``members`` (sorted) for each row of ``Q``, in training indices.

    ``exclude`` (int array of shape (n_queries,), -1 for none) names a training
    row never returned, whether or not it is a member.  Returns indices (-1
    where no member is left) and float64 distances, shape (n_queries,).
    """
    local = np.searchsorted(members, exclude)
    own = (local < members.size) & (members[np.minimum(local, max(members.size - 1, 0))] == exclude)
    idx, dist = ExactIndex(X_train[members]).search(Q, 1, np.where(own, local, -1))
    return np.where(idx[:, 0] >= 0, members[np.maximum(idx[:, 0], 0)], -1), dist[:, 0]


class ExactIndex:
    """Brute-force search over ``X_train``: float32 BLAS screening, certified and reranked in float64.

    Parameters
    ----------
    X_train : array of shape (n_train, d)
    k : int, optional
        Unused (any ``k`` can be searched); taken so that every backend's
        index is built alike (:class:`~pll.neighbors.registry.Backend`).
    """

    def __init__(self, X_train, k=None):
        self.X_train = X_train
        self._center = X_train.mean(axis=0, dtype=np.float64) if X_train.shape[0] else 0.0
        self._screen, self._screen_sq_max = screening_rows(X_train, self._center)

    def search(self, Q, k, exclude=None):
        """Indices and float64 distances of the ``k`` nearest training rows of each row of ``Q``.

        Parameters
        ----------
        Q : array of shape (n_queries, d)
        k : int
        exclude : int array of shape (n_queries,) or None
            Training row never returned for each query (-1: none): the query's
            own row when the queries are training rows.

        Returns
        -------
        indices : ndarray of shape (n_queries, k), int64
            Ordered by distance, ties by lower training index; -1 where fewer
            than ``k`` training rows are available.
        distances : ndarray of shape (n_queries, k), float64
            Inf where the index is -1.

        Notes
        -----
        The float32 screening of :mod:`pll.neighbors.screening` proposes
        ``k + 8`` candidates.  A query is certified when its last candidate
        lies beyond the k-th by more than twice the rounding bound, so no
        row left out can belong to the top k; any other query (many ties,
        duplicates) is searched again over all rows within that bound.
        """
        n_train, d = self.X_train.shape
        n_query = Q.shape[0]
        exclude = np.full(n_query, -1, dtype=np.int64) if exclude is None else np.asarray(exclude, dtype=np.int64)
        kk = min(k, n_train)
        width = min(n_train, kk + _SLACK + 1)
        indices = np.full((n_query, k), -1, dtype=np.int64)
        distances = np.full((n_query, k), np.inf)
        step = max(1, _BLOCK_BYTES // (8 * width * max(d, 1)))
        for rows in track(blocks(n_query, step), "exact search"):
            Qb, ex = Q[rows], exclude[rows]
            B, sq_q = screening_queries(Qb, self._center)
            approx, cand = smallest(self._screen, B, width, ex)
            idx, dist = rerank(self.X_train, Qb, cand, kk, exclude=ex)
            if width < n_train:
                margin = 2 * rounding_bound(sq_q, self._screen_sq_max, d, np.float32)
                unsure = np.flatnonzero(~(approx[:, -1] > approx[:, kk - 1] + margin))
                if unsure.size:
                    idx[unsure], dist[unsure] = self._search_all(Qb[unsure], kk, ex[unsure])
            indices[rows, :kk], distances[rows, :kk] = idx, dist
        return indices, distances

    def _search_all(self, Q, k, exclude):
        """Exact top-k of queries whose k-th place is crowded: every row within the rounding bound is reranked."""
        X = self.X_train
        d = X.shape[1]
        sq_train = np.einsum("ij,ij->i", X, X, dtype=np.float64)
        sq_max = float(sq_train.max())
        indices = np.empty((Q.shape[0], k), dtype=np.int64)
        distances = np.empty((Q.shape[0], k))
        for i in range(Q.shape[0]):
            q = Q[i : i + 1]
            sq_q = float(np.einsum("ij,ij->", q, q, dtype=np.float64))
            d2 = sq_train - 2.0 * (X @ q[0]).astype(np.float64) + sq_q
            if exclude[i] >= 0:
                d2[exclude[i]] = np.inf
            kth = np.partition(d2, k - 1)[k - 1]
            near = np.flatnonzero(d2 <= kth + 2 * rounding_bound(sq_q, sq_max, d, Q.dtype, X.dtype))
            idx, dist = rerank(X, q, near[None], k)
            indices[i], distances[i] = idx[0], dist[0]
        return indices, distances


def exact_kneighbors(X_train, X_query, k, *, exclude=None):
    """Exact top-``k`` of each query row; see :meth:`ExactIndex.search`."""
    return ExactIndex(X_train).search(X_query, k, exclude)

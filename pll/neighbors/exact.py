"""Exact brute-force k-nearest-neighbor search, blocked to bound memory.

Every backend finishes with :func:`rerank`: candidate distances recomputed in
float64 by one fixed formula, then ordered by (distance, training index).  So
two backends that found the same neighbors return them identically, and exact
search on shards merges into exactly the result of exact search on the whole.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..utils.progress import blocks, track
from .distinct import DistinctRows
from .screening import TILE_ROWS, Screen, rounding_gamma, smallest

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
    candidates = _once(candidates, k, None if exclude is None else np.asarray(exclude))
    return top_k(candidates, pair_distances(X_train, Q, candidates), k)


def _once(candidates, width, skip):
    """Candidates sorted, each at most once, ``skip`` (per query, or None) removed, padded to ``width``; -1: none."""
    candidates = np.array(candidates, dtype=np.int64)
    if candidates.shape[1] < width:
        pad = np.full((candidates.shape[0], width - candidates.shape[1]), -1, dtype=np.int64)
        candidates = np.hstack([candidates, pad])
    candidates.sort(axis=1)
    candidates[:, 1:][candidates[:, 1:] == candidates[:, :-1]] = -1
    if skip is not None:
        candidates[candidates == skip[:, None]] = -1
    return candidates


def rerank_distinct(rows, distinct, Q, candidates, k, *, exclude=None):
    """:func:`rerank` of candidates that are distinct rows (:class:`~pll.neighbors.distinct.DistinctRows`
    of the training rows, ``rows`` their values), expanded into the ``k`` nearest training rows."""
    exclude = np.full(Q.shape[0], -1, dtype=np.int64) if exclude is None else np.asarray(exclude, dtype=np.int64)
    candidates = _once(candidates, 0, distinct.excluded(exclude))
    indices = np.full((Q.shape[0], k), -1, dtype=np.int64)
    distances = np.full((Q.shape[0], k), np.inf)
    expand(distinct, candidates, pair_distances(rows, Q, candidates), exclude, indices, distances)
    return indices, distances


def expand(distinct, cand, dist, exclude, indices, distances):
    """Fill ``indices``/``distances`` (n_queries, k) with the training rows of distinct candidates, by (distance, index).

    ``cand`` holds distinct row numbers (-1: none) and ``dist`` their float64
    distances; ``exclude`` a training row skipped for each query (-1: none).
    """
    order = np.lexsort((cand, dist), axis=1)
    _expand(np.take_along_axis(cand, order, 1), np.take_along_axis(dist, order, 1), distinct.offsets,
            distinct.members, exclude, indices, distances)


def rounding_bound(sq_query, sq_max, d, *dtypes):
    """Bound on how far a squared distance expanded as |q|^2 + |x|^2 - 2 q.x in the coarsest of ``dtypes``
    can be from the float64 squared distance of :func:`pair_distances` (:func:`~pll.neighbors.screening.rounding_gamma`)."""
    return rounding_gamma(d, *dtypes) * (np.sqrt(sq_query) + np.sqrt(sq_max)) ** 2


def nearest_among(X_train, members, Q, exclude, index=None):
    """Exact nearest row among the training rows ``members`` (sorted) for each row of ``Q``, in training indices.

    ``exclude`` (int array of shape (n_queries,), -1 for none) names a
    training row never returned, whether or not it is a member.  ``index``,
    an :class:`ExactIndex` over ``X_train[members]``, is reused when given.
    Returns indices (-1 where no member is left) and float64 distances, shape
    (n_queries,).
    """
    local = np.searchsorted(members, exclude)
    own = (local < members.size) & (members[np.minimum(local, max(members.size - 1, 0))] == exclude)
    index = ExactIndex(X_train[members]) if index is None else index
    idx, dist = index.search(Q, 1, np.where(own, local, -1))
    return np.where(idx[:, 0] >= 0, members[np.maximum(idx[:, 0], 0)], -1), dist[:, 0]


class ExactIndex:
    """Brute-force search over ``X_train``: float32 BLAS screening, certified and reranked in float64.

    Identical training rows are searched once (:class:`~pll.neighbors.distinct.DistinctRows`)
    and expanded in index order at the end.  Integer rows and queries are
    screened exactly where float32 holds every partial sum
    (:class:`~pll.neighbors.screening.Screen`): their ties are then certain
    without a float64 recomputation.

    Parameters
    ----------
    X_train : array of shape (n_train, d)
    k : int, optional
        Unused (any ``k`` can be searched); taken so that every backend's
        index is built alike (:class:`~pll.neighbors.registry.Backend`).
    """

    def __init__(self, X_train, k=None):
        self.X_train = X_train
        self.distinct = DistinctRows(X_train)
        self._rows = X_train if self.distinct.all_distinct else X_train[self.distinct.first]
        self._screen = Screen(self._rows, np.float32)
        self._screen64 = None

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
        The float32 screening proposes the ``k + 8`` distinct rows of smallest
        screening value, and their float64 distances bound the k-th distance
        from above.  A query whose last proposal's screening value lies beyond
        that bound plus the rounding (:meth:`Screen.bar`) is certified: no
        row left out can belong to its top k.  Any other query (a crowd of
        near-equal distances at the k-th place) is screened again over every
        distinct row, in float64 unless its float32 values are exact, and keeps
        every row up to that bar.  The rows kept are expanded into training
        rows by (distance, index).
        """
        distinct, screen = self.distinct, self._screen
        n_train, d = self.X_train.shape
        n_query = Q.shape[0]
        exclude = np.full(n_query, -1, dtype=np.int64) if exclude is None else np.asarray(exclude, dtype=np.int64)
        kk = min(k, n_train)
        width = min(distinct.n_distinct, kk + _SLACK + 1)
        indices = np.full((n_query, k), -1, dtype=np.int64)
        distances = np.full((n_query, k), np.inf)
        step = max(1, _BLOCK_BYTES // (8 * width * max(d, 1)))
        for rows in track(blocks(n_query, step), "exact search"):
            Qb, ex = Q[rows], exclude[rows]
            skip = distinct.excluded(ex)
            B, sq_q, gamma = screen.queries(Qb)
            values, cand = smallest(screen.rows, B, width, skip)
            dist = self._distances(Qb, sq_q, gamma, cand, values)
            if width < distinct.n_distinct:
                kth = self._kth(cand, dist, ex, kk)
                bar = screen.bar(kth, sq_q, gamma)
                unsure = np.flatnonzero(~(values[:, -1] > bar))
                if unsure.size:
                    cand, dist = self._rescreen(Qb, ex, kth[unsure], unsure, cand, dist, gamma == 0.0)
            expand(distinct, cand, dist, ex, indices[rows], distances[rows])
        return indices, distances

    def _kth(self, cand, dist, exclude, k):
        """Per query: the float64 distance at which the proposals' training rows (less its own) reach ``k``."""
        distinct = self.distinct
        order = np.argsort(dist, axis=1, kind="stable")
        cand, dist = np.take_along_axis(cand, order, 1), np.take_along_axis(dist, order, 1)
        counts = np.where(cand >= 0, distinct.counts[np.maximum(cand, 0)], 0)
        own = distinct.of_row[np.maximum(exclude, 0)]
        counts -= (cand >= 0) & (exclude[:, None] >= 0) & (cand == own[:, None])
        total = np.cumsum(counts, axis=1)
        at = np.argmax(total >= np.minimum(k, total[:, -1])[:, None], axis=1)
        return dist[np.arange(dist.shape[0]), at]

    def _rescreen(self, Q, exclude, kth, unsure, cand, dist, exact):
        """Replace the proposals of the ``unsure`` queries by every distinct row up to their bar (from ``kth``).

        Queries whose float32 values are ``exact`` are screened again in
        float32, the others in float64, whose rounding is tight enough to
        separate near-ties that float32 cannot.
        """
        skip = self.distinct.excluded(exclude[unsure])
        found = []
        for in64 in (False, True):
            part = unsure[exact[unsure] != in64]
            if part.size:
                if in64 and self._screen64 is None:
                    self._screen64 = Screen(self._rows, np.float64)
                screen = self._screen64 if in64 else self._screen
                B, sq_q, gamma = screen.queries(Q[part])
                where = exact[unsure] != in64
                c, v = _up_to(screen.rows, B, screen.bar(kth[where], sq_q, gamma), skip[where])
                found.append((part, c, self._distances(Q[part], sq_q, gamma, c, v)))
        width = max(cand.shape[1], *(c.shape[1] for _, c, _ in found))
        cand = np.pad(cand, ((0, 0), (0, width - cand.shape[1])), constant_values=-1)
        dist = np.pad(dist, ((0, 0), (0, width - dist.shape[1])), constant_values=np.inf)
        for part, c, v in found:
            cand[part], dist[part] = -1, np.inf
            cand[part, : c.shape[1]], dist[part, : c.shape[1]] = c, v
        return cand, dist

    def _distances(self, Q, sq_q, gamma, cand, values):
        """Float64 distances of distinct candidates: from exact screening values, else :func:`pair_distances`."""
        exact = gamma == 0.0
        dist = np.empty(cand.shape)
        dist[exact] = Screen.exact_distances(values[exact], sq_q[exact, None])
        dist[exact[:, None] & (cand < 0)] = np.inf
        if not exact.all():
            dist[~exact] = pair_distances(self._rows, Q[~exact], cand[~exact])
        return dist


def _up_to(rows, B, bar, skip):
    """Every row whose screening value is at most ``bar`` (per query), but ``skip``, and that value.

    Returns candidates padded with -1 to the longest list, shape (n_queries,
    width), and their values (inf in the padding).
    """
    found_q, found_u, found_v = [], [], []
    for lo in range(0, rows.shape[0], TILE_ROWS):
        values = B @ rows[lo : lo + TILE_ROWS].T
        q, u = np.nonzero(values <= bar[:, None])
        keep = u + lo != skip[q]
        q, u = q[keep], u[keep]
        found_q.append(q), found_u.append(u + lo), found_v.append(values[q, u])
    q, u, v = (np.concatenate(found) for found in (found_q, found_u, found_v))
    order = np.argsort(q, kind="stable")
    q, u, v = q[order], u[order], v[order]
    sizes = np.bincount(q, minlength=B.shape[0])
    slot = np.arange(q.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    cand = np.full((B.shape[0], max(int(sizes.max(initial=0)), 1)), -1, dtype=np.int64)
    values = np.full(cand.shape, np.inf, dtype=rows.dtype)
    cand[q, slot], values[q, slot] = u, v
    return cand, values


@njit(cache=True, nogil=True)
def _expand(cand, dist, offsets, members, exclude, indices, distances):
    """Fill each query's ``indices``/``distances`` from distinct rows sorted by (distance, number).

    Distinct rows at one distance are expanded together, their training rows
    in index order; the query's excluded row is skipped.  Rows left unfilled
    keep -1 and inf.
    """
    n_query, width = cand.shape
    k = indices.shape[1]
    for i in range(n_query):
        filled, j = 0, 0
        while filled < k and j < width and cand[i, j] >= 0:
            stop = j + 1
            while stop < width and cand[i, stop] >= 0 and dist[i, stop] == dist[i, j]:
                stop += 1
            if stop - j == 1:
                tied = members[offsets[cand[i, j]] : offsets[cand[i, j] + 1]]
            else:
                tied = np.empty(sum([offsets[u + 1] - offsets[u] for u in cand[i, j:stop]]), dtype=np.int64)
                at = 0
                for u in cand[i, j:stop]:
                    tied[at : at + offsets[u + 1] - offsets[u]] = members[offsets[u] : offsets[u + 1]]
                    at += offsets[u + 1] - offsets[u]
                tied.sort()
            for row in tied:
                if row != exclude[i]:
                    indices[i, filled], distances[i, filled] = row, dist[i, j]
                    filled += 1
                    if filled == k:
                        break
            j = stop


def exact_kneighbors(X_train, X_query, k, *, exclude=None):
    """Exact top-``k`` of each query row; see :meth:`ExactIndex.search`."""
    return ExactIndex(X_train).search(X_query, k, exclude)

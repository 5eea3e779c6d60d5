"""Identical training rows grouped once, so that a search handles each distinct row once.

Real tables repeat rows: binary, one-hot, count and bag-of-words features
often do, and every search that orders ties by training index would
otherwise meet a crowd of equal distances at the k-th place.  Identical rows
lie at bit-identical float64 distances from any query
(:func:`~pll.neighbors.exact.pair_distances` computes a pair from its
values alone), so a search may run over the distinct rows and expand each
into its members, in index order, at the end.
"""

from __future__ import annotations

import numpy as np
from numba import njit


class DistinctRows:
    """The distinct rows of ``X`` and the training rows each one stands for.

    Distinct rows are numbered in the order of their first occurrence, so
    that ordering them by number orders them by their lowest training index.

    Parameters
    ----------
    X : array of shape (n, d)

    Attributes
    ----------
    first : int64 array of shape (m,)
        The lowest training index of each distinct row, ascending.
    offsets : int64 array of shape (m + 1,)
        Distinct row ``u`` stands for ``members[offsets[u]:offsets[u + 1]]``.
    members : int64 array of shape (n,)
        Training indices grouped by distinct row, ascending within a group.
    of_row : int64 array of shape (n,)
        The distinct row of each training row.

    Examples
    --------
    >>> import numpy as np
    >>> rows = DistinctRows(np.array([[1.0], [0.0], [1.0], [2.0], [0.0]]))
    >>> rows.first.tolist(), rows.members.tolist(), rows.of_row.tolist()
    ([0, 1, 3], [0, 2, 1, 4, 3], [0, 1, 0, 2, 1])
    """

    def __init__(self, X):
        X = np.ascontiguousarray(X)
        n = X.shape[0]
        of_row = _group_rows(X)
        # Number the groups by first occurrence: the first member of every group, in index order.
        firsts = np.flatnonzero(of_row == np.arange(n))
        number = np.empty(n, dtype=np.int64)
        number[firsts] = np.arange(firsts.size)
        self.of_row = number[of_row]
        self.first = firsts
        self.members = np.argsort(self.of_row, kind="stable")
        self.offsets = np.zeros(firsts.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.of_row, minlength=firsts.size), out=self.offsets[1:])

    @property
    def n_distinct(self) -> int:
        return self.first.size

    @property
    def all_distinct(self) -> bool:
        return self.first.size == self.of_row.size

    @property
    def counts(self):
        """Training rows per distinct row, int64 array of shape (m,)."""
        return np.diff(self.offsets)

    def excluded(self, exclude):
        """Distinct rows to skip for each query: the excluded training row's, when it stands alone (-1: none)."""
        exclude = np.asarray(exclude, dtype=np.int64)
        own = np.where(exclude >= 0, self.of_row[np.maximum(exclude, 0)], -1)
        alone = (own >= 0) & (self.counts[np.maximum(own, 0)] == 1)
        return np.where(alone, own, -1)


def _group_rows(X):
    """For each row, the lowest index of a row identical to it (bytes compared, after a 64-bit hash)."""
    n = X.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    row_bytes = X.reshape(n, -1).view(np.uint8)
    word = next(t for t in (np.uint64, np.uint32, np.uint16, np.uint8) if row_bytes.shape[1] % np.dtype(t).itemsize == 0)
    words = row_bytes.view(word)
    hashes = _row_hashes(words)
    order = np.argsort(hashes, kind="stable")
    return _first_equal(words, hashes, order)


@njit(cache=True, nogil=True)
def _row_hashes(words):
    """FNV-1a over each row's words."""
    n, width = words.shape
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        h = np.uint64(14695981039346656037)
        for j in range(width):
            h = (h ^ np.uint64(words[i, j])) * np.uint64(1099511628211)
        out[i] = h
    return out


@njit(cache=True, nogil=True)
def _first_equal(words, hashes, order):
    """Lowest index of an identical row, for each row; rows of one hash run compared byte by byte.

    ``order`` sorts the hashes stably, so a run lists its rows in index order
    and each row is compared with the run's earlier group leaders only.
    """
    n, width = words.shape
    out = np.arange(n)
    start = 0
    while start < n:
        stop = start + 1
        while stop < n and hashes[order[stop]] == hashes[order[start]]:
            stop += 1
        if stop - start == 1:
            start = stop
            continue
        leaders = [order[start]]
        for p in range(start + 1, stop):
            row = order[p]
            for leader in leaders:
                if _same(words[row], words[leader]):
                    out[row] = leader
                    break
            if out[row] == row:
                leaders.append(row)
        start = stop
    return out


@njit(cache=True, nogil=True)
def _same(a, b):
    for j in range(a.size):
        if a[j] != b[j]:
            return False
    return True

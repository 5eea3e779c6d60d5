"""Float32 screening values from one BLAS product: cheap candidates for searches certified in float64.

Training rows are centered (the rounding bound grows with the norms) and
extended by their squared norm, queries by a one, so that a single float32
matrix product gives ``|x|^2 - 2 q.x`` for every pair: the squared distance
less ``|q|^2``, which orders a query's candidates as the distance does.
:func:`pll.neighbors.exact.rounding_bound` with ``np.float32`` bounds its error.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..utils.progress import blocks, track_in_parallel

# Training rows screened by one matrix product.
TILE_ROWS = 4096
# Queries screened together: their values for one tile stay in cache.
QUERY_BLOCK = 256


def screening_rows(X, center, shrink=0.0, dtype=np.float32):
    """Rows ``[x - center, (1 - shrink) |x - center|^2]`` in ``dtype``, and the squared norms (float64)."""
    n, d = X.shape
    centered = np.asarray(X, dtype=np.float64) - center
    sq = np.einsum("ij,ij->i", centered, centered)
    rows = np.empty((n, d + 1), dtype=dtype)
    rows[:, :d] = centered
    rows[:, d] = (1.0 - shrink) * sq
    return rows, sq


def screening_queries(Q, center, dtype=np.float32):
    """Rows ``[-2 (q - center), 1]`` in ``dtype`` and the squared norms ``|q - center|^2`` (float64)."""
    centered = np.asarray(Q, dtype=np.float64) - center
    sq = np.einsum("ij,ij->i", centered, centered)
    return np.hstack([-2.0 * centered, np.ones((centered.shape[0], 1))]).astype(dtype), sq


def rounding_gamma(d, *dtypes):
    """``g`` such that a squared distance expanded as |q|^2 + |x|^2 - 2 q.x in the coarsest of ``dtypes`` lies
    within ``g (|q| + |x|)^2`` of the float64 squared distance of :func:`~pll.neighbors.exact.pair_distances`.

    Dot products and sums of d terms err by at most gamma_n (|q| + |x|)^2 with
    gamma_n = n u / (1 - n u) and u the unit roundoff; a few more terms cover
    the final additions, a square root and the float64 reference itself.
    """
    u = max(np.finfo(t).eps for t in dtypes) / 2
    n = d + 8
    return 4 * n * u / (1 - n * u)


# Rows sampled for the screening's center: any center is correct, a central one keeps the norms small.
_CENTER_SAMPLE = 2048
# Rows checked at once for whole numbers: continuous data fails on the first block.
_INTEGRAL_BLOCK = 4096


def integral_rows(X):
    """Rows whose values are all whole numbers, bool array of shape (n,)."""
    return (np.asarray(X) == np.round(X)).all(axis=1)


def all_integral(X):
    """True when every value of ``X`` is a whole number; stops at the first block that has another."""
    return all(integral_rows(X[lo : lo + _INTEGRAL_BLOCK]).all() for lo in range(0, X.shape[0], _INTEGRAL_BLOCK))


class Screen:
    """Screening rows of ``X`` in ``dtype`` and the bound that certifies a search over them.

    With ``x`` and ``q`` centered, ``t = |x - q|^2 - |q|^2`` (from the float64
    distance of :func:`~pll.neighbors.exact.pair_distances`) and ``s`` the
    screening value of the row ``[x, (1 - 2h) |x|^2]`` against ``[-2 q, 1]``,

        t >= s - L(q),    L(q) = 2 g |q|^2 + max(2 g - 2h, 0) |x|max^2,

    from ``|s - (t - 2h |x|^2)| <= g (|q| + |x|)^2 <= 2 g (|q|^2 + |x|^2)``
    (:func:`rounding_gamma`).  Rows are shrunk (``h = g``) so that ``L`` does
    not grow with the largest row: a few rows of huge norm (a density
    transform divided by a zero distance) leave the bound of every query as
    tight as its own norm allows.  Integer rows are centered on an integer
    point and not shrunk: against an integer query whose every partial sum
    stays within the mantissa the values are exact (``g = 0``, in any order of
    summation), so ties among them are certain without a float64 recomputation.

    Parameters
    ----------
    X : array of shape (n, d)
    dtype : {np.float32, np.float64}

    Attributes
    ----------
    rows : array of shape (n, d + 1), ``dtype``
    sq : float64 array of shape (n,)
        Squared centered norms.
    sq_max : float
    center : float64 array of shape (d,)
    """

    def __init__(self, X, dtype=np.float32):
        n, d = X.shape
        self.dtype = np.dtype(dtype)
        self.integral = all_integral(X)
        # The median of evenly spaced rows: a few rows of huge norm would pull a mean, and every centered norm
        # with it, far out.
        center = np.median(X[:: max(1, n // _CENTER_SAMPLE)], axis=0).astype(np.float64) if n else np.zeros(d)
        self.center = np.round(center) if self.integral else center
        self.gamma = rounding_gamma(d, self.dtype)
        self.shrink = 0.0 if self.integral else 2 * self.gamma
        self.rows, self.sq = screening_rows(X, self.center, self.shrink, self.dtype)
        self.sq_max = float(self.sq.max(initial=0.0))

    def queries(self, Q):
        """Query rows, their squared centered norms (float64), and each query's ``g`` (0 where values are exact)."""
        B, sq_q = screening_queries(Q, self.center, self.dtype)
        gamma = np.full(sq_q.shape, self.gamma)
        if self.integral:
            limit = 2.0 ** (np.finfo(self.dtype).nmant + 1)
            gamma[integral_rows(Q) & (self.sq_max + 2 * np.sqrt(sq_q * self.sq_max) < limit)] = 0.0
        return B, sq_q, gamma

    @staticmethod
    def exact_distances(values, sq_q):
        """Float64 distances from exact screening values (``g = 0``): ``sqrt(s + |q|^2)``, bit for bit
        :func:`~pll.neighbors.exact.pair_distances`' (both sum the same whole numbers)."""
        return np.sqrt(np.maximum(values.astype(np.float64) + sq_q, 0.0))

    def margin(self, sq_q, gamma, sq_x):
        """How far above row ``x``'s screening value another row's may lie and still be as near, per query.

        ``L(q) + U(q, x)``, with ``U(q, x) = 2 g |q|^2 + (2 g + 2h) |x|^2`` bounding
        ``t - s`` from above as ``L`` bounds ``s - t``.
        """
        return 4 * gamma * sq_q + np.maximum(2 * gamma - self.shrink, 0.0) * self.sq_max + (2 * gamma + self.shrink) * sq_x

    def bar(self, kth, sq_q, gamma):
        """Per query: the screening value above which a row lies farther than ``kth`` (a float64 distance)."""
        sq_kth = kth.astype(np.float64) ** 2
        slack = 8 * np.finfo(np.float64).eps * (sq_kth + sq_q)  # squaring the distance, subtracting |q|^2
        return sq_kth - sq_q + slack + 2 * gamma * sq_q + np.maximum(2 * gamma - self.shrink, 0.0) * self.sq_max


def smallest(A, B, width, exclude):
    """The ``width`` smallest screening values of each query and their training rows, ascending.

    Blocks of :data:`QUERY_BLOCK` queries run on one thread per CPU, each with
    a single-threaded BLAS (:func:`~pll.utils.progress.track_in_parallel`): the
    insertion kernel then runs in parallel too, and no BLAS thread pool has to
    wake up for every tile.

    Parameters
    ----------
    A : float32 array of shape (n_train, d + 1), from :func:`screening_rows`
    B : float32 array of shape (n_queries, d + 1), from :func:`screening_queries`
    width : int
    exclude : int array of shape (n_queries,)
        A training row never returned for each query (-1: none).

    Returns
    -------
    values : float32 array of shape (n_queries, width)
        ``inf`` where fewer rows are available.
    indices : int64 array of shape (n_queries, width)
        -1 where the value is ``inf``.
    """
    n_query = B.shape[0]
    values = np.full((n_query, width), np.inf, dtype=np.float32)
    indices = np.full((n_query, width), -1, dtype=np.int64)

    def screen_block(rows):
        tile = np.empty((rows.stop - rows.start, min(TILE_ROWS, A.shape[0])), dtype=np.float32)
        for lo in range(0, A.shape[0], TILE_ROWS):
            part = tile[:, : min(TILE_ROWS, A.shape[0] - lo)]
            np.matmul(B[rows], A[lo : lo + part.shape[1]].T, out=part)
            _keep_smallest(part, lo, exclude[rows], values[rows], indices[rows])

    track_in_parallel(screen_block, blocks(n_query, QUERY_BLOCK), "screening")
    return values, indices


# Compiled (or loaded from numba's cache) on import: a first compilation inside the pipeline's task
# threads, concurrent with others, left numba unable to compile pynndescent later in the process.
@njit("void(float32[:, :], int64, int64[:], float32[:, :], int64[:, :])", cache=True, nogil=True)
def _keep_smallest(values_tile, first_row, exclude, values, indices):
    """Insert a tile's values into each query's ascending list of the smallest, skipping its excluded row.

    Past the first tiles almost every value exceeds the list's last entry, so
    the loop is one comparison per pair.
    """
    n_query, n_rows = values_tile.shape
    width = values.shape[1]
    for i in range(n_query):
        kept, rows = values[i], indices[i]
        worst = kept[width - 1]
        for j in range(n_rows):
            v = values_tile[i, j]
            if v < worst and first_row + j != exclude[i]:
                p = width - 1
                while p > 0 and kept[p - 1] > v:
                    kept[p] = kept[p - 1]
                    rows[p] = rows[p - 1]
                    p -= 1
                kept[p] = v
                rows[p] = first_row + j
                worst = kept[width - 1]

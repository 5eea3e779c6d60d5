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

from ..progress import blocks, track_in_parallel

# Training rows screened by one matrix product.
TILE_ROWS = 4096
# Queries screened together: their values for one tile stay in cache.
QUERY_BLOCK = 256


def screening_rows(X, center):
    """Float32 rows ``[x - center, |x - center|^2]`` and the largest squared norm, as a float."""
    centered = np.asarray(X, dtype=np.float64) - center
    sq = np.einsum("ij,ij->i", centered, centered)
    return np.hstack([centered, sq[:, None]]).astype(np.float32), float(sq.max(initial=0.0))


def screening_queries(Q, center):
    """Float32 rows ``[-2 (q - center), 1]`` and the squared norms ``|q - center|^2`` (float64)."""
    centered = np.asarray(Q, dtype=np.float64) - center
    sq = np.einsum("ij,ij->i", centered, centered)
    return np.hstack([-2.0 * centered, np.ones((centered.shape[0], 1))]).astype(np.float32), sq


def smallest(A, B, width, exclude):
    """The ``width`` smallest screening values of each query and their training rows, ascending.

    Blocks of :data:`QUERY_BLOCK` queries run on one thread per CPU, each with
    a single-threaded BLAS (:func:`~pll.progress.track_in_parallel`): the
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

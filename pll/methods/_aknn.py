"""PL A-kNN label elimination, compiled: one query at a time, stopping at its first decisive step.

Most queries are decided after a few neighbors, so walking each query's
neighbors in order and leaving as soon as one label survives does far less
work than stepping all queries through all ``T`` neighborhood sizes.  Only
the surviving labels are touched at each step: they are kept as an ascending
list that is compacted in place after every elimination.  ``M`` values and
elimination thresholds come from the tables of :mod:`pll.methods._pl_aknn`,
built with the very floating-point expressions of the definition, so the
kernel's arithmetic is integer apart from look-ups and the final score.

For the reasons of a rejection (:mod:`pll.methods.reasons`) the kernel also tells,
for a query whose labels still tie after ``T`` neighbors, whether some
neighbor separates two of the survivors (its bag holds one and not the
other): a conflict; otherwise every bag held all survivors or none, and no
amount of such evidence could tell them apart.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

from ..neighbors.result import check_indices


def eliminate(indices, bags, candidates, leads, m_table, scale, *, evidence=False):
    """Run the elimination of every query over its neighbors, in order.

    Parameters
    ----------
    indices : int array of shape (n, T)
        Neighbor rows (into ``bags``) of each query, nearest first.
    bags : bool array of shape (n_train, l)
        Training bags.
    candidates : bool array of shape (n, l)
        Each query's starting set of labels, none of them empty.
    leads : int64 array of shape (T,)
        :func:`pll.methods._pl_aknn.elimination_leads`.
    m_table : float64 array of shape (T, 2·T + 2)
        :func:`pll.methods._pl_aknn.m_values`.
    scale : float
        ``A``, which the score of an undecided query is divided by.

    Returns
    -------
    labels : int64 ndarray of shape (n,)
    score : float64 ndarray of shape (n,)
        ``(T + 1 − k*) / T`` when a single label is left after ``k*`` steps,
        else ``min(0, −min M / A)`` over the survivors.
    guess : bool ndarray of shape (n,)
        Undecided queries whose smallest ``M`` is shared by several survivors.
    split : bool ndarray of shape (n,)
        Only with ``evidence``: undecided queries with a neighbor (of the
        ``T``) whose bag holds some survivors but not all; False for decided ones.
    """
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    n_train = bags.shape[0]
    check_indices(indices, n_train)
    n = indices.shape[0]
    labels = np.empty(n, dtype=np.int64)
    score = np.empty(n, dtype=np.float64)
    guess = np.zeros(n, dtype=np.bool_)
    split = np.zeros(n, dtype=np.bool_)
    _eliminate_kernel(
        indices,
        np.ascontiguousarray(bags, dtype=np.bool_).view(np.uint8),
        np.ascontiguousarray(candidates, dtype=np.bool_),
        np.ascontiguousarray(leads, dtype=np.int64),
        np.ascontiguousarray(m_table, dtype=np.float64),
        float(scale),
        labels,
        score,
        guess,
        split,
    )
    if evidence:
        return labels, score, guess, split
    return labels, score, guess


def _read(dtype, ndim):
    """A C-contiguous array the kernel only reads: readonly arrays (a memory-mapped model) pass too."""
    return types.Array(dtype, ndim, "C", readonly=True)


# Explicit types compile the kernel on import, not on a first call inside concurrent task threads
# (see pll/neighbors/screening.py).
@njit(
    types.void(
        _read(types.int64, 2),
        _read(types.uint8, 2),
        _read(types.boolean, 2),
        _read(types.int64, 1),
        _read(types.float64, 2),
        types.float64,
        types.int64[::1],
        types.float64[::1],
        types.boolean[::1],
        types.boolean[::1],
    ),
    cache=True,
    nogil=True,
)
def _eliminate_kernel(indices, bags, candidates, leads, m_table, scale, labels, score, guess, split):
    n, T = indices.shape
    n_classes = candidates.shape[1]
    alive = np.empty(n_classes, dtype=np.int64)  # surviving labels, ascending, in alive[:n_alive]
    tau = np.empty(n_classes, dtype=np.int64)
    best = np.empty(n_classes, dtype=np.float64)  # smallest M recorded so far
    for q in range(n):
        n_alive = 0
        for y in range(n_classes):
            if candidates[q, y]:
                alive[n_alive] = y
                n_alive += 1
                tau[y] = 0
                best[y] = np.inf
        for k in range(1, T + 1):
            row = indices[q, k - 1]
            # m1, how many survivors share it, and the largest count below it (-1: none).
            m1 = -1
            n_top = 0
            below = -1
            for i in range(n_alive):
                y = alive[i]
                t = tau[y] + bags[row, y]
                tau[y] = t
                if t > m1:
                    below = m1
                    m1 = t
                    n_top = 1
                elif t == m1:
                    n_top += 1
                elif t > below:
                    below = t
            m2 = below if n_top == 1 and below >= 0 else m1
            column = k + 1 - m2  # M[k, y] sits in column τ_y − m2 + k + 1
            reach = m1 - leads[k - 1]  # y is eliminated when τ_y <= reach
            kept = 0
            for i in range(n_alive):
                y = alive[i]
                v = m_table[k - 1, tau[y] + column]
                if v < best[y]:
                    best[y] = v
                if tau[y] > reach:
                    alive[kept] = y
                    kept += 1
            n_alive = kept
            if n_alive == 1:
                labels[q] = alive[0]
                score[q] = (T + 1 - k) / T
                break
        if n_alive > 1:
            # The paper's criterion: the survivor with the smallest M (ties: lower label).
            lowest = np.inf
            pick = -1
            ties = 0
            for i in range(n_alive):
                y = alive[i]
                if best[y] < lowest:
                    lowest = best[y]
                    pick = y
                    ties = 1
                elif best[y] == lowest:
                    ties += 1
            labels[q] = pick
            score[q] = min(0.0, -lowest / scale)
            guess[q] = ties > 1
            for k in range(T):  # does some neighbor hold some survivors but not all?
                row = indices[q, k]
                held = 0
                for i in range(n_alive):
                    held += bags[row, alive[i]]
                if held > 0 and held < n_alive:
                    split[q] = True
                    break

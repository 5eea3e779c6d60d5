"""IPAL's compiled kernels and the rules on their output, apart from the estimator so that each can be tested alone.

:func:`nnls_weights` (non-negative reconstruction weights of each row over
its neighbors), :func:`propagate` (the paper's iterative label propagation
restricted to bags), :func:`class_errors` (the reconstruction error of a
query by the neighbors of each disambiguated class), and the decisions
:func:`decide_errors` and :func:`decide_confidences` with their tie
tolerances.  :class:`pll.methods._ipal.Ipal` composes them.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

from ..utils._random import pick_among
from ..errors import InvalidDataError
from ..neighbors.result import check_indices
from ..utils.progress import blocks, track

# Errors (and class-mass-normalised confidences) within this relative distance of the best count as tied.
TIE_RTOL = 1e-9
# ... and, for errors, also within this fraction of the query's norm (two classes reconstructing it
# almost perfectly are tied, whatever rounding left of their errors).
TIE_ATOL = 1e-12
# Lawson-Hanson on the Gram matrix: a variable joins the passive set while its gradient exceeds
# GRADIENT_RTOL·‖x‖·max_j‖x_j‖, and only if its column is not (numerically) in the span of the
# passive columns: the squared Cholesky pivot must exceed PIVOT_RTOL times its squared norm.
GRADIENT_RTOL = 1e-12
PIVOT_RTOL = 1e-12
# Training rows per block of the weight computation (only for progress reports: memory does not grow).
WEIGHT_BLOCK_ROWS = 65536


def _read(dtype, ndim):
    """A C-contiguous array the kernel only reads: readonly arrays (a memory-mapped model) pass too."""
    return types.Array(dtype, ndim, "C", readonly=True)


@njit(cache=True, nogil=True)
def _cholesky_solve(G, c, order, p, L, y, s):
    """Solve ``G[P, P] s[P] = c[P]`` for the passive set ``P = order[:p]`` by Cholesky.

    Writes ``s[order[t]]`` for ``t < p``.  Returns False (and writes nothing
    useful) when the last pivot shows ``order[p - 1]`` numerically dependent
    on the earlier columns.
    """
    for t in range(p):
        i = order[t]
        for u in range(t + 1):
            j = order[u]
            v = G[i, j]
            for w in range(u):
                v -= L[t, w] * L[u, w]
            if u < t:
                L[t, u] = v / L[u, u]
            else:
                if v <= PIVOT_RTOL * G[i, i] or v <= 0.0:
                    return False
                L[t, t] = np.sqrt(v)
    for t in range(p):  # L y = c[P]
        v = c[order[t]]
        for w in range(t):
            v -= L[t, w] * y[w]
        y[t] = v / L[t, t]
    for t in range(p - 1, -1, -1):  # Lᵀ s = y
        v = y[t]
        for w in range(t + 1, p):
            v -= L[w, t] * s[order[w]]
        s[order[t]] = v / L[t, t]
    return True


@njit(cache=True, nogil=True)
def _nnls_gram(G, c, scale, z, passive, blocked, order, L, y, s):
    """Lawson and Hanson's active-set method for ``min ½ zᵀGz − cᵀz`` subject to ``z ≥ 0``.

    With ``G = AᵀA`` and ``c = Aᵀb`` this is ``min ‖Az − b‖²``, ``z ≥ 0``; the
    iterates are those of the classical algorithm (which works on ``A``), the
    passive-set least-squares problems solved through the Cholesky factor of
    ``G[P, P]``.  ``scale`` (``‖b‖·max_j ‖a_j‖``) sets the gradient tolerance.
    """
    k = c.size
    for j in range(k):
        z[j] = 0.0
        passive[j] = False
        blocked[j] = False
    p = 0
    tol = GRADIENT_RTOL * scale
    for _ in range(3 * k):
        best = -1
        best_gradient = tol
        for j in range(k):
            if passive[j] or blocked[j]:
                continue
            g = c[j]
            for t in range(p):
                g -= G[j, order[t]] * z[order[t]]
            if g > best_gradient:
                best_gradient = g
                best = j
        if best < 0:
            break
        order[p] = best
        if not _cholesky_solve(G, c, order, p + 1, L, y, s) or s[best] <= 0.0:
            blocked[best] = True  # dependent, or it would leave at once: try the next best gradient
            continue
        passive[best] = True
        p += 1
        while True:
            step = 2.0
            leaving = -1
            for t in range(p):
                i = order[t]
                if s[i] <= 0.0:
                    a = z[i] / (z[i] - s[i])
                    if a < step:
                        step = a
                        leaving = i
            if leaving < 0:
                for t in range(p):
                    z[order[t]] = s[order[t]]
                break
            kept = 0
            for t in range(p):
                i = order[t]
                z[i] += step * (s[i] - z[i])
                if i == leaving or z[i] <= 0.0:
                    z[i] = 0.0
                    passive[i] = False
                else:
                    order[kept] = i
                    kept += 1
            p = kept
            if p == 0:
                break
            _cholesky_solve(G, c, order, p, L, y, s)  # a subset of independent columns stays independent
        for j in range(k):
            blocked[j] = False


@njit(
    types.void(_read(types.float64, 2), _read(types.float64, 2), _read(types.int64, 2), types.float64[:, ::1]),
    cache=True,
    nogil=True,
)
def _nnls_kernel(points, queries, indices, weights):
    n, k = indices.shape
    d = points.shape[1]
    G = np.empty((k, k))
    c = np.empty(k)
    L = np.empty((k, k))
    y = np.empty(k)
    s = np.empty(k)
    passive = np.empty(k, dtype=np.bool_)
    blocked = np.empty(k, dtype=np.bool_)
    order = np.empty(k, dtype=np.int64)
    for q in range(n):
        bb = 0.0
        for t in range(d):
            bb += queries[q, t] * queries[q, t]
        top = 0.0
        for a in range(k):
            pa = indices[q, a]
            v = 0.0
            for t in range(d):
                v += points[pa, t] * queries[q, t]
            c[a] = v
            for b in range(a + 1):
                pb = indices[q, b]
                v = 0.0
                for t in range(d):
                    v += points[pa, t] * points[pb, t]
                G[a, b] = v
                G[b, a] = v
            top = max(top, G[a, a])
        _nnls_gram(G, c, np.sqrt(bb * top), weights[q], passive, blocked, order, L, y, s)


def nnls_weights(points, queries, indices, *, progress=None):
    """Non-negative reconstruction weights of each query over its neighbors.

    Row ``q`` solves ``min ‖queries[q] − Σ_a w_a · points[indices[q, a]]‖²``
    subject to ``w ≥ 0`` (Lawson and Hanson's active-set method on the
    ``k × k`` Gram matrix; it agrees with :func:`scipy.optimize.nnls` to
    rounding where the neighbors are linearly independent, and otherwise
    returns another minimiser, with the same error).

    Parameters
    ----------
    points : array of shape (n_points, d)
    queries : array of shape (n, d)
    indices : int array of shape (n, k)
        Rows of ``points``.
    progress : str, optional
        Names the loop in progress reports (:func:`pll.utils.progress.track`);
        None reports nothing (a caller that reports its own blocks).

    Returns
    -------
    weights : float64 ndarray of shape (n, k)
        ``weights[q, a]`` is the weight of ``points[indices[q, a]]``.
    """
    points = np.ascontiguousarray(points, dtype=np.float64)
    queries = np.ascontiguousarray(queries, dtype=np.float64)
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    check_indices(indices, points.shape[0])
    weights = np.empty(indices.shape, dtype=np.float64)
    row_slices = blocks(indices.shape[0], WEIGHT_BLOCK_ROWS)
    for b in row_slices if progress is None else track(row_slices, progress):
        _nnls_kernel(points, queries[b], indices[b], weights[b])
    return weights


@njit(
    types.void(
        _read(types.int64, 2),
        _read(types.float64, 2),
        _read(types.float64, 2),
        _read(types.boolean, 2),
        types.float64,
        types.int64,
        types.float64[:, ::1],
    ),
    cache=True,
    nogil=True,
)
def _propagate_kernel(indices, h, P, bags, alpha, n_iter, F):
    n, k = indices.shape
    n_classes = P.shape[1]
    current = P.copy()
    for _ in range(n_iter):
        for i in range(n):
            for c in range(n_classes):
                F[i, c] = 0.0
            for a in range(k):
                w = h[i, a]
                if w != 0.0:
                    j = indices[i, a]
                    for c in range(n_classes):
                        F[i, c] += w * current[j, c]
            total = 0.0
            for c in range(n_classes):
                if bags[i, c]:
                    F[i, c] = alpha * F[i, c] + (1.0 - alpha) * P[i, c]
                    total += F[i, c]
                else:
                    F[i, c] = 0.0
            for c in range(n_classes):
                F[i, c] /= total
        current, F = F, current
    if n_iter % 2 == 0:  # an even number of swaps left the last step in the copy, not in the caller's F
        F[:, :] = current


def propagate(indices, weights, bags, alpha, n_iter):
    """The paper's label propagation, restricted to bags.

    With ``W[j, i]`` the weight of row ``j`` in the reconstruction of row ``i``
    and ``D = diag(d_i)``, ``d_i = Σ_j W[j, i]``, the propagation matrix is
    ``H = W D⁻¹``; starting from ``F⁽⁰⁾ = P`` (``p_ic = 1/|S_i|`` on the bag),
    each step is ``F ← α·Hᵀ F + (1 − α)·P``, then every row is set to zero
    outside its bag and rescaled to sum to 1 within it.  Row ``i`` of ``Hᵀ`` is
    row ``i``'s own weights divided by their sum, so a row takes the
    confidences of the neighbors that reconstruct it; a row whose weights are
    all zero (``d_i = 0``) gets only ``(1 − α)·P`` and keeps ``P``.

    Parameters
    ----------
    indices : int array of shape (n, k)
        Each row's neighbors (other rows).
    weights : array of shape (n, k)
        Their reconstruction weights (:func:`nnls_weights`).
    bags : bool array of shape (n, l)
        Candidate sets, none empty.
    alpha : float in (0, 1)
    n_iter : int
        Number of steps (all of them: there is no early stop).

    Returns
    -------
    F : float64 ndarray of shape (n, l)
        Zero outside each bag, rows summing to 1.
    """
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    check_indices(indices, indices.shape[0])
    bags = np.ascontiguousarray(bags, dtype=np.bool_)
    if not bags.any(axis=1).all():
        raise InvalidDataError("propagate: every bag must hold at least one class")
    weights = np.asarray(weights, dtype=np.float64)
    total = weights.sum(axis=1, keepdims=True)
    h = np.ascontiguousarray(np.where(total > 0.0, weights / np.where(total > 0.0, total, 1.0), 0.0))
    P = np.ascontiguousarray(bags / bags.sum(axis=1, keepdims=True))
    F = np.empty_like(P)
    _propagate_kernel(indices, h, P, bags, float(alpha), int(n_iter), F)
    return F


@njit(
    types.void(
        _read(types.float64, 2),
        _read(types.float64, 2),
        _read(types.int64, 2),
        _read(types.float64, 2),
        _read(types.int64, 1),
        types.float64[:, ::1],
        types.float64[::1],
    ),
    cache=True,
    nogil=True,
)
def _class_errors_kernel(points, queries, indices, weights, labels, errors, norms):
    n, k = indices.shape
    d = points.shape[1]
    r = np.empty(d)
    for q in range(n):
        v = 0.0
        for t in range(d):
            v += queries[q, t] * queries[q, t]
        norms[q] = np.sqrt(v)
        for c in range(errors.shape[1]):
            errors[q, c] = norms[q]
        for a in range(k):
            label = labels[indices[q, a]]
            seen = False
            for b in range(a):
                if labels[indices[q, b]] == label:
                    seen = True
                    break
            if seen:
                continue
            for t in range(d):
                r[t] = queries[q, t]
            for b in range(a, k):
                w = weights[q, b]
                if w != 0.0 and labels[indices[q, b]] == label:
                    pb = indices[q, b]
                    for t in range(d):
                        r[t] -= w * points[pb, t]
            v = 0.0
            for t in range(d):
                v += r[t] * r[t]
            errors[q, label] = np.sqrt(v)


def class_errors(points, queries, indices, weights, labels, n_classes):
    """Each query's reconstruction error by the neighbors of each class.

    ``errors[q, c] = ‖queries[q] − Σ_{a: labels[indices[q, a]] = c} weights[q, a]·points[indices[q, a]]‖``:
    the query's reconstruction (with its weights over all its neighbors) kept
    to the neighbors labelled ``c``.  A class none of the neighbors carries
    gets ``‖queries[q]‖`` (weight 0 on every neighbor).

    Returns
    -------
    errors : float64 ndarray of shape (n, n_classes)
    norms : float64 ndarray of shape (n,)
        ``‖queries[q]‖``.
    """
    points = np.ascontiguousarray(points, dtype=np.float64)
    queries = np.ascontiguousarray(queries, dtype=np.float64)
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    check_indices(indices, points.shape[0])
    errors = np.empty((indices.shape[0], n_classes), dtype=np.float64)
    norms = np.empty(indices.shape[0], dtype=np.float64)
    _class_errors_kernel(
        points,
        queries,
        indices,
        np.ascontiguousarray(weights, dtype=np.float64),
        np.ascontiguousarray(labels, dtype=np.int64),
        errors,
        norms,
    )
    return errors, norms


def decide_errors(errors, norms, candidates, seed, rows, stream):
    """IPAL's prediction rule with this project's reject score, from the per-class errors.

    The label is the candidate of least error (ties: within ``TIE_RTOL`` of
    the least error, plus ``TIE_ATOL·‖x‖``, broken by a draw keyed by
    (seed, stream, row)).  The conformity of a class is ``e_min / e_c``
    (1 for the tied best), the score ``1 − max_{c ≠ ŷ} e_min / e_c`` over the
    other candidates, i.e. ``(e_2 − e_1) / e_2`` (0 for a tie, 1 for a single
    candidate).

    Returns
    -------
    labels : int64 array of shape (n,)
    score : float64 array of shape (n,)
    guess : bool array of shape (n,)
    ratios : float64 array of shape (n, l)
        ``e_min / e_c`` over the candidates, 0 outside them.
    """
    errors = np.asarray(errors, dtype=np.float64)
    best = np.where(candidates, errors, np.inf).min(axis=1, keepdims=True)
    tol = TIE_RTOL * best + TIE_ATOL * np.asarray(norms, dtype=np.float64)[:, None]
    tied = candidates & (errors <= best + tol)
    labels, n_tied = pick_among(tied, seed, rows, stream)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(tied, 1.0, np.where(candidates, best / errors, 0.0))
    return labels, _runner_up_score(ratios, labels), n_tied > 1, ratios


def decide_confidences(values, bags, seed, rows, stream):
    """The paper's disambiguation (largest value in the bag) with this project's score.

    ``values`` are the class-mass-normalised confidences, positive on each
    bag.  Ties within ``TIE_RTOL`` of the largest are broken by a draw keyed
    by (seed, stream, row).  The score is ``1 − g_2 / g_1``, the relative
    margin of the largest value over the runner-up in the bag (0 for a tie,
    1 for a single-label bag).

    Returns
    -------
    labels, score, guess, ratios (``g_c / g_1`` on the bag)
    """
    values = np.where(bags, values, 0.0)
    best = values.max(axis=1, keepdims=True)
    tied = bags & (values >= best - TIE_RTOL * best)
    labels, n_tied = pick_among(tied, seed, rows, stream)
    ratios = np.where(tied, 1.0, values / best)
    return labels, _runner_up_score(ratios, labels), n_tied > 1, ratios


def _runner_up_score(ratios, labels):
    others = ratios.copy()
    others[np.arange(labels.size), labels] = 0.0  # ratios are >= 0, so 0 also stands for "no other candidate"
    return 1.0 - others.max(axis=1, initial=0.0)


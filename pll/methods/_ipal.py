"""IPAL (Zhang & Yu, IJCAI 2015): label propagation over a reconstruction graph, then minimum-error reconstruction.

The compiled kernels live here, one function each, so that they can be tested
one by one: :func:`nnls_weights` (non-negative reconstruction weights of each
row over its neighbors), :func:`propagate` (the paper's iterative label
propagation restricted to bags) and :func:`class_errors` (the reconstruction
error of a query by the neighbors of each disambiguated class).
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from numba import njit, types
from sklearn.utils._param_validation import Interval

from ..utils._random import pick_among, seed_to_int
from ..errors import InvalidDataError
from ..neighbors.result import check_indices
from ..utils.progress import blocks, track
from ..reject.reasons import CONFLICT, DEFAULT_SUPPORT_QUANTILE, assign
from ..utils.validation import check_X, encode_bags
from ._base import NeighborMethod, RejectPrediction, row_blocks

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


class Ipal(NeighborMethod):
    """IPAL: instance-based partial-label learning by label propagation, with a reject option.

    **Fit** (Zhang and Yu 2015, Section 2).  Every training row ``x_i`` gets
    non-negative reconstruction weights over its ``k = n_neighbors`` nearest
    other training rows ``N(x_i)``: ``w_i = argmin ‖x_i − Σ_{j ∈ N(x_i)} w_ji·x_j‖²``
    subject to ``w ≥ 0`` (a non-negative least-squares problem per row, solved
    by Lawson and Hanson's active-set method in a compiled kernel).  With
    ``W = [w_ji]`` (``w_ji`` the weight of ``x_j`` for ``x_i``, 0 off the
    graph), ``D = diag(d_i)``, ``d_i = Σ_j w_ji``, the propagation matrix is
    ``H = W D⁻¹``.  The labeling confidences start at ``F⁽⁰⁾ = P`` with
    ``p_ic = 1/|S_i|`` on the bag ``S_i`` (an empty bag counts as all classes)
    and take ``max_iter`` steps ``F⁽ᵗ⁾ = α·Hᵀ F⁽ᵗ⁻¹⁾ + (1 − α)·P``, each followed
    by setting the row to zero outside its bag and rescaling it to sum to 1
    within it (``confidences_``).  A row whose weights are all zero (``d_i = 0``)
    keeps ``P``.  The disambiguation then corrects for class mass: with
    ``n_c = Σ_i p_ic`` (the class mass of the initial confidences) and
    ``n̂_c = Σ_i f_ic`` (after propagation), each row's label is
    ``ŷ_i = argmax_{c ∈ S_i} (n_c / n̂_c)·f_ic`` (``disambiguated_``).

    **Predict.**  A query ``x`` gets non-negative weights ``w`` over its ``k``
    nearest training rows, as above, and for every class ``c`` the error
    ``e_c = ‖x − Σ_{j ∈ N(x), ŷ_j = c} w_j·x_j‖`` of the reconstruction kept
    to the neighbors disambiguated as ``c``; the prediction is the candidate
    of least error.  A class that no neighbor carries has ``e_c = ‖x‖``
    (weight 0 on every neighbor), so it can still win — rarely, when the
    other partial reconstructions overshoot ``x``; the paper's rule ranges
    over all classes, so does this one (restricted to the query's candidates
    when given).

    **Ties.**  Errors within ``1e-9`` relative (plus ``1e-12·‖x‖``) of the
    least, and class-mass-normalised confidences within ``1e-9`` relative of
    the largest, are tied; the label is drawn among the tied by a seeded
    choice keyed by (seed, row), and flagged as a guess.

    **Reject option** (added by this project; the paper has none).  The
    score of a prediction is the relative margin of the two smallest errors
    among the candidates, ``(e_2 − e_1) / e_2`` in [0, 1]: 0 for a tie, 1 when
    the best class reconstructs ``x`` exactly and the others do not (or when
    there is a single candidate).  The prediction is accepted when the score
    exceeds ``threshold = 1 − 1/√2 ≈ 0.293``, i.e. when ``e_1² < e_2² / 2``:
    the best class leaves less than half the squared residual (the quantity
    the weights minimise) that the runner-up leaves.  Why the margin: the
    errors have the scale of the features, so a threshold on ``e_1`` alone
    would not carry over between data sets, while the ratio ``e_1 / e_2`` is
    scale-free and says how clearly the neighbors of one class explain the
    query better than those of any other.  On bird-song and msrc-v2
    (min-max scaled, 80/20 splits, 5 seeds) the default accepts about 80 %
    and 63 % of the test rows, whose accuracy (83 % and 66 %) is 10 to 13
    points above the overall accuracy (73 % and 53 %); lower thresholds trade
    accuracy for coverage smoothly, and the pipeline calibrates thresholds
    on a hold-out anyway.

    The per-class values behind the score are the ratios ``e_1 / e_c`` in
    [0, 1] (1 for the best class): :meth:`conformity` (for conformal
    prediction sets, every class a candidate) returns them, and the score is
    one minus the largest ratio among the other candidates — as DST-PLL's
    ``Δ`` is the belief of the winner minus the largest other plausibility.
    :meth:`predict_proba` is the ratios normalised to sum to 1, i.e.
    ``(1/e_c) / Σ_c' (1/e_c')``, the normalisation of the authors' released
    code; its argmax is the prediction, but it is not calibrated, and a
    class with no disambiguated neighbor keeps the share of ``1/‖x‖``, so
    with many classes even a clear winner has a modest share: use the score
    to reject.  :class:`RejectPrediction` ``.shares`` carries the same values
    (over the candidates).

    :meth:`disambiguate` returns the paper's training labels ``ŷ_i`` (not a
    prediction of each row from its neighbors): its score is the relative
    margin ``1 − g_2 / g_1`` of the two largest class-mass-normalised
    confidences ``g_c = (n_c / n̂_c)·f_ic`` in the bag (1 for a single-label
    bag), accepted above the same threshold; its ``.shares`` are the ``g_c``
    normalised to sum to 1.

    **Reasons** of a rejection (:mod:`pll.reject.reasons`; :meth:`disambiguate`
    gives them too): ``conflict`` when the runner-up is close by IPAL's own
    rule, ``score ≤ conflict_margin`` (at the default, the threshold: every
    rejection at the default threshold is a conflict of two classes that
    reconstruct the row about as well, unless ``no_support`` comes first);
    ``no_support`` when the ``k``-th neighbor is farther than
    ``support_radius_`` (evidence ``neighbor_distance``, ``support_radius``).
    IPAL reads disambiguated labels, not bags, so it has no ``vague``.

    It is a scikit-learn classifier over candidate sets (see
    :class:`~pll.methods.NeighborMethod`): :meth:`decision_function` is the
    score.

    Parameters
    ----------
    n_neighbors : int, default=10
        ``k``, both for the training graph and for a query's reconstruction.
        :meth:`fit` needs more than ``k`` training rows (every training row is
        reconstructed from ``k`` others).
    alpha : float in (0, 1), default=0.95
        Weight of the propagated confidences against the initial ones.
    max_iter : int, default=100
        Propagation steps (all of them are taken: no early stop).  The
        defaults of ``n_neighbors``, ``alpha`` and ``max_iter`` are those of
        the DST-PLL paper's Appendix D.2.
    conflict_margin : float in [0, 1], default=1 − 1/√2
        The reject threshold, so that ``conflict`` is IPAL's own rejection.
    support_quantile : float in (0, 1] or None, default=0.99
        ``q`` of the support radius (:mod:`pll.reject.reasons`); None: no
        ``no_support`` test.
    knn : str, default="auto"
        Neighbor backend (see :func:`pll.neighbors.kneighbors`) used when no
        precomputed neighbors are given.
    knn_options : dict, optional
        Options of the neighbor backend.
    random_state : int or None, default=None
        Seed of the tie-breaking; draws are keyed by (seed, row).  None draws
        fresh randomness, as in scikit-learn.

    Attributes
    ----------
    classes_ : ndarray of shape (l,)
        The class labels (``arange(l)`` when fitted on a 0/1 matrix).
    X_train_ : ndarray of shape (n, d)
    S_train_ : ndarray of shape (n, l), bool
        The candidate sets over ``classes_``.
    neighbor_indices_ : ndarray of shape (n, k), int64
        Each training row's neighbors (other rows), nearest first.
    weights_ : ndarray of shape (n, k), float64
        ``weights_[i, a]`` is the reconstruction weight ``w_ji`` of row
        ``j = neighbor_indices_[i, a]`` for row ``i`` (non-negative).
    confidences_ : ndarray of shape (n, l), float64
        The labeling confidences ``F`` after ``max_iter`` steps: zero outside
        each bag (all classes for an empty bag), rows summing to 1.
    class_mass_ratio_ : ndarray of shape (l,), float64
        ``n_c / n̂_c`` (0 for a class in no bag).
    disambiguated_ : ndarray of shape (n,), int64
        ``ŷ_i`` as a column index of ``classes_`` (``disambiguate().labels``
        are the class values).
    n_iter_ : int
        Propagation steps taken (always ``max_iter``).
    support_radius_ : float or None
        The ``support_quantile`` of the training rows' own ``k``-th neighbor
        distances.
    n_classes_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (d,)
        Only when ``X`` was a data frame with string column names.

    Notes
    -----
    Neighbors are ordered by distance, ties by lower training index.  Where a
    row's neighbors are linearly dependent (fewer features than neighbors,
    duplicate rows) the least-squares solution is not unique: the kernel
    returns a minimiser with the least error, not necessarily the one
    :func:`scipy.optimize.nnls` returns.  The authors' released code also
    scales every row to unit norm and stops the propagation early once
    ``‖ΔF‖₂ < 10⁻⁴``; neither is part of the paper's algorithm, nor of this
    class (scale the features in a pipeline if wanted).

    Cost: fit is ``O(n·k·(k·d + k³))`` for the weights plus ``O(max_iter·n·k·l)``
    for the propagation; a query costs one ``k``-neighbor search and one
    ``O(k·d + k³)`` problem.

    References
    ----------
    M.-L. Zhang and F. Yu. Solving the partial label learning problem: an
    instance-based approach. In *Proceedings of the 24th International Joint
    Conference on Artificial Intelligence (IJCAI)*, pages 4048–4054, 2015.

    Examples
    --------
    >>> import numpy as np, pll
    >>> from pll.methods._ipal import Ipal
    >>> X = np.array([[0.0, 1.0], [0.1, 1.0], [0.2, 1.0], [1.0, 0.0], [1.0, 0.1], [1.0, 0.2]])
    >>> S = np.array([[1, 1], [1, 0], [1, 0], [1, 1], [0, 1], [0, 1]], dtype=bool)
    >>> clf = Ipal(n_neighbors=2).fit(X, S)
    >>> clf.disambiguated_
    array([0, 0, 0, 1, 1, 1])
    >>> clf.confidences_[[0, 3]].round(3)
    array([[0.975, 0.025],
           [0.025, 0.975]])

    The third query lies halfway between rows 2 and 5: both classes
    reconstruct it equally badly, so its label is a seeded guess, rejected.

    >>> r = clf.predict_with_reject(np.array([[0.05, 1.0], [1.0, 0.15], [0.5, 0.5], [0.6, 0.5]]))
    >>> r.labels, r.accept, r.guess
    (array([0, 1, 0, 1]), array([ True,  True, False,  True]), array([False, False,  True, False]))
    >>> r.score.round(3)
    array([1.   , 1.   , 0.   , 0.523])

    It is a conflict, but its second neighbor is also farther than the 99 %
    quantile of the training rows' own second-neighbor distances, and that
    reason comes first:

    >>> r.reason, r.evidence["conflict"]
    (array(['none', 'none', 'no_support', 'none'], dtype='<U10'), array([False, False,  True, False]))
    >>> clf.conformity(np.array([[0.6, 0.5]])).round(3)
    array([[0.477, 1.   ]])
    """

    threshold = 1.0 - 1.0 / np.sqrt(2.0)
    _expected_failed_checks = {
        **NeighborMethod._expected_failed_checks,
        "check_decision_proba_consistency": (
            "decision_function is the relative error margin (the reject score), not a score of class 1"
        ),
    }
    _parameter_constraints = {
        **NeighborMethod._parameter_constraints,
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "alpha": [Interval(Real, 0.0, 1.0, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "conflict_margin": [Interval(Real, 0.0, 1.0, closed="both")],
    }

    def __init__(
        self,
        n_neighbors=10,
        *,
        alpha=0.95,
        max_iter=100,
        conflict_margin=1.0 - 1.0 / math.sqrt(2.0),
        support_quantile=DEFAULT_SUPPORT_QUANTILE,
        knn="auto",
        knn_options=None,
        random_state=None,
    ):
        self.n_neighbors = n_neighbors
        self.alpha = alpha
        self.max_iter = max_iter
        self.conflict_margin = conflict_margin
        self.support_quantile = support_quantile
        self.knn = knn
        self.knn_options = knn_options
        self.random_state = random_state

    def _min_training_rows(self):
        """More than ``k``: every training row is reconstructed from ``k`` other rows."""
        return self.n_neighbors + 1

    def _fit_derived(self):
        nb = self._neighbors_for(None, None)
        self._seed = seed_to_int(self.random_state)
        self.neighbor_indices_ = nb.indices
        self.weights_ = nnls_weights(self.X_train_, self.X_train_, nb.indices, progress="Ipal weights")
        bags = self._train_bags()
        self.confidences_ = propagate(nb.indices, self.weights_, bags, self.alpha, self.max_iter)
        initial_mass = (bags / bags.sum(axis=1, keepdims=True)).sum(axis=0)
        final_mass = self.confidences_.sum(axis=0)
        safe = np.where(final_mass > 0.0, final_mass, 1.0)
        self.class_mass_ratio_ = np.where(final_mass > 0.0, initial_mass / safe, 0.0)
        self.disambiguated_ = self._disambiguation()[0]
        self.n_iter_ = self.max_iter

    def _train_bags(self):
        return np.where(self.S_train_.any(axis=1, keepdims=True), self.S_train_, True)

    def _disambiguation(self):
        values = self.confidences_ * self.class_mass_ratio_
        rows = np.arange(values.shape[0])
        return decide_confidences(values, self._train_bags(), self._seed, rows, self._train_stream)

    def disambiguate(self):
        """The paper's disambiguated labels of the training rows, with the reject option.

        ``labels`` are ``classes_[disambiguated_]``; ``score`` is the relative
        margin of the two largest class-mass-normalised confidences in the bag,
        ``accept`` is ``score > threshold``; ``shares`` are those confidences
        normalised to sum to 1 (see the class docstring).
        """
        self._check_fitted()
        labels, score, guess, ratios = self._disambiguation()
        return self._with_reasons(labels, score, guess, ratios, self._neighbors_for(None, None).distances)

    def predict_with_reject(self, X, neighbors=None, candidates=None):
        """Predictions with IPAL's minimum-error rule and the relative-margin reject option.

        Parameters
        ----------
        X : array-like of shape (n, d)
        neighbors : NeighborResult, optional
            Precomputed neighbors of ``X`` among the training rows.
        candidates : candidate sets of the n rows, optional
            Each row's candidate set (any form :meth:`fit` takes, over
            ``classes_``); the prediction stays inside it.  Default: all
            classes (an empty row also means all classes).

        Returns
        -------
        RejectPrediction
            ``labels`` are values of ``classes_``; ``shares`` (n, l) are the
            inverse-error shares over the candidates.
        """
        self._check_fitted()
        X = check_X(self, X, reset=False)
        nb = self._neighbors_for(X, neighbors)
        n = nb.n_queries
        if candidates is None:
            cand = np.ones((n, self.n_classes_), dtype=bool)
        else:
            cand, _ = encode_bags(candidates, n, self.classes_, what="query candidate sets")
            cand = np.where(cand.any(axis=1, keepdims=True), cand, True)
        labels, score, guess, ratios = self._decide(X, nb, cand)
        return self._with_reasons(labels, score, guess, ratios, nb.distances)

    def _with_reasons(self, labels, score, guess, ratios, distances):
        """The prediction of these rows, with reasons from their score and their neighbor ``distances``."""
        accept = score > self.threshold
        evidence = {**self._support(distances), CONFLICT: score <= self.conflict_margin}
        return self._labelled(
            RejectPrediction(
                labels=labels,
                accept=accept,
                score=score,
                guess=guess,
                shares=ratios / ratios.sum(axis=1, keepdims=True),
                reason=assign(accept, evidence),
                evidence=evidence,
            )
        )

    def conformity(self, X, neighbors=None):
        """``e_1 / e_c`` for every class, float64 of shape (n, l) in [0, 1]: 1 for the best class.

        The ratio of the least reconstruction error to each class's error
        (every class a candidate); see the class docstring.
        """
        self._check_fitted()
        X = check_X(self, X, reset=False)
        nb = self._neighbors_for(X, neighbors)
        return self._decide(X, nb, np.ones((nb.n_queries, self.n_classes_), dtype=bool))[3]

    def _conformity(self, nb, prediction):
        """Conformity from a prediction: its shares rescaled so that the best class has 1, i.e. ``e_1 / e_c``."""
        return prediction.shares / prediction.shares.max(axis=1, keepdims=True)

    def predict_proba(self, X, neighbors=None):
        """Inverse-error shares ``(1/e_c) / Σ_c' (1/e_c')``, shape (n, l), columns in ``classes_`` order.

        Not calibrated probabilities (see the class docstring); the largest is
        the prediction.
        """
        ratios = self.conformity(X, neighbors=neighbors)
        return ratios / ratios.sum(axis=1, keepdims=True)

    def _decide(self, X, nb, cand):
        """Labels, score, guess and error ratios of the queries ``X`` with neighbors ``nb``, block by block."""
        n = nb.n_queries
        labels = np.empty(n, dtype=np.int64)
        score = np.empty(n)
        guess = np.empty(n, dtype=bool)
        ratios = np.empty((n, self.n_classes_))
        for b in track(row_blocks(n, self._bytes_per_row(nb.k)), "Ipal predictions"):
            part = self._decide_block(X[b], nb.indices[b], cand[b], np.arange(b.start, b.stop))
            labels[b], score[b], guess[b], ratios[b] = part
        return labels, score, guess, ratios

    def _decide_block(self, queries, indices, candidates, rows):
        weights = nnls_weights(self.X_train_, queries, indices)
        errors, norms = class_errors(self.X_train_, queries, indices, weights, self.disambiguated_, self.n_classes_)
        return decide_errors(errors, norms, candidates, self._seed, rows, self._query_stream)

    def _predict_block(self, indices, distances, candidates, rows, stream):
        raise NotImplementedError(
            "Ipal reconstructs each query from its features: it predicts through predict_with_reject, "
            "which passes them, not through the base class's neighbor-only blocks"
        )

    def _bytes_per_row(self, k):
        return 8 * (2 * k + 6 * self.n_classes_)

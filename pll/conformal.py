"""Conformal prediction sets from partial labels: a set of labels that holds the true one with probability ≥ 1 − α.

Definitions (Javanmardi, Sale, Hüllermeier and others, "Conformal Prediction
with Partially Labeled Data", arXiv:2306.01191).  A fitted method gives every
row ``x`` and class ``y`` a *conformity* ``p̂(y | x)`` in [0, 1]
(:func:`conformity`); the nonconformity is ``s(x, y) = 1 − p̂(y | x)``.
Calibration rows ``(x_i, S_i)``, ``i = 1..n``, have candidate bags, not true
labels.  A row's score is its least conforming candidate,

    s_i = max_{y ∈ S_i} s(x_i, y)        (an empty bag counts as every label),

and with ``k = ⌈(n + 1)(1 − α)⌉`` the threshold ``q̂`` is the k-th smallest
``s_i`` (``q̂ = +∞`` when ``k > n``).  The prediction set of a row is

    C(x) = {y : s(x, y) ≤ q̂},

intersected with the row's own candidates when it has some.

Why it covers (the guarantee).  Suppose the rows ``(x_i, S_i, y_i)`` of the
calibration set and a test row are exchangeable (drawn alike, e.g. i.i.d.),
every bag holds its true label (``y_i ∈ S_i``: true of every bag process but
``remove_true_label``), and the method was fitted on *other* rows, so that
``s`` is a fixed function as far as these rows are concerned.  Then the test
row's own bag score ``s_{n+1} = max_{y ∈ S_{n+1}} s(x_{n+1}, y)`` is
exchangeable with ``s_1 … s_n``, so its rank among them is uniform and
``P(s_{n+1} ≤ q̂) ≥ k / (n + 1) ≥ 1 − α`` (ties only help).  Since the true
label lies in the bag, ``s(x_{n+1}, y_{n+1}) ≤ s_{n+1}``, hence
``P(y_{n+1} ∈ C(x_{n+1})) ≥ 1 − α``.  The test row's bag is never looked at:
it only has to exist.  Intersecting with candidates that hold the true label
keeps the guarantee.  The guarantee is marginal (on average over rows), not
per row or per class, and it is void if the method saw the calibration rows:
a model refitted on all rows after calibration does not inherit it.

Taking ``min`` instead of ``max`` over the bag (``variant="min"``) gives
smaller sets with *no* guarantee: the true label's score can exceed the
bag's smallest, so coverage may fall below 1 − α.  It is offered because it
is what a user who trusts the bags' best candidate would do, and labelled so.

Equivalently, ``C(x) = {y : p(y) > α}`` for the conformal p-value
``p(y) = (1 + #{i : s_i ≥ s(x, y)}) / (n + 1)``; the reject option accepts a
row exactly when its set is a single label, and scores it by the confidence
``1 − p`` of its second most conforming label (the largest α at which the set
would shrink to one label is that p-value).

Reasons of a rejection (:mod:`pll.reasons`).  A set of two or more labels is
a ``conflict``: several labels conform as well as the calibration bags' least
conforming candidates do, and the data cannot tell them apart at this α.  An
empty set is ``no_support``: no label conforms that well, the row is unlike
the calibration rows — the conformal reading of "out of distribution", which
needs no distance.  The two exclude each other, so every rejection has one.
"""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions

from .errors import InvalidDataError, InvalidParameterError, NotFittedError
from .methods.base import RejectPrediction
from .reasons import CONFLICT, NO_SUPPORT, assign
from .validation import check_params, encode_bags

VARIANTS = {
    "max": "the least conforming candidate of each calibration bag: coverage ≥ 1 − α guaranteed",
    "min": "the most conforming candidate: smaller sets, no coverage guarantee (optimistic)",
}


def conformity(estimator, X, neighbors=None):
    """Each row's conformity ``p̂(y | x)`` to each class, float64 of shape (n, l), columns in ``classes_`` order.

    A pll method's own :meth:`conformity` (DST-PLL: plausibility ``pl({y})``;
    PL-kNN: vote share; PL A-kNN: the share of its final adaptive
    neighborhood whose bags hold ``y``), else ``predict_proba`` of any
    fitted classifier.  ``neighbors`` are the rows' precomputed neighbors (pll
    methods only).
    """
    if hasattr(estimator, "conformity"):
        values = estimator.conformity(X, neighbors=neighbors)
    elif hasattr(estimator, "predict_proba"):
        if neighbors is not None:
            raise InvalidParameterError(f"{type(estimator).__name__} takes no precomputed neighbors")
        values = estimator.predict_proba(X)
    else:
        raise InvalidParameterError(
            f"{type(estimator).__name__} has neither conformity nor predict_proba: no per-class score to build sets from"
        )
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or not np.isfinite(values).all():
        raise InvalidDataError(f"{type(estimator).__name__} gave conformity values that are not a finite 2-d array")
    return values


def calibration_scores(conformity_values, bags, variant="max"):
    """Each calibration row's nonconformity ``s_i``: the max (or min) of ``1 − p̂(y | x_i)`` over its bag.

    Parameters
    ----------
    conformity_values : ndarray of shape (n, l)
    bags : bool ndarray of shape (n, l)
        An empty bag counts as every label.
    variant : {"max", "min"}

    Returns
    -------
    ndarray of shape (n,)
    """
    if variant not in VARIANTS:
        raise InvalidParameterError(f"unknown variant {variant!r}: choose from {', '.join(VARIANTS)}")
    s = 1.0 - np.asarray(conformity_values, dtype=np.float64)
    bags = np.asarray(bags, dtype=bool)
    if bags.shape != s.shape:
        raise InvalidDataError(f"bags of shape {bags.shape} do not match conformity values of shape {s.shape}")
    bags = np.where(bags.any(axis=1, keepdims=True), bags, True)
    if variant == "max":
        return np.where(bags, s, -np.inf).max(axis=1)
    return np.where(bags, s, np.inf).min(axis=1)


def quantile_rank(n, alpha):
    """``k = ⌈(n + 1)(1 − α)⌉``, the rank of ``q̂`` among ``n`` calibration scores (``k > n`` means ``q̂ = +∞``).

    ``α`` is read as the decimal it prints as (0.1 is 1/10 exactly), so that
    ``(n + 1)(1 − α)`` landing on an integer is not rounded up by binary
    floating point.
    """
    return math.ceil((n + 1) * (1 - Fraction(repr(float(alpha)))))


def conformal_quantile(scores, alpha):
    """``q̂``: the ⌈(n + 1)(1 − α)⌉-th smallest of ``scores``, ``+inf`` when that rank exceeds ``n``."""
    scores = np.sort(np.asarray(scores, dtype=np.float64))
    k = quantile_rank(scores.size, alpha)
    return float(scores[k - 1]) if k <= scores.size else math.inf


class ConformalSets(BaseEstimator):
    """Prediction sets with coverage ≥ 1 − α, calibrated on rows with candidate bags only.

    The definitions and the argument for the guarantee are in :mod:`pll.conformal`.

    Parameters
    ----------
    method : fitted estimator
        A pll method, or any classifier with ``predict_proba`` and
        ``classes_``, **fitted on rows other than the calibration rows** (the
        guarantee needs it; nothing here can check it).
    alpha : float, default=0.1
        Miscoverage level in (0, 1).
    variant : {"max", "min"}, default="max"
        ``max``: the guarantee; ``min``: tighter sets, no guarantee.

    Attributes
    ----------
    quantile_ : float
        ``q̂`` (``inf`` when there are too few calibration rows for this α:
        fewer than ``1/α − 1``; every set is then every class).
    calibration_scores_ : ndarray of shape (n,)
        The calibration rows' ``s_i``, sorted.
    classes_ : ndarray of shape (l,)
        The method's classes.

    Examples
    --------
    >>> import numpy as np, pll
    >>> X = np.arange(12.0)[:, None]
    >>> S = np.array([[1, 0]] * 6 + [[0, 1]] * 6, dtype=bool)
    >>> method = pll.PlKnn(n_neighbors=3).fit(X[::2], S[::2])
    >>> sets = pll.ConformalSets(method, alpha=0.25).fit(X[1::2], S[1::2])
    >>> sets.predict_sets(np.array([[0.5], [11.0]])).astype(int)
    array([[1, 0],
           [0, 1]])
    >>> sets.predict_with_reject(np.array([[0.5]])).reason
    array(['none'], dtype='<U10')

    Six calibration rows are too few for α = 0.1 (``q̂ = inf``): every set
    holds both classes, a conflict.

    >>> pll.ConformalSets(method, alpha=0.1).fit(X[1::2], S[1::2]).predict_with_reject(np.array([[0.5]])).reason
    array(['conflict'], dtype='<U10')
    """

    _parameter_constraints = {
        "method": "no_validation",
        "alpha": [Interval(Real, 0.0, 1.0, closed="neither")],
        "variant": [StrOptions(set(VARIANTS))],
    }

    def __init__(self, method, alpha=0.1, *, variant="max"):
        self.method = method
        self.alpha = alpha
        self.variant = variant

    def fit(self, X, S, neighbors=None):
        """Calibrate ``q̂`` on rows ``X`` with candidate sets ``S`` (any form the method's ``fit`` takes)."""
        check_params(self)
        classes = getattr(self.method, "classes_", None)
        if classes is None:
            raise NotFittedError(
                f"ConformalSets needs {type(self.method).__name__} fitted, on rows other than the calibration rows"
            )
        values = conformity(self.method, X, neighbors)
        bags, _ = encode_bags(S, values.shape[0], classes, what="calibration candidate sets")
        self.classes_ = classes
        self.calibration_scores_ = np.sort(calibration_scores(values, bags, self.variant))
        self.quantile_ = conformal_quantile(self.calibration_scores_, self.alpha)
        return self

    def _check_fitted(self):
        if not hasattr(self, "quantile_"):
            raise NotFittedError("ConformalSets is not calibrated: call fit with the calibration rows first")

    def p_values(self, X, neighbors=None, candidates=None):
        """The conformal p-value of every class, shape (n, l): ``(1 + #{i : s_i ≥ s(x, y)}) / (n + 1)``.

        Classes outside a row's ``candidates`` get 0.  ``C(x) = {y : p(y) > α}``
        in exact arithmetic, with α read as in :func:`quantile_rank` (a float
        comparison can differ where ``p(y)`` equals α, e.g. 1/3).
        """
        return self._p_values(*self._nonconformity(X, neighbors, candidates))

    def predict_sets(self, X, neighbors=None, candidates=None):
        """The prediction set of every row, bool of shape (n, l): ``s(x, y) ≤ q̂``, within its ``candidates``."""
        s, cand = self._nonconformity(X, neighbors, candidates)
        return (s <= self.quantile_) & cand

    def predict_with_reject(self, X, neighbors=None, candidates=None):
        """Accept a row iff its set is a single label; :class:`~pll.methods.RejectPrediction` with ``sets``.

        ``labels``: the most conforming candidate (the set's label when it is
        a singleton; ties: lower class, marked in ``guess``); ``score``: one
        minus the p-value of the second most conforming candidate, so that
        more certain rows score higher (1 for a row with a single candidate);
        ``sets``: :meth:`predict_sets`.  An empty set is a rejection.
        ``reason``: ``conflict`` for a set of several labels, ``no_support``
        for an empty one (see :mod:`pll.conformal`).
        """
        s, cand = self._nonconformity(X, neighbors, candidates)
        sets = (s <= self.quantile_) & cand
        p = self._p_values(s, cand)
        order = np.argsort(s, axis=1, kind="stable")
        first = order[:, 0]
        rows = np.arange(s.shape[0])
        second = p[rows, order[:, 1]] if s.shape[1] > 1 else np.zeros(s.shape[0])
        size = sets.sum(axis=1)
        accept = size == 1
        evidence = {NO_SUPPORT: size == 0, CONFLICT: size > 1}
        return RejectPrediction(
            labels=self.classes_[first],
            accept=accept,
            score=1.0 - second,
            guess=(s == s[rows, first][:, None]).sum(axis=1) > 1,
            sets=sets,
            reason=assign(accept, evidence),
            evidence=evidence,
        )

    def _nonconformity(self, X, neighbors, candidates):
        """``s(x, y)`` of every row and class (``inf`` outside the row's candidates), and the candidates."""
        self._check_fitted()
        values = conformity(self.method, X, neighbors)
        cand = self._candidates(candidates, values.shape[0])
        return np.where(cand, 1.0 - values, np.inf), cand

    def _p_values(self, s, cand):
        """``(1 + #{i : s_i ≥ s}) / (n + 1)`` where ``cand``, else 0."""
        n = self.calibration_scores_.size
        at_least = n - np.searchsorted(self.calibration_scores_, s, side="left")
        return np.where(cand, (1.0 + at_least) / (n + 1.0), 0.0)

    def _candidates(self, candidates, n):
        if candidates is None:
            return np.ones((n, len(self.classes_)), dtype=bool)
        cand, _ = encode_bags(candidates, n, self.classes_, what="query candidate sets")
        return np.where(cand.any(axis=1, keepdims=True), cand, True)


def set_report(sets, y_true=None):
    """What prediction sets cost and cover: ``mean_set_size``, ``singleton_rate``, ``empty_rate``, and with true labels
    ``coverage`` and ``coverage_<class index>`` (per true class; classes absent from ``y_true`` left out).

    ``sets`` : bool (n, l); ``y_true`` : class indices (n,) or None.
    """
    sets = np.asarray(sets, dtype=bool)
    if sets.ndim != 2 or sets.shape[0] == 0:
        raise InvalidDataError(f"prediction sets must be a non-empty (n, l) matrix, got shape {sets.shape}")
    size = sets.sum(axis=1)
    report = {
        "mean_set_size": float(size.mean()),
        "singleton_rate": float((size == 1).mean()),
        "empty_rate": float((size == 0).mean()),
    }
    if y_true is not None:
        y = np.asarray(y_true, dtype=np.int64)
        if y.shape != size.shape or y.min() < 0 or y.max() >= sets.shape[1]:
            raise InvalidDataError(f"true labels must be {size.size} class indices below {sets.shape[1]}")
        covered = sets[np.arange(y.size), y]
        report["coverage"] = float(covered.mean())
        for c in np.unique(y):
            report[f"coverage_{c}"] = float(covered[y == c].mean())
    return report

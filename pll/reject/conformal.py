"""Conformal prediction sets from partial labels: a set of labels meant to hold the true one with probability ≥ 1 − α.

Set-up.  A fitted method gives every row ``x`` and class ``y`` a
*conformity* ``c(x, y)`` in [0, 1] (:func:`conformity`); a *score* turns it
into a nonconformity ``s(x, y)``, lower = more conforming
(:data:`SCORES`: ``probability``, ``1 − c`` normalised over the classes;
``calibrated``, one minus the plausibility below over all classes; ``own``,
``1 − c``; ``cumulative``, APS-style; each method's default is the one whose
sets, calibrated on true labels, are smallest: :data:`DEFAULT_SCORES`).  Calibration rows
``(x_i, S_i)``, ``i = 1..n``, have candidate bags ``S_i``, not true labels (an
empty bag counts as every label).  A *procedure* (:data:`PROCEDURES`) gives
each calibration row a distribution ``w_i`` over its bag, standing in for
its unknown label; with ``t(s) = Σ_i Σ_y w_i(y) [s_i(y) ≥ s]``, the p-value of
class ``y`` at row ``x`` is

    p(y) = (1 + t(s(x, y))) / (n + 1),

and the prediction set is ``C(x) = {y : p(y) > α} = {y : s(x, y) ≤ q̂}``,
``q̂`` the largest calibration score whose p-value exceeds α (``+∞`` when
even a score beyond them all would: fewer than ``1/α − 1`` rows, refused by
:class:`ConformalSets`).  With a point mass on the true label this is split
conformal prediction; ``α`` is read as the decimal it prints as (0.1 is 1/10).

What each procedure guarantees.  All three assume that the calibration
rows and a test row are exchangeable (drawn alike, e.g. i.i.d.) and that the
method was fitted on *other* rows, so that ``s`` is a fixed function as far
as these rows are concerned (void for a model refitted on the calibration
rows; the ``calibrated`` score and the plausibility below take one
temperature from the calibration bags, a small departure).  The guarantees
are marginal: on average over rows, not per row or per class.

* ``conservative`` — ``w_i`` is a point mass on the bag's *least* conforming
  candidate (``max`` in Javanmardi et al., arXiv:2306.01191).  **If every bag
  holds its true label**, ``P(y ∈ C(x)) ≥ 1 − α`` exactly as in split
  conformal prediction: the test row's own worst-candidate score is
  exchangeable with the calibration rows', and the true label's score is at
  most it (the test bag is never looked at).  Nothing else is assumed.  It
  fails where bags miss their true label (``remove_true_label``), and its
  sets are large: once more than α of the bags hold a distractor the model
  rightly finds implausible, every set holds (nearly) every label.
* ``monte_carlo`` (default) — Monte Carlo conformal prediction (Stutz et al.,
  TMLR 2023, arXiv:2307.09302) with its p-values averaged over the
  pseudo-labels, taken here in the limit of infinitely many draws (exact, no
  sampling noise): ``w_i = π(· | x_i, S_i)``, the *plausibility*
  ``π(y | x, S) ∝ c(x, y)^{1/T}`` on the bag, 0 off it, with one temperature
  ``T`` chosen by the likelihood of the calibration bags,
  ``Σ_i log Σ_{y ∈ S_i} π(y | x_i, Θ)`` (``Θ``: all classes): the flattest that the bags do not
  reject at 95 % (:func:`fit_temperature`).  A pseudo-label
  ``Y'`` drawn from ``π`` at a test row is covered with probability
  ``≥ 1 − 2α`` (each draw's p-value is valid; an average of valid p-values
  is valid at 2α, Vovk & Wang 2020), in practice close to ``1 − α`` (see the
  tests).  The **true** label is covered to the extent that ``π`` is its
  distribution given the row and its bag: ``P(y ∈ C) ≥ P(Y' ∈ C) −
  E[TV(π(· | x, S), P(y | x, S))]``.  ``π`` is right when the normalised
  ``c^{1/T}`` is ``P(y | x)`` and the bag says nothing about which of its
  candidates is true (``P(S | x, y)`` equal for every ``y ∈ S``: uniform
  noise, and class-dependent noise with paired classes, qualify; bags of
  co-occurring objects, as in msrc-v2, do not).  The likelihood sees only
  the mass that ``π`` puts outside the bags, not how it spreads it within
  them: a method whose conformity follows bag membership rather than the
  label (a frequent co-occurring distractor conforms as well as the truth)
  gets a ``π`` confidently wrong within the bags, which the flattest-``T``
  choice only partly offsets (with the method's own ``π``, PL A-kNN's sets
  on msrc-v2 cover 0.79 at α = 0.1, Proden's 0.75, PlClassifier's 0.69).
  Neither can be checked without true labels; what the bags do show is how
  much rests on ``π`` (the bounds below), and what an independent
  plausibility would make of it (the weights' check below).  ``T`` is one
  parameter chosen on the calibration rows themselves, a small departure
  from a plausibility fixed in advance.
* ``monte_carlo``'s weights (``weights``, :data:`WEIGHTS`).  The
  plausibility need not come from the method being calibrated: any ``π``
  that is the true label's distribution given the row and its bag gives the
  guarantee above.  ``crossfit`` takes DST-PLL's plausibility ``pl({y})``,
  each calibration row's from a DST-PLL fitted on the other calibration rows
  (five folds, :func:`crossfit_conformity`), its temperature fitted as
  above: a row's weights come from how its neighbors' bags overlap its own,
  not from the model whose sets they calibrate.  ``auto`` (default)
  computes both and keeps the method's own unless the cross-fitted weights
  ask for a larger threshold, i.e. unless, by their reckoning, the method's
  threshold covers fewer than ``1 − α`` of the calibration rows
  (:attr:`ConformalSets.weights_check_`); then it calibrates on the
  cross-fitted ones and says so.  It is a check, not a proof: it catches a
  method whose plausibility is confidently wrong within the bags, at the
  cost of larger sets where DST-PLL's weights are flatter than the truth
  (features on which neighbors say little); where both are wrong alike,
  coverage falls short all the same.
* ``min`` — a point mass on the bag's *most* conforming candidate: smaller
  sets, **no guarantee** (the true label's score can exceed the bag's
  smallest).  It is what a user who trusts each bag's best candidate would do,
  and labelled so.

Bounds without true labels.  Whatever candidate of each bag is true (bags
holding it), the calibration rows' coverage at ``q̂`` lies between the share
of rows whose least conforming candidate scores ``≤ q̂`` and the share whose
most conforming one does (``bounds_``).  When that interval is wider than α,
the bags cannot tell whether ``1 − α`` is met: the procedure's assumption
carries the rest.  On test rows with bags, the share of sets that meet
their bag (:func:`bag_hit_rate`) is an upper bound of the coverage.

What the data can check (:meth:`ConformalSets.calibration_report`, one
note each in a run's log): empty calibration bags, which cannot hold their
true label as every guarantee assumes; bounds wider than α; an upper bound
below ``1 − α``, where the bags contradict the procedure's assumption
outright; a temperature at the edge of its search.  Too few calibration
rows for α (fewer than ``⌈1/α⌉ − 1``: every set would be every label) and
calibration rows without a single candidate are refused.

The reject option accepts a row exactly when its set is a single label, and
scores it by the confidence ``1 − p`` of its second most conforming label (0 for an empty set).
Reasons of a rejection (:mod:`pll.methods.reasons`): a set of two or more labels is
a ``conflict`` (several labels conform as well as the calibration labels
do); an empty set is ``no_support`` (no label conforms that well: the
conformal reading of "out of distribution").
"""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Real

import numpy as np
from scipy.optimize import brentq, minimize_scalar
from sklearn.base import BaseEstimator
from sklearn.preprocessing import MinMaxScaler
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from ..errors import InvalidDataError, InvalidParameterError, NotFittedError
from ..methods import DstPll, RejectPrediction, without_support_test
from ..methods.reasons import CONFLICT, NO_SUPPORT, assign
from ..utils.validation import check_fitted, check_params, empty_as_all, encode_bags

PROCEDURES = {
    "monte_carlo": "calibration labels weighted by the model's plausibility over each bag (Monte Carlo CP): "
    "covers the true label as far as that plausibility is right",
    "conservative": "the least conforming candidate of each bag: coverage ≥ 1 − α whenever bags hold their true label",
    "min": "the most conforming candidate of each bag: smallest sets, no coverage guarantee",
}
SCORES = {
    "probability": "1 − the conformity normalised to sum to one over the classes",
    "calibrated": "1 − the plausibility over all classes, c^{1/T} normalised, T fitted on the calibration bags",
    "own": "1 − the method's own conformity",
    "cumulative": "APS-style: the normalised conformity of every class at least as conforming, summed",
}
DEFAULT_PROCEDURE = "monte_carlo"
WEIGHTS = {
    "auto": "the method's plausibility, checked against cross-fitted weights: calibrated on whichever gives the larger "
    "threshold",
    "method": "the calibrated method's own plausibility",
    "crossfit": "DST-PLL's plausibility, cross-fitted over the calibration rows: no row weighs its own candidates",
}
DEFAULT_WEIGHTS = "auto"
CROSSFIT_FOLDS = 5
"""Folds of the cross-fitted weights: each row's weights come from a DST-PLL fitted on the other four fifths."""
CROSSFIT_MAX_ROWS = 20_000
"""The most rows a fold's DST-PLL is fitted on (a seeded sample of the other folds): bounds the check's cost."""
DEFAULT_SCORES = {"DstPll": "probability", "PlKnn": "probability", "PlAknn": "calibrated"}
"""Each method's score (by class name) with the smallest sets calibrated on true labels over digits, bird-song,
msrc-v2 and lost at α = 0.1 and 0.2 (geometric mean of the size ratios; ``benchmarks/conformal_sets.py``)."""
DEFAULT_SCORE = "probability"
"""The score of a method not in :data:`DEFAULT_SCORES` (the smallest, or within 0.1 %, for IPAL, PlClassifier
and Proden in the same measurement)."""
LOG_TEMPERATURE_RANGE = (-7.0, 4.0)
"""Where the plausibility's ``log T`` is searched: from nearly the argmax (``c^1100``) to nearly flat (``c^0.02``)."""
LIKELIHOOD_MARGIN = 1.920729410347062
"""``χ²₁(0.95) / 2``: how far below its maximum the bags' log-likelihood may fall at the temperature chosen."""
_FLOOR = 1e-12  # a conformity of 0 as a log: keeps classes of zero conformity at nearly no plausibility


def conformity(estimator, X, neighbors=None):
    """Each row's conformity ``c(x, y)`` to each class, float64 of shape (n, l), columns in ``classes_`` order.

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


def nonconformity(conformity_values, score=DEFAULT_SCORE, temperature=None):
    """``s(x, y)`` of every row and class from the conformity, shape (n, l): lower = more conforming (:data:`SCORES`).

    ``calibrated`` needs the plausibility's ``temperature`` (:func:`fit_temperature`).
    ``cumulative`` gives class ``y`` the normalised conformity of every class
    at least as conforming as ``y`` (``y`` and its ties included), so that tied
    classes share a score.
    """
    if score not in SCORES:
        raise InvalidParameterError(f"unknown score {score!r}: choose from {', '.join(SCORES)}")
    c = np.asarray(conformity_values, dtype=np.float64)
    if score == "own":
        return 1.0 - c
    if score == "calibrated":
        return 1.0 - plausibility(c, np.ones_like(c, dtype=bool), temperature)
    c = np.maximum(c, 0.0)
    total = c.sum(axis=1, keepdims=True)
    p = np.divide(c, total, out=np.full_like(c, 1.0 / max(c.shape[1], 1)), where=total > 0)
    if score == "probability":
        return 1.0 - p
    order = np.argsort(-p, axis=1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=1)
    mass = np.cumsum(ranked, axis=1)
    last_of_tie = np.append(ranked[:, 1:] != ranked[:, :-1], np.ones((p.shape[0], 1), bool), axis=1)
    # Each class takes the cumulated mass at the last class of its tie group (the next group end at or after it).
    tied = np.minimum.accumulate(np.where(last_of_tie, mass, np.inf)[:, ::-1], axis=1)[:, ::-1]
    out = np.empty_like(p)
    np.put_along_axis(out, order, tied, axis=1)
    return out


def _as_bags(bags, shape):
    """Bags as bool (n, l) with an empty bag read as every label."""
    bags = np.asarray(bags, dtype=bool)
    if bags.shape != shape:
        raise InvalidDataError(f"bags of shape {bags.shape} do not match conformity values of shape {shape}")
    return empty_as_all(bags)


def _log_conformity(conformity_values):
    return np.log(np.maximum(np.asarray(conformity_values, dtype=np.float64), _FLOOR))


def plausibility(conformity_values, bags, temperature):
    """``π(y | x, S) ∝ c(x, y)^{1/T}`` on each row's bag, 0 off it; rows sum to 1, shape (n, l).

    A bag whose candidates all have conformity 0 gets them in equal parts.
    """
    bags = _as_bags(bags, np.shape(conformity_values))
    z = np.where(bags, _log_conformity(conformity_values) / temperature, -np.inf)
    w = np.exp(z - z.max(axis=1, keepdims=True))
    return w / w.sum(axis=1, keepdims=True)


def fit_temperature(conformity_values, bags):
    """The ``T`` of :func:`plausibility`: the flattest the calibration bags do not reject.

    The bags' log-likelihood ``ℓ(T) = Σ_i log Σ_{y ∈ S_i} π_T(y | x_i)``
    (``π_T(· | x)`` the plausibility over all classes; the likelihood of the
    bags if a bag says nothing about which of its candidates is true) is
    maximised over :data:`LOG_TEMPERATURE_RANGE`; the temperature returned is
    the upper end of its 95 % likelihood-ratio interval, the largest ``T`` with
    ``ℓ(T) ≥ max ℓ − χ²₁(0.95)/2``.  A flatter plausibility spreads the
    calibration labels over more candidates and raises ``q̂``: the hedge
    against the estimate's uncertainty is largest where the bags say least.
    """
    bags = _as_bags(bags, np.shape(conformity_values))
    every = np.ones_like(bags)

    def loglik(log_t):
        with np.errstate(divide="ignore"):  # a bag of no plausibility at an extreme T: log 0 = -inf, never chosen
            return float(np.log((plausibility(conformity_values, every, math.exp(log_t)) * bags).sum(axis=1)).sum())

    low, high = LOG_TEMPERATURE_RANGE
    best = minimize_scalar(lambda t: -loglik(t), bounds=(low, high), method="bounded", options={"xatol": 1e-4}).x
    floor = loglik(best) - LIKELIHOOD_MARGIN
    if loglik(high) >= floor:
        return math.exp(high)
    return math.exp(brentq(lambda t: loglik(t) - floor, best, high, xtol=1e-4))


def crossfit_conformity(X, bags, folds=CROSSFIT_FOLDS, random_state=0):
    """DST-PLL's plausibility ``pl({y})`` of every row and class, each row's from a fit on the other folds' rows.

    The weights of ``weights="crossfit"`` (:data:`WEIGHTS`) before their
    temperature: they judge a calibration row's candidates by its neighbors
    among the other calibration rows, so they neither rest on the method
    being calibrated nor let a row vouch for its own bag.  Each fold's
    features are min-max scaled on its training rows; a fold trains on at
    most :data:`CROSSFIT_MAX_ROWS` of them (a seeded sample) and uses
    ``min(10, rows)`` neighbors.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    bags : bool ndarray of shape (n, l)
        An empty bag counts as every label.
    folds : int
    random_state : int, RandomState or None
        Draws the folds, the samples and DST-PLL's tie-breaking.

    Returns
    -------
    ndarray of shape (n, l)
    """
    X = np.asarray(X, dtype=np.float64)
    bags = _as_bags(bags, (X.shape[0], np.shape(bags)[1]))
    rng = check_random_state(random_state)
    fold = rng.permutation(X.shape[0]) % folds
    values = np.zeros(bags.shape)
    for k in range(folds):
        held, train = np.flatnonzero(fold == k), np.flatnonzero(fold != k)
        if train.size > CROSSFIT_MAX_ROWS:
            train = np.sort(rng.choice(train, CROSSFIT_MAX_ROWS, replace=False))
        if held.size == 0:
            continue
        scaler = MinMaxScaler().fit(X[train])
        model = DstPll(n_neighbors=min(10, train.size), random_state=rng.randint(2**31 - 1))
        without_support_test(model).fit(scaler.transform(X[train]), bags[train])
        values[held] = model.conformity(scaler.transform(X[held]))
    return values


def calibration_weights(scores, conformity_values, bags, procedure=DEFAULT_PROCEDURE, temperature=None):
    """Each calibration row's distribution ``w_i`` over its bag (:data:`PROCEDURES`), and the temperature it used.

    Parameters
    ----------
    scores : ndarray of shape (n, l)
        ``s(x_i, y)``.
    conformity_values : ndarray of shape (n, l)
        ``c(x_i, y)``, for the plausibility of ``monte_carlo``.
    bags : bool ndarray of shape (n, l)
        An empty bag counts as every label.
    procedure : {"monte_carlo", "conservative", "min"}
    temperature : float, optional
        ``monte_carlo``'s plausibility temperature when already fitted (:func:`fit_temperature`).

    Returns
    -------
    weights : ndarray of shape (n, l)
        Rows sum to 1; 0 off the bag.  A point mass on the worst (``conservative``)
        or best (``min``) candidate.
    temperature : float or None
        ``monte_carlo``'s fitted ``T``; None for the others.
    """
    if procedure not in PROCEDURES:
        raise InvalidParameterError(f"unknown procedure {procedure!r}: choose from {', '.join(PROCEDURES)}")
    scores = np.asarray(scores, dtype=np.float64)
    bags = _as_bags(bags, scores.shape)
    if procedure == "monte_carlo":
        temperature = fit_temperature(conformity_values, bags) if temperature is None else temperature
        return plausibility(conformity_values, bags, temperature), temperature
    pick = (np.where(bags, scores, -np.inf).argmax(axis=1) if procedure == "conservative"
            else np.where(bags, scores, np.inf).argmin(axis=1))
    return np.eye(scores.shape[1])[pick], None


def _needed_tail(n, alpha):
    """``α(n + 1) − 1``: a label's p-value exceeds α iff the calibration weight at or above its score exceeds this.

    ``α`` is read as the decimal it prints as, so that a boundary case such as
    ``n = 9, α = 0.1`` is not moved by binary floating point.
    """
    return float(Fraction(repr(float(alpha))) * (n + 1) - 1)


def min_calibration_rows(alpha):
    """The fewest calibration rows with which some set can leave a label out at level α: ``⌈1/α⌉ − 1``."""
    return math.ceil(1 / Fraction(repr(float(alpha)))) - 1


def weighted_quantile(scores, weights, alpha):
    """``q̂``: the largest of ``scores`` whose p-value ``(1 + t(s)) / (n + 1)`` exceeds α; ``+inf`` if any score would.

    ``scores`` and ``weights`` are (n, l) (a calibration row per row, its
    weights summing to 1); ``t(s)`` is the weight on scores ``≥ s``.
    """
    s, tail, n = _calibration_tail(scores, weights)
    need = _needed_tail(n, alpha)
    if need < 0:
        return math.inf
    admitted = np.flatnonzero(tail[:-1] > need)
    return float(s[admitted[-1]]) if admitted.size else -math.inf


def _calibration_tail(scores, weights):
    """The calibration scores with positive weight, sorted; ``t`` at each (and 0 past the last); n."""
    scores = np.asarray(scores, dtype=np.float64)
    weights = np.broadcast_to(np.asarray(weights, dtype=np.float64), scores.shape)
    keep = weights > 0
    s, w = scores[keep], weights[keep]
    order = np.argsort(s, kind="stable")
    s, w = s[order], w[order]
    tail = np.append(np.cumsum(w[::-1])[::-1], 0.0)
    return s, tail, scores.shape[0]


def conformal_quantile(scores, alpha):
    """Split conformal ``q̂`` of one score per row: the ⌈(n + 1)(1 − α)⌉-th smallest, ``+inf`` when that rank exceeds ``n``."""
    scores = np.asarray(scores, dtype=np.float64).reshape(-1, 1)
    return weighted_quantile(scores, np.ones_like(scores), alpha)


def bag_hit_rate(sets, bags):
    """The share of rows whose set meets their bag (an empty bag counts as every label): an upper bound of coverage."""
    sets = np.asarray(sets, dtype=bool)
    return float((sets & _as_bags(bags, sets.shape)).any(axis=1).mean())


class ConformalSets(BaseEstimator):
    """Prediction sets calibrated on rows with candidate bags only; what they guarantee depends on ``procedure``.

    The definitions, and what each procedure guarantees under which
    assumption, are in :mod:`pll.reject.conformal`.

    Parameters
    ----------
    method : fitted estimator
        A pll method, or any classifier with ``predict_proba`` and
        ``classes_``, **fitted on rows other than the calibration rows** (every
        guarantee needs it; nothing here can check it).
    alpha : float, default=0.1
        Miscoverage level in (0, 1).
    procedure : {"monte_carlo", "conservative", "min"}, default="monte_carlo"
        What stands in for the calibration rows' unknown labels (:data:`PROCEDURES`).
    score : {"probability", "calibrated", "own", "cumulative"} or None, default=None
        The nonconformity built from the method's conformity (:data:`SCORES`);
        None: the method's (:data:`DEFAULT_SCORES`).
    weights : {"auto", "method", "crossfit"}, default="auto"
        ``monte_carlo``'s distribution over each calibration bag
        (:data:`WEIGHTS`): the method's plausibility, DST-PLL's cross-fitted
        over the calibration rows (:func:`crossfit_conformity`), or the
        method's checked against the cross-fitted ones, falling back to them
        when they ask for a larger threshold.  The cross-fitted weights read
        the calibration rows ``X`` as features (neighbors by distance): pass
        ``"method"`` where ``X`` is something else (row keys, say).
    random_state : int, RandomState or None, default=0
        Draws the cross-fitting folds (``weights`` ``auto`` or ``crossfit``).

    Attributes
    ----------
    quantile_ : float
        ``q̂``: a label is in a row's set iff its score is at most this.
    score_ : str
        The score used.
    temperature_ : float or None
        The plausibility's ``T`` (``monte_carlo`` or score ``calibrated``), else None.
    weights_ : str or None
        The weights calibrated on, ``method`` or ``crossfit`` (None unless ``monte_carlo``).
    weights_check_ : float or None
        With ``weights="auto"``: the share of calibration rows covered by the
        method-weighted threshold, by the cross-fitted weights' reckoning.
    bounds_ : dict
        ``coverage_if_worst`` and ``coverage_if_best``: the calibration rows'
        coverage at ``q̂`` if every bag's least (most) conforming candidate
        were its true label, which brackets it whatever the truth.
    n_calibration_ : int
        Calibration rows.
    empty_bags_ : int
        Calibration rows without candidates, counted as every label.
    classes_ : ndarray of shape (l,)
        The method's classes.

    Examples
    --------
    >>> import numpy as np, pll
    >>> X = np.arange(24.0)[:, None]
    >>> S = np.array([[1, 0]] * 12 + [[0, 1]] * 12, dtype=bool)
    >>> method = pll.PlKnn(n_neighbors=3).fit(X[::2], S[::2])
    >>> sets = pll.ConformalSets(method, alpha=0.2).fit(X[1::2], S[1::2])
    >>> sets.predict_sets(np.array([[0.5], [23.0]])).astype(int)
    array([[1, 0],
           [0, 1]])
    >>> sets.predict_with_reject(np.array([[0.5]])).reason
    array(['none'], dtype='<U10')

    Twelve calibration rows are too few for α = 0.05 (it needs 19):

    >>> pll.ConformalSets(method, alpha=0.05).fit(X[1::2], S[1::2])
    Traceback (most recent call last):
    ...
    pll.errors.InvalidDataError: 12 calibration rows are too few for conformal sets at alpha=0.05: it needs at least 19; with fewer every set would hold every label (use more rows or a larger alpha)
    """

    _parameter_constraints = {
        "method": "no_validation",
        "alpha": [Interval(Real, 0.0, 1.0, closed="neither")],
        "procedure": [StrOptions(set(PROCEDURES))],
        "score": [StrOptions(set(SCORES)), None],
        "weights": [StrOptions(set(WEIGHTS))],
        "random_state": ["random_state"],
    }

    def __init__(self, method, alpha=0.1, *, procedure=DEFAULT_PROCEDURE, score=None, weights=DEFAULT_WEIGHTS,
                 random_state=0):
        self.method = method
        self.alpha = alpha
        self.procedure = procedure
        self.score = score
        self.weights = weights
        self.random_state = random_state

    def fit(self, X, S, neighbors=None):
        """Calibrate ``q̂`` on rows ``X`` with candidate sets ``S`` (any form the method's ``fit`` takes).

        Refuses, before anything is stored, fewer rows than α needs
        (:func:`min_calibration_rows`) and calibration rows of which none has
        a candidate.
        """
        check_params(self)
        classes = getattr(self.method, "classes_", None)
        if classes is None:
            raise NotFittedError(
                f"ConformalSets needs {type(self.method).__name__} fitted, on rows other than the calibration rows"
            )
        values = conformity(self.method, X, neighbors)
        bags, _ = encode_bags(S, values.shape[0], classes, what="calibration candidate sets")
        n, needed = values.shape[0], min_calibration_rows(self.alpha)
        if n < needed:
            raise InvalidDataError(
                f"{n} calibration rows are too few for conformal sets at alpha={self.alpha}: it needs at least "
                f"{needed}; with fewer every set would hold every label (use more rows or a larger alpha)"
            )
        empty = ~bags.any(axis=1)
        if empty.all():
            raise InvalidDataError(f"none of the {n} calibration rows has a candidate label: nothing to calibrate on")
        score = DEFAULT_SCORES.get(type(self.method).__name__, DEFAULT_SCORE) if self.score is None else self.score
        needs_temperature = self.procedure == "monte_carlo" or score == "calibrated"
        temperature = fit_temperature(values, bags) if needs_temperature else None
        scores = nonconformity(values, score, temperature)
        weights, used, check = self._weights(X, scores, values, bags, temperature)
        self._scores, self._tail, _ = _calibration_tail(scores, weights)
        quantile = weighted_quantile(scores, weights, self.alpha)
        inside = np.where(_as_bags(bags, scores.shape), scores, np.nan)
        self.classes_ = classes
        self.score_ = score
        self.quantile_ = quantile
        self.temperature_ = temperature
        self.weights_ = used
        self.weights_check_ = check
        self.bounds_ = {"coverage_if_worst": float((np.nanmax(inside, axis=1) <= quantile).mean()),
                        "coverage_if_best": float((np.nanmin(inside, axis=1) <= quantile).mean())}
        self.n_calibration_ = n
        self.empty_bags_ = int(empty.sum())
        return self

    def __setstate__(self, state):
        """Sets calibrated before the weights were a choice (pickled in a model) calibrated on the method's."""
        if "weights" not in state:
            monte_carlo = state.get("procedure") == "monte_carlo"
            state = {"weights": "method", "random_state": 0, "weights_": "method" if monte_carlo else None,
                     "weights_check_": None, **state}
        super().__setstate__(state)

    def _weights(self, X, scores, values, bags, temperature):
        """The calibration rows' weights, which weights they are (None unless ``monte_carlo``), and the check's value.

        ``auto`` calibrates on the method's plausibility unless, under the
        cross-fitted weights, the threshold it gives would cover fewer
        calibration rows than ``1 − α`` asks for (the check: that coverage,
        :attr:`weights_check_`); then on the cross-fitted weights, whose
        threshold is the larger.
        """
        if self.procedure != "monte_carlo":
            return calibration_weights(scores, values, bags, self.procedure)[0], None, None
        if self.weights == "method":
            return calibration_weights(scores, values, bags, self.procedure, temperature)[0], "method", None
        crossfit = crossfit_conformity(X, bags, random_state=self.random_state)
        crossfit = plausibility(crossfit, bags, fit_temperature(crossfit, bags))
        if self.weights == "crossfit":
            return crossfit, "crossfit", None
        own = calibration_weights(scores, values, bags, self.procedure, temperature)[0]
        threshold = weighted_quantile(scores, own, self.alpha)
        check = float((crossfit * (scores <= threshold)).sum(axis=1).mean())
        if weighted_quantile(scores, crossfit, self.alpha) > threshold:
            return crossfit, "crossfit", check
        return own, "method", check

    def calibration_report(self):
        """What the calibration chose and what can be said of it without true labels, for a run's log.

        ``procedure``, ``score``, ``alpha``, ``quantile``, ``weights`` and
        ``weights_check`` (:attr:`weights_`, :attr:`weights_check_`),
        ``temperature`` (None unless ``monte_carlo``), ``calibration_rows``, ``empty_bags``, the
        :attr:`bounds_`, and ``notes``: one line per finding (bounds wider
        than α, empty bags, weights switched by the check, the temperature at the
        edge of its search).
        """
        self._check_fitted()
        worst, best = self.bounds_["coverage_if_worst"], self.bounds_["coverage_if_best"]
        notes = []
        if best - worst > self.alpha:
            notes.append(
                f"bounds are wide: whatever candidates are true, calibration coverage lies in [{worst:.3f}, {best:.3f}]; "
                f"coverage of {1 - self.alpha:.2f} rests on the {self.procedure} procedure's assumption"
            )
        if best < 1 - self.alpha:
            notes.append(f"even if every bag's best candidate were true, calibration coverage would be {best:.3f} "
                         f"< {1 - self.alpha:.2f}: the bags contradict the procedure's assumption")
        if self.empty_bags_:
            notes.append(f"{self.empty_bags_} of {self.n_calibration_} calibration bags are empty (counted as every "
                         "label): they cannot hold their true label, as every guarantee assumes")
        if self.weights_check_ is not None and self.weights_ == "crossfit":
            notes.append(f"weights switched: the method's plausibility puts the threshold where cross-fitted DST-PLL "
                         f"weights see {self.weights_check_:.3f} of the calibration rows covered, under "
                         f"{1 - self.alpha:.2f}; calibrated on the cross-fitted weights instead")
        if self.temperature_ is not None and not (
                LOG_TEMPERATURE_RANGE[0] + 0.01 < math.log(self.temperature_) < LOG_TEMPERATURE_RANGE[1] - 0.01):
            notes.append(f"the plausibility's temperature {self.temperature_:.3g} is at the edge of its search: "
                         "the bags barely inform it")
        return {"procedure": self.procedure, "score": self.score_, "alpha": self.alpha, "quantile": self.quantile_,
                "weights": self.weights_, "weights_check": self.weights_check_, "temperature": self.temperature_, "calibration_rows": self.n_calibration_,
                "empty_bags": self.empty_bags_, **self.bounds_, "notes": notes}

    def _check_fitted(self):
        check_fitted(self, "quantile_", "ConformalSets is not calibrated: call fit with the calibration rows first")

    def p_values(self, X, neighbors=None, candidates=None):
        """The conformal p-value of every class, shape (n, l): ``(1 + t(s(x, y))) / (n + 1)`` (:mod:`pll.reject.conformal`).

        Classes outside a row's ``candidates`` get 0.  ``C(x) = {y : p(y) > α}``
        in exact arithmetic, with α read as the decimal it prints as (a float
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
        more certain rows score higher (1 for a row with a single candidate),
        and 0 for an empty set, where no label conforms (its candidates'
        small p-values would otherwise score it like a certain row, and no
        threshold on the score would give this option's own rule);
        ``sets``: :meth:`predict_sets`.  An empty set is a rejection.
        ``reason``: ``conflict`` for a set of several labels, ``no_support``
        for an empty one (see :mod:`pll.reject.conformal`).
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
            score=np.where(size == 0, 0.0, 1.0 - second),
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
        return np.where(cand, nonconformity(values, self.score_, self.temperature_), np.inf), cand

    def _p_values(self, s, cand):
        """``(1 + t(s)) / (n + 1)`` where ``cand``, else 0."""
        at_least = self._tail[np.searchsorted(self._scores, s, side="left")]
        return np.where(cand, (1.0 + at_least) / (self.n_calibration_ + 1.0), 0.0)

    def _candidates(self, candidates, n):
        if candidates is None:
            return np.ones((n, len(self.classes_)), dtype=bool)
        cand, _ = encode_bags(candidates, n, self.classes_, what="query candidate sets")
        return empty_as_all(cand)


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

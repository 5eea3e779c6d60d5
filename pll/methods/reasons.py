"""Why a row was rejected: one reason code per prediction, from a fixed list, by a fixed precedence.

Every reject option fills :attr:`RejectPrediction.reason <pll.methods.RejectPrediction>`
(the methods' own ``predict_with_reject`` and ``disambiguate``, the trust option
:func:`pll.reject.trust_score.with_trust`, conformal sets
:meth:`pll.ConformalSets.predict_with_reject`): ``none`` for an accepted row;
for a rejected row the first of these conditions that holds, in this order
(:data:`PRECEDENCE`):

``no_support``
    The row is far from the training data (out of distribution).  At ``fit``
    a method computes its *support radius*: the ``q``-quantile
    (``support_quantile``, default :data:`DEFAULT_SUPPORT_QUANTILE`; linear
    interpolation, ``numpy.quantile``) of the training rows' own ``k``-th
    neighbor distances, each row's neighbors being the other rows (the
    given training neighbors, else one search at ``fit``).  A row whose
    ``k``-th neighbor distance exceeds the radius (strictly) is
    ``no_support`` (:func:`support_radius`, :func:`beyond_support`).  By
    construction about ``1 − q`` of the training rows themselves lie beyond
    it.  ``k`` is the method's own neighbor count; PL A-kNN, whose
    neighborhood is adaptive, compares the distance at its *final*
    neighborhood size ``K`` with the ``q``-quantile of the training rows'
    ``K``-th neighbor distances.  PlClassifier uses no neighbors and has no
    such test.  Conformal sets use their own notion: an empty set (no class
    conforms as well as the calibration bags do).
``conflict``
    The evidence points to different labels (DST-PLL: the conflict mass of
    Yager's rule; PL-kNN: a runner-up close to the winner that some neighbor
    holds without the winner; IPAL, PlClassifier: a runner-up close by the
    method's own measure; PL A-kNN: several labels survive and some neighbor
    separates them; trust: another class about as near as the predicted one;
    conformal: a set of several labels).
``vague``
    The evidence is spread because the neighbors' bags are large (DST-PLL:
    mass left on the whole candidate set by uninformative neighbors; PL-kNN:
    a large mean bag size; PL A-kNN: several labels survive that every
    neighbor's bag holds together or not at all).
``low_score``
    Rejected, but none of the above holds: the score fell below the
    threshold for a cause none of the definitions names (e.g. DST-PLL
    neighbors that all carry the bag ``{a, b}``: no conflict, no
    uninformative neighbor, yet no single label), or a threshold was set above
    the method's own.

Each method states its definitions and margins (constructor parameters with
documented defaults) in its docstring.

Why this precedence.  ``no_support`` comes first because a row with no
training rows near it has neighbors that were not chosen for being alike,
so what they say, conflicting or vague, is no evidence about the row, and the
remedy differs (data from that region, not a closer look at the labels).
``conflict`` comes before ``vague``: a conflict names the labels a reviewer
has to decide between, and more of the same evidence will not remove it,
while vagueness only says the evidence is thin (more or smaller bags would
lift it); where both hold (some neighbors disagree, the rest carry nothing)
the disagreement is the finding.

Why a fourth code and not ``vague`` for the unexplained.  Every named code is
a checked statement about the evidence (a distance beyond a radius, a mass
above a margin).  Filing the rejections none of them explains under
``vague`` would make it mean "vague or unknown" and hide exactly the rows
whose rejection the definitions (or their margins) do not cover.

Evidence.  A prediction with reasons also carries ``evidence``, a dict of
per-row arrays: the conditions themselves, under the codes' names (every
condition that holds, not only the first), and the numbers they threshold
(``neighbor_distance``, ``support_radius`` and each method's own).  The
conditions are evaluated on every row, accepted or not, so :func:`assign`
gives the codes for any other accept decision (a threshold calibrated on a
hold-out: :meth:`RejectPrediction.with_accept <pll.methods.RejectPrediction.with_accept>`).

Examples
--------
>>> import numpy as np
>>> accept = np.array([True, False, False, False, False])
>>> assign(accept, {NO_SUPPORT: [True, True, False, False, False],
...                 CONFLICT: [True, True, True, False, False],
...                 VAGUE: [False, True, True, True, False]}).tolist()
['none', 'no_support', 'conflict', 'vague', 'low_score']
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidDataError

NONE = "none"
NO_SUPPORT = "no_support"
CONFLICT = "conflict"
VAGUE = "vague"
LOW_SCORE = "low_score"
REASONS = (NONE, NO_SUPPORT, CONFLICT, VAGUE, LOW_SCORE)
"""Every code a prediction may carry."""
REJECTIONS = REASONS[1:]
"""The codes of a rejected row: every reject option reports on all of them, so runs compare key by key."""
PRECEDENCE = (NO_SUPPORT, CONFLICT, VAGUE)
"""The conditions, strongest first: a rejected row gets the first that holds, else ``low_score``."""
REASON_DTYPE = np.dtype(f"U{max(map(len, REASONS))}")
DEFAULT_SUPPORT_QUANTILE = 0.99
"""``q`` of the support radius: one training row in a hundred lies beyond it, so a new row beyond it
is as isolated as the most isolated 1 % of the training data."""


def support_radius(distances, quantile=DEFAULT_SUPPORT_QUANTILE):
    """The support radius: the ``quantile`` of training rows' own neighbor distances, along axis 0.

    Parameters
    ----------
    distances : array of shape (n,) or (n, k)
        Each training row's distance to its ``k``-th nearest *other* training
        row (shape (n,)), or to each of its ``k`` nearest (shape (n, k): one
        radius per neighborhood size, as PL A-kNN needs).
    quantile : float in (0, 1], or None
        None turns the test off (returns None).

    Returns
    -------
    float, ndarray of shape (k,), or None
    """
    if quantile is None:
        return None
    distances = np.asarray(distances, dtype=np.float64)
    radius = np.quantile(distances, quantile, axis=0)
    return float(radius) if radius.ndim == 0 else radius


def beyond_support(distance, radius):
    """``distance > radius`` elementwise (bool): the rows that are ``no_support``; all False when ``radius`` is None."""
    distance = np.asarray(distance, dtype=np.float64)
    if radius is None:
        return np.zeros(distance.shape, dtype=bool)
    return distance > radius


def support_evidence(distance, radius):
    """The evidence of the support test: ``no_support``, ``neighbor_distance`` and ``support_radius`` per row.

    Empty when the test is off (``radius`` None).  ``radius`` may be one
    value or one per row.
    """
    if radius is None:
        return {}
    distance = np.asarray(distance, dtype=np.float64)
    radius = np.broadcast_to(np.asarray(radius, dtype=np.float64), distance.shape)
    return {NO_SUPPORT: distance > radius, "neighbor_distance": distance, "support_radius": np.array(radius)}


def assign(accept, conditions=None):
    """One code per row: ``none`` where accepted, else the first of :data:`PRECEDENCE` that holds, else ``low_score``.

    Parameters
    ----------
    accept : bool array of shape (n,)
    conditions : mapping, optional
        Code -> bool array of shape (n,) for the conditions the reject option
        evaluates (other keys, e.g. numeric evidence, are ignored; a missing
        condition never holds).

    Returns
    -------
    ndarray of shape (n,), str
        Values of :data:`REASONS`.
    """
    accept = np.asarray(accept, dtype=bool)
    codes = np.full(accept.shape, LOW_SCORE, dtype=REASON_DTYPE)
    conditions = conditions or {}
    for code in reversed(PRECEDENCE):  # the strongest written last wins
        held = conditions.get(code)
        if held is not None:
            held = np.asarray(held, dtype=bool)
            if held.shape != accept.shape:
                raise InvalidDataError(f"condition {code!r} has shape {held.shape}, accept {accept.shape}")
            codes[held] = code
    codes[accept] = NONE
    return codes


def reason_report(reason, correct):
    """How the rejections split by reason, and how often each reason's rejected label was wrong.

    Parameters
    ----------
    reason : str array of shape (n,)
        Codes of :data:`REASONS` (``none`` where accepted).
    correct : bool array of shape (n,)
        Whether each row's predicted label is right (for a rejected row: the
        label it abstained on).

    Returns
    -------
    dict
        For every code of :data:`REJECTIONS`: ``reason_share_<code>``, its rows
        over the rejected rows, and ``reason_error_<code>``, the share of its
        rows whose label is wrong.  A reason with no row has share 0 and error
        0 (no error among no rows; read the error with its share), so every
        option of every method reports the same keys.  A reason whose error
        is near 1 rejects rows rightly; one near the accepted rows' error
        rejects rows that were as good as the accepted.

    Examples
    --------
    >>> r = reason_report(["none", "conflict", "conflict", "no_support"], [True, False, True, False])
    >>> r["reason_share_conflict"], r["reason_error_conflict"], r["reason_error_vague"]
    (0.6666666666666666, 0.5, 0.0)
    """
    reason = np.asarray(reason)
    correct = np.asarray(correct, dtype=bool)
    if reason.shape != correct.shape:
        raise InvalidDataError(f"reason_report: {reason.shape[0]} reasons for {correct.shape[0]} rows")
    unknown = sorted(set(np.unique(reason).tolist()) - set(REASONS))
    if unknown:
        raise InvalidDataError(f"reason_report: unknown reason code(s) {unknown}; known: {list(REASONS)}")
    n_rejected = int((reason != NONE).sum())
    out = {}
    for code in REJECTIONS:
        rows = reason == code
        n = int(rows.sum())
        out[f"reason_share_{code}"] = n / n_rejected if n_rejected else 0.0
        out[f"reason_error_{code}"] = float((~correct[rows]).mean()) if n else 0.0
    return out

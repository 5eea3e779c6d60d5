"""Bounds on the reject risk ``R_λ`` from candidate bags alone, for hold-out rows without true labels.

Calibrating a reject threshold (:func:`pll.evaluation.calibrate_thresholds`)
needs to know which accepted predictions are wrong.  On hold-out rows that
carry candidate bags ``S_i`` but no true labels this is known only in part:

* a prediction outside a non-empty bag is *certainly wrong*;
* a prediction is *certainly right* only where the bag is exactly ``{label}``;
* any other prediction (inside a bag of two or more labels) may be either.

**Assumption:** every non-empty bag holds its row's true label.  Then, for a
threshold ``t`` (a row is accepted iff ``score > t``, as everywhere in
:mod:`pll.evaluation`), the number ``E(t)`` of accepted wrong rows satisfies

    #(accepted and certainly wrong)  <=  E(t)  <=  #(accepted and not certainly right),

and since the rejection rate ``r(t)`` needs no labels, ``R_λ(t) = E(t)/n + λ·r(t)``
lies between the two values these counts give.  The lower bound is the
partial-label loss (:func:`pll.evaluation.partial_label_report`), the upper
bound the risk if every ambiguous accepted prediction were wrong; they differ
by the fraction of accepted ambiguous rows.  If a bag misses its true label
(noisy partial labels) either bound can fail on that row.

Rows with an empty bag say nothing about their label, so they are *unknown*:
never certainly wrong, never certainly right.  They count as possibly wrong in
the upper bound and as right in the lower one, so the bounds hold for them
whatever their true label is (the assumption is needed only for non-empty
bags).  They stay in ``n`` like every other hold-out row.

**Scope:** the bounds are exact statements about the rows given -- no sampling,
no probability -- and nothing is claimed for test rows or any other rows.  A
threshold chosen here carries over to new rows only as far as the hold-out
represents them, exactly like one chosen with true labels.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..errors import InvalidParameterError, PllError
from ._reject import DEFAULT_LAMBDAS, calibrate_thresholds, calibrated_metrics, threshold_sweep
from .metric_names import bound_name, calibrated_name
from ..utils.validation import check_bags, check_labels, check_lambdas, check_nonempty, check_scores


def _check_labels(labels, bags):
    bags = check_bags(bags, what="bags")
    return check_labels(labels, "labels", bags.shape[0], bags.shape[1]), bags


def _check_scored(score, labels, bags):
    labels, bags = _check_labels(labels, bags)
    check_nonempty(labels.size)
    return check_scores(score, "score", labels.size), labels, bags


def _wrong(labels, bags):
    return bags.any(axis=1) & ~bags[np.arange(labels.size), labels]


def _right(labels, bags):
    return (bags.sum(axis=1) == 1) & bags[np.arange(labels.size), labels]


def certainly_wrong(labels, bags):
    """Predictions that are wrong if every non-empty bag holds its true label: outside a non-empty bag.

    Parameters
    ----------
    labels : int array of shape (n,)
        Predicted class indices in ``[0, l)``.
    bags : bool (or 0/1) array of shape (n, l)
        Candidate bags; an empty bag makes its row unknown (never certainly wrong).

    Returns
    -------
    bool ndarray of shape (n,)

    Examples
    --------
    >>> certainly_wrong([0, 1, 2], [[1, 1, 0], [1, 0, 0], [0, 0, 0]]).tolist()
    [False, True, False]
    """
    return _wrong(*_check_labels(labels, bags))


def certainly_right(labels, bags):
    """Predictions that are right if every non-empty bag holds its true label: the bag is exactly ``{label}``.

    Parameters
    ----------
    labels : int array of shape (n,)
        Predicted class indices in ``[0, l)``.
    bags : bool (or 0/1) array of shape (n, l)
        Candidate bags; an empty bag makes its row unknown (never certainly right).

    Returns
    -------
    bool ndarray of shape (n,)

    Examples
    --------
    >>> certainly_right([0, 0, 2], [[1, 1, 0], [1, 0, 0], [0, 0, 0]]).tolist()
    [False, True, False]
    """
    return _right(*_check_labels(labels, bags))


def risk_bounds(score, labels, bags, lambdas=DEFAULT_LAMBDAS):
    """Lower and upper bounds of ``R_λ`` on these rows at every threshold of :func:`~pll.evaluation.threshold_sweep`.

    The thresholds, and what is accepted at each (``score > threshold``), are
    those of :func:`~pll.evaluation.threshold_sweep`; the bounds are its
    ``nonreject_error`` with "certainly wrong" (lower) and "not certainly
    right" (upper) as the errors -- see the module docstring for why they
    bound the true value.

    Parameters
    ----------
    score : float array of shape (n,)
        The reject option's score (higher = more certain).
    labels : int array of shape (n,)
        Predicted class indices in ``[0, l)``.
    bags : bool (or 0/1) array of shape (n, l)
        The rows' candidate bags.
    lambdas : sequence of float
        Costs of a rejection.

    Returns
    -------
    DataFrame with one row per threshold (ascending) and columns
        ``threshold``, ``accepted``, ``rejection_rate`` (exact),
        ``nonreject_error_lower``, ``nonreject_error_upper``, and for each λ
        ``risk_lower_<λ:.2f>`` and ``risk_upper_<λ:.2f>``.

    Examples
    --------
    >>> b = risk_bounds([0.9, 0.5, 0.1], [0, 1, 1], [[1, 0], [1, 1], [1, 0]], lambdas=(0.1,))
    >>> b["risk_lower_0.10"].round(3).tolist(), b["risk_upper_0.10"].round(3).tolist()
    ([0.333, 0.033, 0.067, 0.1], [0.667, 0.367, 0.067, 0.1])
    """
    lams = check_lambdas(lambdas)
    score, labels, bags = _check_scored(score, labels, bags)
    lower = threshold_sweep(score, ~_wrong(labels, bags))
    upper = threshold_sweep(score, _right(labels, bags))
    table = lower[["threshold", "accepted", "rejection_rate"]].assign(
        nonreject_error_lower=lower["nonreject_error"], nonreject_error_upper=upper["nonreject_error"]
    )
    for lam in lams:
        for side in ("lower", "upper"):
            table[bound_name(side, lam)] = table[f"nonreject_error_{side}"] + lam * table["rejection_rate"]
    return table


def _calibrate(score, labels, bags, lambdas):
    # Minimizing R_λ with "certainly right" as the correctness minimizes the upper bound, over the
    # same thresholds and with the same tie rule as calibration with true labels.
    calibration = calibrate_thresholds(score, _right(labels, bags), lambdas)
    lower = calibrated_metrics(calibration, score, ~_wrong(labels, bags))
    return calibration.assign(
        risk_upper=calibration["risk"],
        risk_lower=[lower[calibrated_name("risk", lam)] for lam in calibration["lambda"]],
        rejects_all=[not np.any(score > threshold) for threshold in calibration["threshold"]],
    )


def calibrate_thresholds_from_bags(score, labels, bags, lambdas=DEFAULT_LAMBDAS):
    """For each λ, the threshold minimizing the *upper bound* of ``R_λ`` on held-out rows with bags.

    The guaranteed risk: no other threshold has a smaller upper bound on these
    rows (under the module's assumption).  Candidates and ties are those of
    :func:`~pll.evaluation.calibrate_thresholds` (on ties the lowest threshold,
    which accepts the most rows, wins).  Rejecting every row has upper bound
    exactly λ, so the chosen one never exceeds λ; when nothing beats it (few
    single-label bags: little is certainly right) the choice rejects all, and
    ``rejects_all`` says so.  The result can be passed to
    :func:`~pll.evaluation.calibrated_metrics` like that function's output.

    Parameters
    ----------
    score : float array of shape (n,)
    labels : int array of shape (n,)
        Predicted class indices in ``[0, l)``.
    bags : bool (or 0/1) array of shape (n, l)
    lambdas : sequence of float

    Returns
    -------
    DataFrame with one row per λ and columns ``lambda``, ``threshold``,
        ``risk`` (the minimized criterion, i.e. equal to ``risk_upper``: the
        column :func:`~pll.evaluation.calibrate_thresholds` has),
        ``rejection_rate``, ``risk_upper``, ``risk_lower`` (both at the chosen
        threshold) and ``rejects_all`` (bool).

    Examples
    --------
    >>> c = calibrate_thresholds_from_bags([0.9, 0.5, 0.1], [0, 1, 1], [[1, 0], [1, 1], [1, 0]], lambdas=(0.1,))
    >>> c[["threshold", "rejects_all"]].values.tolist(), c["risk_upper"].round(3).tolist()
    ([[0.5, False]], [0.067])
    """
    lams = check_lambdas(lambdas)
    return _calibrate(*_check_scored(score, labels, bags), lams)


def _unpack(setting, prediction):
    if not isinstance(prediction, tuple | list) or len(prediction) != 2:
        raise InvalidParameterError(f"predictions[{setting!r}] must be a pair (score, labels)")
    return prediction


def bounds_by_setting(predictions, bags, lambdas=DEFAULT_LAMBDAS):
    """Bag-based bounds for several settings of a method (e.g. ``k``), to choose one without true labels.

    For each setting, the threshold of :func:`calibrate_thresholds_from_bags`
    with its bounds, and bounds of the accuracy without rejection.  A setting
    with a smaller ``risk_upper`` has a better *guarantee* on these rows; its
    true risk may still be anywhere in ``[risk_lower, risk_upper]``, so two
    settings whose intervals overlap are not told apart by this table.

    Parameters
    ----------
    predictions : mapping setting -> (score, labels)
        Each setting's predictions of the same hold-out rows, e.g.
        ``{k: (r.score, r.labels) for k, r in results.items()}``.
    bags : bool (or 0/1) array of shape (n, l)
        The hold-out rows' candidate bags.
    lambdas : sequence of float

    Returns
    -------
    DataFrame with one row per (setting, λ) and columns ``setting``, the
        columns of :func:`calibrate_thresholds_from_bags`, ``accuracy_upper``
        (the partial-label accuracy: predictions not certainly wrong) and
        ``accuracy_lower`` (predictions certainly right).

    Examples
    --------
    >>> bags = [[1, 0], [1, 1], [0, 1]]
    >>> t = bounds_by_setting({1: ([0.9, 0.5, 0.1], [0, 0, 0]), 3: ([0.9, 0.1, 0.5], [0, 1, 1])}, bags, (0.1,))
    >>> t[["setting", "risk_upper", "accuracy_upper"]].round(3).values.tolist()
    [[1.0, 0.067, 0.667], [3.0, 0.033, 1.0]]
    """
    lams = check_lambdas(lambdas)
    if not isinstance(predictions, Mapping) or not predictions:
        raise InvalidParameterError("predictions must be a non-empty mapping setting -> (score, labels)")
    tables = []
    for setting, prediction in predictions.items():
        try:
            score, labels, checked = _check_scored(*_unpack(setting, prediction), bags)
        except PllError as exc:
            raise type(exc)(f"setting {setting!r}: {exc}") from None
        table = _calibrate(score, labels, checked, lams).assign(
            accuracy_upper=float(np.mean(~_wrong(labels, checked))),
            accuracy_lower=float(np.mean(_right(labels, checked))),
        )
        tables.append(table.assign(setting=[setting] * len(table)))
    table = pd.concat(tables, ignore_index=True)
    return table[["setting", *table.columns.drop("setting")]]

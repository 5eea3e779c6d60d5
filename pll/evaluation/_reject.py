"""Evaluation of predictions with a reject option (DST-PLL paper, sections 2 and 5).

Everything here works on plain arrays: predicted ``labels``, the reject
decision ``accept`` and the method's continuous ``score`` (higher = more
certain; a row is accepted iff ``score > threshold``).  Whether a prediction
is right is judged against true labels, or -- for data without ground truth --
with the partial-label loss ``1[label not in bag]`` (:func:`correctness`).

Conventions (see ``ALGORITHMS.md``, "Reject-option evaluation"):

* An empty accepted set has covered accuracy 1.0 (no accepted errors) and
  selective risk 0.0.
* Threshold sweeps move the threshold through every distinct score, so rows
  with equal scores are always accepted or rejected together.
* ``R_λ`` metric names carry λ with two decimals: ``risk_0.10``.
"""

from __future__ import annotations


import numpy as np
import pandas as pd
from scipy import stats

from ..errors import InvalidDataError, InvalidParameterError
from .metric_names import calibrated_name, risk_name, smaller_is_better
from ..methods._base import in_candidates, predict_with_reject
from ..utils.validation import (
    check_bags,
    check_fraction,
    check_labels,
    check_lambdas,
    check_mask,
    check_nonempty,
    check_scores,
)

DEFAULT_LAMBDAS = (0.0, 0.05, 0.10, 0.15, 0.20)
DEFAULT_PERCENTILES = tuple(range(0, 101))
# Risks of different operating points differ by at least 1/(100 n) for λ with two
# decimals; anything closer is a tie of the same exact rational value.
_TIE_TOLERANCE = 1e-12


def correctness(labels, *, y_true=None, bags=None, n_classes=None):
    """Whether each prediction is right.

    Parameters
    ----------
    labels : int array of shape (n,)
        Predicted class indices.
    y_true : int array of shape (n,), optional
        True class indices: a prediction is right iff it equals the true label.
    bags : bool array of shape (n, l), optional
        Candidate bags, used when there is no ground truth: a prediction is
        right iff it lies in the row's bag (partial-label loss
        ``1[label not in bag]``).  Every bag must be non-empty -- a row without
        a bag has nothing to judge by; leave such rows out beforehand.
    n_classes : int, optional
        Number of classes, to check the label range (taken from ``bags``).

    Returns
    -------
    correct : bool ndarray of shape (n,)

    Examples
    --------
    >>> correctness([0, 2], y_true=[0, 1]).tolist()
    [True, False]
    >>> correctness([0, 2], bags=[[1, 0, 1], [1, 1, 0]]).tolist()
    [True, False]
    """
    if (y_true is None) == (bags is None):
        raise InvalidParameterError("give exactly one of y_true (true labels) or bags (partial-label loss)")
    if bags is not None:
        bags = check_bags(bags, what="bags")
        empty = np.flatnonzero(~bags.any(axis=1))
        if empty.size:
            raise InvalidDataError(f"bags[{empty[0]}] is empty: the partial-label loss needs a candidate bag")
        labels = check_labels(labels, "labels", bags.shape[0], bags.shape[1])
        return bags[np.arange(labels.size), labels]
    y_true = check_labels(y_true, "y_true", None, n_classes)
    labels = check_labels(labels, "labels", y_true.size, n_classes)
    return labels == y_true


def _report(correct, accept, lambdas):
    n = correct.size
    n_accepted = int(accept.sum())
    rejection = (n - n_accepted) / n
    error = int((accept & ~correct).sum()) / n
    report = {
        "accuracy": int(correct.sum()) / n,
        "rejection_rate": rejection,
        "covered_accuracy": int((accept & correct).sum()) / n_accepted if n_accepted else 1.0,
        "nonreject_error": error,
    }
    for lam in lambdas:
        report[risk_name(lam)] = error + lam * rejection
    return report


def reject_report(y_true, labels, accept, lambdas=DEFAULT_LAMBDAS, *, n_classes=None):
    """Accuracy, Matthews correlation, rejection rate, covered accuracy, non-reject error and ``R_λ``.

    Parameters
    ----------
    y_true, labels : int arrays of shape (n,)
        True and predicted class indices.
    accept : bool array of shape (n,)
        False where the prediction is rejected.
    lambdas : sequence of float
        Costs of a rejection; each gives ``risk_<λ:.2f> = nonreject_error + λ·rejection_rate``.
    n_classes : int, optional
        When given, labels must lie in ``[0, n_classes)``.

    Returns
    -------
    dict
        ``accuracy`` and ``mcc`` (over all rows, rejected ones included),
        ``rejection_rate``, ``covered_accuracy`` (1.0 when nothing is
        accepted), ``nonreject_error`` and ``risk_0.00`` ... ``risk_0.20``.

    Examples
    --------
    >>> r = reject_report([0, 1, 2, 2], [0, 1, 1, 2], [True, True, True, False])
    >>> r["rejection_rate"], r["nonreject_error"], r["risk_0.10"]
    (0.25, 0.25, 0.275)
    """
    lams = check_lambdas(lambdas)
    correct = correctness(labels, y_true=y_true, n_classes=n_classes)
    check_nonempty(correct.size)
    accept = check_mask(accept, "accept", correct.size)
    report = _report(correct, accept, lams)
    mcc = matthews_correlation(np.asarray(y_true, dtype=np.int64), np.asarray(labels, dtype=np.int64))
    return {"accuracy": report.pop("accuracy"), "mcc": mcc, **report}


def matthews_correlation(y_true, labels):
    """Multi-class Matthews correlation (Gorodkin's R_K) of non-negative int labels; 0.0 when undefined.

    Examples
    --------
    >>> matthews_correlation(np.array([0, 1, 2]), np.array([0, 1, 2]))
    1.0
    """
    size = int(max(y_true.max(), labels.max())) + 1
    t = np.bincount(y_true, minlength=size).astype(np.float64)
    p = np.bincount(labels, minlength=size).astype(np.float64)
    n = float(y_true.size)
    c = float(np.sum(y_true == labels))
    denom = np.sqrt((n * n - p @ p) * (n * n - t @ t))
    return float((c * n - p @ t) / denom) if denom > 0 else 0.0


def partial_label_report(bags, labels, accept, lambdas=DEFAULT_LAMBDAS):
    """:func:`reject_report` without ground truth: "wrong" means ``label not in bag``.

    Parameters
    ----------
    bags : bool array of shape (n, l)
        Each row's (non-empty) candidate bag.
    labels : int array of shape (n,)
    accept : bool array of shape (n,)
    lambdas : sequence of float

    Returns
    -------
    dict
        The keys of :func:`reject_report` except ``mcc``, which needs true labels.

    Examples
    --------
    >>> partial_label_report([[1, 1, 0], [0, 0, 1]], [1, 0], [True, True])["accuracy"]
    0.5
    """
    lams = check_lambdas(lambdas)
    correct = correctness(labels, bags=bags)
    check_nonempty(correct.size)
    return _report(correct, check_mask(accept, "accept", correct.size), lams)


class RiskScorer:
    """``−R_λ`` of an estimator's own reject option on held-out rows: a scorer for scikit-learn's model selection.

    Called as ``scorer(estimator, X, S)``: the estimator (a pll method, or a
    pipeline ending in one) predicts with its reject option; a prediction is
    right when it lies in the row's candidate set (with 1-d labels: equals the
    label), and ``R_λ = nonreject_error + λ·rejection_rate``.  Negated, since
    scikit-learn maximizes scores.  Make one with :func:`make_risk_scorer`.
    """

    def __init__(self, lam):
        self.lam = check_lambdas([lam])[0]

    def __call__(self, estimator, X, S, sample_weight=None):
        if sample_weight is not None:
            raise InvalidParameterError("the risk scorer takes no sample weights")
        prediction = predict_with_reject(estimator, X)
        correct = in_candidates(estimator.classes_, prediction.labels, S)
        check_nonempty(correct.size)
        return -_report(correct, prediction.accept, (self.lam,))[risk_name(self.lam)]

    def __repr__(self):
        return f"make_risk_scorer({self.lam!r})"


def make_risk_scorer(lam=0.10):
    """A scorer for ``GridSearchCV`` and ``cross_val_score``: ``−R_λ`` of the estimator's own reject option.

    ``scoring="accuracy"`` needs 1-d labels (with candidate sets scikit-learn
    scores every fold NaN, with only a warning) and ignores the reject
    option; this scorer takes candidate sets and judges the reject option
    (see :class:`RiskScorer`), and the estimators' default ``score`` takes
    candidate sets too.

    Examples
    --------
    >>> import numpy as np, pll
    >>> from sklearn.model_selection import GridSearchCV
    >>> X = np.arange(12.0)[:, None]
    >>> S = [{"a"}, {"a", "b"}, {"a"}, {"a", "c"}, {"a"}, {"a"}, {"b"}, {"b", "c"}, {"b"}, {"b"}, {"c"}, {"b"}]
    >>> search = GridSearchCV(pll.PlKnn(), {"n_neighbors": [1, 3]}, scoring=make_risk_scorer(0.1), cv=3)
    >>> search.fit(X, S).best_params_
    {'n_neighbors': 3}
    """
    return RiskScorer(lam)


def threshold_sweep(score, correct):
    """Every operating point of a score threshold: the accuracy–rejection and risk–coverage curves.

    A row is accepted iff ``score > threshold``.  The thresholds are the
    distinct scores, ascending, preceded by one just below the lowest score
    (``np.nextafter(min, -inf)``: every row accepted); the last one (the
    highest score) rejects every row.  Rows with equal scores are therefore
    always accepted or rejected together.

    Parameters
    ----------
    score : float array of shape (n,)
    correct : bool array of shape (n,)

    Returns
    -------
    DataFrame with one row per threshold (ascending) and columns
        ``threshold``; ``accepted`` (count); ``rejection_rate`` (fraction
        rejected, the accuracy–rejection curve's x); ``coverage``
        (``1 - rejection_rate``); ``covered_accuracy`` (accuracy of the
        accepted rows, 1.0 when none: its y); ``selective_risk``
        (``1 - covered_accuracy``: the risk–coverage curve's y);
        ``nonreject_error`` (accepted and wrong, over all ``n`` rows).

    Examples
    --------
    >>> s = threshold_sweep([0.9, 0.5, 0.5, 0.1], [True, True, False, False])
    >>> s["accepted"].tolist(), s["covered_accuracy"].round(3).tolist()
    ([4, 3, 1, 0], [0.5, 0.667, 1.0, 1.0])
    """
    score = check_scores(score, "score")
    correct = check_mask(correct, "correct", score.size)
    check_nonempty(score.size)
    n = score.size
    values, inverse = np.unique(score, return_inverse=True)
    # Rows accepted at threshold values[j]: those in groups above j.
    group_rows = np.bincount(inverse, minlength=values.size)
    group_right = np.bincount(inverse, weights=correct, minlength=values.size).astype(np.int64)
    accepted = np.concatenate([np.cumsum(group_rows[::-1])[::-1], [0]])
    right = np.concatenate([np.cumsum(group_right[::-1])[::-1], [0]])
    thresholds = np.concatenate([[np.nextafter(values[0], -np.inf)], values])
    with np.errstate(invalid="ignore", divide="ignore"):
        covered = np.where(accepted > 0, right / np.maximum(accepted, 1), 1.0)
    return pd.DataFrame(
        {
            "threshold": thresholds,
            "accepted": accepted,
            "rejection_rate": (n - accepted) / n,
            "coverage": accepted / n,
            "covered_accuracy": covered,
            "selective_risk": 1.0 - covered,
            "nonreject_error": (accepted - right) / n,
        }
    )


def aurc(sweep):
    """Area under the risk–coverage curve of a :func:`threshold_sweep`.

    The curve is read as a step function of coverage: on ``(c_prev, c]`` the
    selective risk is the one at coverage ``c``.  Without ties in the scores
    this is the usual ``(1/n) Σ_k risk(top k)``; a group of tied rows enters
    as a whole, so the value does not depend on how ties would be ordered.
    Lower is better; 0 when no accepted row is ever wrong.

    Examples
    --------
    >>> aurc(threshold_sweep([0.9, 0.5, 0.1], [True, False, True]))  # (0 + 1/2 + 1/3) / 3
    0.2777777777777778
    """
    cov = sweep["coverage"].to_numpy()[::-1]
    risk = sweep["selective_risk"].to_numpy()[::-1]
    return float(np.sum(np.diff(cov, prepend=0.0) * risk))


def calibrate_thresholds(score, correct, lambdas=DEFAULT_LAMBDAS):
    """For each λ, the threshold minimizing ``R_λ`` on held-out rows (validation, never test).

    Candidates are the thresholds of :func:`threshold_sweep`.  When several
    reach the minimal risk (exactly, up to float rounding), the *lowest*
    threshold wins: the operating point that accepts the most rows.

    Parameters
    ----------
    score : float array of shape (n,)
    correct : bool array of shape (n,)
        Judged like test rows (:func:`correctness`).
    lambdas : sequence of float

    Returns
    -------
    DataFrame with one row per λ and columns ``lambda``, ``threshold``,
        ``risk`` (the minimal ``R_λ`` on these rows) and ``rejection_rate``.

    Examples
    --------
    >>> c = calibrate_thresholds([0.9, 0.5, 0.1], [True, True, False], lambdas=(0.1,))
    >>> c["threshold"].tolist(), c["risk"].round(3).tolist()
    ([0.1], [0.033])
    """
    lams = check_lambdas(lambdas)
    sweep = threshold_sweep(score, correct)
    err = sweep["nonreject_error"].to_numpy()
    rej = sweep["rejection_rate"].to_numpy()
    rows = []
    for lam in lams:
        risk = err + lam * rej
        best = int(np.flatnonzero(risk <= risk.min() + _TIE_TOLERANCE)[0])
        rows.append((lam, sweep["threshold"].iat[best], risk[best], rej[best]))
    return pd.DataFrame(rows, columns=["lambda", "threshold", "risk", "rejection_rate"])


def calibrated_metrics(calibration, score, correct):
    """Apply calibrated thresholds to (test) rows.

    Parameters
    ----------
    calibration : DataFrame
        The output of :func:`calibrate_thresholds` on validation rows.
    score : float array of shape (n,)
    correct : bool array of shape (n,)

    Returns
    -------
    dict
        For each λ: ``cal_threshold_<λ>``, ``cal_rejection_rate_<λ>`` and
        ``cal_risk_<λ>`` (``R_λ`` of ``accept = score > threshold``), λ with
        two decimals.
    """
    score = check_scores(score, "score")
    correct = check_mask(correct, "correct", score.size)
    check_nonempty(score.size)
    out = {}
    for lam, threshold in zip(calibration["lambda"], calibration["threshold"]):
        accept = score > threshold
        report = _report(correct, accept, (lam,))
        out[calibrated_name("threshold", lam)] = float(threshold)
        out[calibrated_name("rejection_rate", lam)] = report["rejection_rate"]
        out[calibrated_name("risk", lam)] = report[risk_name(lam)]
    return out


def precision_at_percentile(score, correct, percentiles=DEFAULT_PERCENTILES):
    """Trust-score style precision curves (Jiang et al. 2018, section 5).

    For percentile level ``p``: the "trustworthy" rows score at least the
    ``p``-th percentile of the scores (the top ``100 - p`` %), and
    ``precision_trustworthy`` is the fraction of them that are correct; the
    "suspicious" rows are the same construction on the negated score -- they
    score at most the ``(100 - p)``-th percentile (the bottom ``100 - p`` %)
    -- and ``precision_suspicious`` is the fraction of them that are wrong.
    Percentiles interpolate linearly (``numpy.percentile``); ties at a
    cutoff are included, so neither set is ever empty.

    Returns
    -------
    DataFrame with one row per ``p`` and columns ``percentile``,
        ``cutoff_trustworthy``, ``fraction_trustworthy``,
        ``precision_trustworthy``, ``cutoff_suspicious``,
        ``fraction_suspicious``, ``precision_suspicious``.

    Examples
    --------
    >>> t = precision_at_percentile([0.1, 0.2, 0.3, 0.4], [False, True, True, True], [0, 50])
    >>> t["precision_trustworthy"].tolist(), t["precision_suspicious"].tolist()
    ([0.75, 1.0], [0.25, 0.5])
    """
    score = check_scores(score, "score")
    correct = check_mask(correct, "correct", score.size)
    check_nonempty(score.size)
    p = np.asarray(percentiles, dtype=np.float64).ravel()
    if p.size == 0 or np.any(~np.isfinite(p)) or np.any((p < 0) | (p > 100)):
        raise InvalidParameterError(f"percentiles must lie in [0, 100], got {list(percentiles)!r}")
    high = np.percentile(score, p)
    low = np.percentile(score, 100.0 - p)
    trusted = score[None, :] >= high[:, None]
    suspect = score[None, :] <= low[:, None]
    return pd.DataFrame(
        {
            "percentile": p,
            "cutoff_trustworthy": high,
            "fraction_trustworthy": trusted.mean(axis=1),
            "precision_trustworthy": (trusted & correct).sum(axis=1) / trusted.sum(axis=1),
            "cutoff_suspicious": low,
            "fraction_suspicious": suspect.mean(axis=1),
            "precision_suspicious": (suspect & ~correct).sum(axis=1) / suspect.sum(axis=1),
        }
    )


def compare_methods(results, *, by=("dataset",), pair=("seed",), value="value", lower_is_better=None, alpha=0.05):
    """Mean ± std across seeds and paired t-tests against the best method (DST-PLL paper, Tables 1–2).

    Within each group (the ``by`` columns, plus ``metric`` when ``results``
    has such a column) the best method is the one with the best mean; every
    other method is compared with it by a two-sided paired t-test
    (:func:`scipy.stats.ttest_rel`) over the observations both share, paired
    by the ``pair`` columns.  ``marked`` is True for the best method and for
    those not significantly different from it (``p >= alpha``) -- the
    methods the papers' tables set in bold.  Conventions: identical paired
    values give ``p = 1``; otherwise fewer than :data:`MIN_PAIRS` shared
    observations give ``p = NaN`` and no mark (a t-test on one degree of
    freedom would leave almost every method "not significantly worse"); ties in the best mean go to the first method
    in sorted order; ``std`` is the sample standard deviation (``ddof=1``),
    0.0 for a single observation.

    Parameters
    ----------
    results : DataFrame
        Long table: one row per observation with the columns ``by``,
        ``method``, ``pair`` (e.g. the seed), optionally ``metric``, and the
        numeric ``value``.  For Table 1 style (per data set, paired by
        seed): ``by=("dataset",), pair=("seed",)``.  For Table 2 style
        (average over all settings, paired by setting):
        ``by=(), pair=("dataset", "seed")``.
    by, pair : sequence of str
    value : str
        The column holding the numbers.
    lower_is_better : bool, optional
        Direction; default: decided per metric name by
        :func:`smaller_is_better` (risks, errors, rejection rate
        and AURC are lower-is-better), else higher is better.
    alpha : float
        Significance level.

    Returns
    -------
    DataFrame with one row per (group, method), columns ``*by``,
        [``metric``,] ``method``, ``mean``, ``std``, ``n``, ``best``
        (bool), ``p_value`` (vs the best; NaN for the best itself) and
        ``marked`` (bool), sorted by group then method.

    Examples
    --------
    >>> import pandas as pd
    >>> r = pd.DataFrame({"dataset": "d", "method": ["a"] * 3 + ["b"] * 3,
    ...                   "seed": [0, 1, 2] * 2, "value": [0.9, 0.8, 0.85, 0.5, 0.45, 0.3]})
    >>> compare_methods(r)[["method", "best", "marked"]].values.tolist()
    [['a', True, True], ['b', False, False]]
    """
    by, pair = list(by), list(pair)
    if "metric" in results.columns and "metric" not in by:
        by = by + ["metric"]
    needed = by + pair + ["method", value]
    missing = [c for c in needed if c not in results.columns]
    if missing:
        raise InvalidDataError(f"results lack column(s) {', '.join(missing)}")
    check_fraction(alpha, "alpha")
    values = pd.to_numeric(results[value], errors="coerce")
    bad = np.flatnonzero(~np.isfinite(values.to_numpy(dtype=np.float64)))
    if bad.size:
        raise InvalidDataError(f"results row {results.index[bad[0]]}: {value} is not a finite number")
    frame = results[by + pair + ["method"]].assign(_value=values.to_numpy(dtype=np.float64))
    dup = frame.duplicated(by + pair + ["method"])
    if dup.any():
        raise InvalidDataError(
            f"results row {frame.index[np.flatnonzero(dup)[0]]}: a second value for the same "
            f"({', '.join(by + pair + ['method'])})"
        )
    out = []
    groups = frame.groupby(by, sort=True) if by else [((), frame)]
    for key, group in groups:
        key = key if isinstance(key, tuple) else (key,)
        keyed = dict(zip(by, key))
        lower = lower_is_better if lower_is_better is not None else _group_direction(keyed)
        stats_ = group.groupby("method", sort=True)["_value"].agg(["mean", "count"])
        stats_["std"] = group.groupby("method", sort=True)["_value"].std(ddof=1).fillna(0.0)
        means = stats_["mean"].to_numpy()
        best = int(np.argmin(means) if lower else np.argmax(means))
        p_values = _paired_p_values(group, pair, stats_.index, best)
        for i, (method, row) in enumerate(stats_.iterrows()):
            p = p_values[i]
            out.append(
                {
                    **keyed,
                    "method": method,
                    "mean": row["mean"],
                    "std": row["std"],
                    "n": int(row["count"]),
                    "best": i == best,
                    "p_value": p,
                    "marked": bool(i == best or (np.isfinite(p) and p >= alpha)),
                }
            )
    return pd.DataFrame(out)


MIN_PAIRS = 3
"""Fewest paired observations (e.g. seeds) a method's comparison with the best needs to be tested."""


def paired_p_values(diff):
    """Two-sided paired t-test p-value of each column of ``diff`` (pairs x columns of differences, NaN: not shared).

    The project's one paired t-test (:func:`compare_methods` and the paper
    reproduction's tables use it): a column whose shared differences are all
    zero gives 1.0; otherwise fewer than :data:`MIN_PAIRS` shared pairs give
    NaN.  All columns at once, so that a grid's summary tests every metric in
    one pass; the same p-value as :func:`scipy.stats.ttest_rel`.
    """
    diff = np.asarray(diff, dtype=np.float64)
    p = np.full(diff.shape[1], np.nan)
    shared = np.isfinite(diff)
    n = shared.sum(axis=0)
    d = np.where(shared, diff, 0.0)
    mean = d.sum(axis=0) / np.maximum(n, 1)
    var = (np.where(shared, diff - mean, 0.0) ** 2).sum(axis=0) / np.maximum(n - 1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / np.sqrt(var / np.maximum(n, 1))
    tested = n >= MIN_PAIRS
    p[tested] = 2 * stats.t.sf(np.abs(t[tested]), n[tested] - 1)
    p[(n > 0) & np.all(d == 0, axis=0)] = 1.0  # identical on every shared pair
    return p


def _paired_p_values(group, pair, methods, best):
    """Paired p-value of each of ``methods`` against ``methods[best]`` (NaN for the best itself)."""
    if not pair:
        return np.full(len(methods), np.nan)
    wide = group.pivot(index=pair, columns="method", values="_value").reindex(columns=methods).to_numpy()
    p = paired_p_values(wide[:, [best]] - wide)
    p[best] = np.nan
    return p


def _group_direction(keyed):
    metric = keyed.get("metric")
    return bool(metric is not None and smaller_is_better(str(metric)))

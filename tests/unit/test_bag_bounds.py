"""Bag-based bounds of R_λ: checked against the true risk of pll.evaluation, computed from hidden true labels."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pll.evaluation.bag_bounds import (
    bounds_by_setting,
    calibrate_thresholds_from_bags,
    certainly_right,
    certainly_wrong,
    risk_bounds,
)
from pll.errors import InvalidDataError, InvalidParameterError
from pll.evaluation import DEFAULT_LAMBDAS, calibrate_thresholds, calibrated_metrics, reject_report
from pll.evaluation.metric_names import risk_name

LAMBDAS = DEFAULT_LAMBDAS + (0.5,)


@st.composite
def bagged_rows(draw):
    """Scores with ties, predictions, bags that hold a hidden true label (some bags emptied), and that label."""
    n = draw(st.integers(1, 25))
    n_classes = draw(st.integers(1, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    y = rng.integers(0, n_classes, n)
    bags = (rng.random((n, n_classes)) < draw(st.sampled_from([0.0, 0.3, 0.7]))) | np.eye(n_classes, dtype=bool)[y]
    bags[rng.random(n) < draw(st.sampled_from([0.0, 0.2]))] = False
    labels = np.where(rng.random(n) < 0.6, y, rng.integers(0, n_classes, n))
    score = rng.integers(0, draw(st.integers(1, 6)), n) / 5.0
    return score, labels, bags, y


def true_risk(y, labels, accept, lam):
    return reject_report(y, labels, accept, (lam,))[risk_name(lam)]


def thresholds_of(score):
    """Every operating point, as threshold_sweep documents them."""
    values = np.unique(score)
    return np.concatenate([[np.nextafter(values[0], -np.inf)], values])


def upper_by_counting(score, labels, bags, threshold, lam):
    accept = score > threshold
    sure = np.array([bag.sum() == 1 and bag[label] for label, bag in zip(labels, bags)])
    return (accept & ~sure).sum() / score.size + lam * (~accept).sum() / score.size


# ------------------------------------------------------------------ certainly wrong / right


def test_certainly_wrong_and_right_by_hand():
    labels = [0, 1, 2, 0]
    bags = [[1, 0, 0], [0, 0, 0], [1, 1, 0], [0, 1, 0]]  # sure, empty bag, outside, outside
    assert certainly_wrong(labels, bags).tolist() == [False, False, True, True]
    assert certainly_right(labels, bags).tolist() == [True, False, False, False]
    # Inside a bag of two: neither.
    assert certainly_wrong([1], [[1, 1]]).tolist() == [False]
    assert certainly_right([1], [[1, 1]]).tolist() == [False]


# ------------------------------------------------------------------ the bounds


@settings(max_examples=100, deadline=None)
@given(bagged_rows())
def test_bounds_enclose_the_true_risk_at_every_threshold(case):
    score, labels, bags, y = case
    table = risk_bounds(score, labels, bags, LAMBDAS)
    np.testing.assert_array_equal(table["threshold"], thresholds_of(score))
    for _, row in table.iterrows():
        accept = score > row["threshold"]
        for lam in LAMBDAS:
            risk = true_risk(y, labels, accept, lam)
            assert row[f"risk_lower_{lam:.2f}"] <= risk <= row[f"risk_upper_{lam:.2f}"]


@settings(max_examples=100, deadline=None)
@given(bagged_rows())
def test_bounds_are_attained_by_some_labelling_consistent_with_the_bags(case):
    score, labels, bags, _ = case
    n_classes = bags.shape[1]
    best = np.array([label if bag[label] or not bag.any() else np.argmax(bag) for label, bag in zip(labels, bags)])
    worst = np.array([
        next((c for c in range(n_classes) if c != label and (bag[c] or not bag.any())), label)
        for label, bag in zip(labels, bags)
    ])
    table = risk_bounds(score, labels, bags, (0.1,))
    for _, row in table.iterrows():
        accept = score > row["threshold"]
        assert row["risk_lower_0.10"] == pytest.approx(true_risk(best, labels, accept, 0.1), abs=1e-12)
        if n_classes > 1:  # one class: an empty bag's only possible label is the prediction
            assert row["risk_upper_0.10"] == pytest.approx(true_risk(worst, labels, accept, 0.1), abs=1e-12)


@settings(max_examples=50, deadline=None)
@given(bagged_rows())
def test_singleton_bags_give_the_true_risk_and_the_true_label_calibration(case):
    score, labels, _, y = case
    n_classes = max(int(y.max()), int(labels.max())) + 1
    bags = np.eye(n_classes, dtype=bool)[y]
    table = risk_bounds(score, labels, bags, LAMBDAS)
    for lam in LAMBDAS:
        np.testing.assert_array_equal(table[f"risk_lower_{lam:.2f}"], table[f"risk_upper_{lam:.2f}"])
        truth = [true_risk(y, labels, score > t, lam) for t in table["threshold"]]
        np.testing.assert_allclose(table[f"risk_upper_{lam:.2f}"], truth, rtol=0, atol=1e-12)
    ours = calibrate_thresholds_from_bags(score, labels, bags, LAMBDAS)
    theirs = calibrate_thresholds(score, labels == y, LAMBDAS)
    np.testing.assert_array_equal(ours[theirs.columns].to_numpy(), theirs.to_numpy())
    np.testing.assert_array_equal(ours["risk_lower"], ours["risk_upper"])


def test_bounds_by_hand_with_an_empty_bag():
    score = [0.8, 0.6, 0.4, 0.2]
    labels = [0, 1, 2, 0]
    bags = [[1, 0, 0], [0, 0, 0], [1, 1, 0], [0, 1, 0]]  # sure, unknown, wrong, wrong
    table = risk_bounds(score, labels, bags, (0.2,))
    assert table["accepted"].tolist() == [4, 3, 2, 1, 0]
    np.testing.assert_allclose(table["nonreject_error_lower"], [0.5, 0.25, 0, 0, 0])
    np.testing.assert_allclose(table["nonreject_error_upper"], [0.75, 0.5, 0.25, 0, 0])
    np.testing.assert_allclose(table["risk_lower_0.20"], [0.5, 0.3, 0.1, 0.15, 0.2])
    np.testing.assert_allclose(table["risk_upper_0.20"], [0.75, 0.55, 0.35, 0.15, 0.2])


# ------------------------------------------------------------------ calibration


def test_calibration_by_hand_breaks_ties_towards_accepting_more():
    score = np.array([0.8, 0.6, 0.4, 0.2])
    bags = [[1, 0, 0], [0, 0, 0], [1, 1, 0], [0, 1, 0]]
    cal = calibrate_thresholds_from_bags(score, [0, 1, 2, 0], bags, (0.0, 0.1, 0.2))
    # λ = 0: accepting only the sure row and rejecting all both bound the risk by 0; the first accepts more.
    assert cal["threshold"].tolist() == [0.6, 0.6, 0.6]
    np.testing.assert_allclose(cal["risk_upper"], [0.0, 0.075, 0.15])
    np.testing.assert_allclose(cal["risk_lower"], [0.0, 0.075, 0.15])
    np.testing.assert_allclose(cal["rejection_rate"], [0.75] * 3)
    assert cal["rejects_all"].tolist() == [False] * 3
    assert cal.columns[:4].tolist() == ["lambda", "threshold", "risk", "rejection_rate"]


@settings(max_examples=100, deadline=None)
@given(bagged_rows(), st.sampled_from(LAMBDAS))
def test_calibrated_threshold_minimizes_the_upper_bound_over_all_thresholds(case, lam):
    score, labels, bags, y = case
    cal = calibrate_thresholds_from_bags(score, labels, bags, (lam,)).iloc[0]
    candidates = thresholds_of(score)
    uppers = np.array([upper_by_counting(score, labels, bags, t, lam) for t in candidates])
    assert cal["risk_upper"] == pytest.approx(uppers.min(), abs=1e-12)
    assert cal["threshold"] == candidates[np.flatnonzero(uppers <= uppers.min() + 1e-12)[0]]
    assert cal["risk"] == cal["risk_upper"] <= lam + 1e-12
    accept = score > cal["threshold"]
    assert cal["rejects_all"] == (not accept.any())
    assert cal["rejection_rate"] == (~accept).mean()
    assert cal["risk_lower"] <= true_risk(y, labels, accept, lam) <= cal["risk_upper"]


def test_rejects_all_when_no_accepted_row_is_certainly_right():
    # Every prediction lies inside a bag of two: accepting a rows bounds the risk by λ + a(1 - λ)/n > λ.
    score = np.array([0.9, 0.7, 0.5, 0.3])
    bags = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1], [1, 1, 0]])
    cal = calibrate_thresholds_from_bags(score, [0, 1, 2, 1], bags, (0.0, 0.1, 0.2))
    assert cal["rejects_all"].tolist() == [True] * 3
    assert cal["threshold"].tolist() == [0.9] * 3
    np.testing.assert_allclose(cal["risk_upper"], [0.0, 0.1, 0.2])
    np.testing.assert_allclose(cal["rejection_rate"], [1.0] * 3)
    # One certainly right row at the top beats rejecting all once rejections cost something.
    bags[0] = [1, 0, 0]
    cal = calibrate_thresholds_from_bags(score, [0, 1, 2, 1], bags, (0.1,))
    assert cal["rejects_all"].tolist() == [False]
    assert cal["threshold"].tolist() == [0.7]


def test_calibration_is_usable_by_calibrated_metrics():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 3, 40)
    bags = np.eye(3, dtype=bool)[y] | (rng.random((40, 3)) < 0.3)
    labels = np.where(rng.random(40) < 0.7, y, rng.integers(0, 3, 40))
    score = rng.random(40)
    cal = calibrate_thresholds_from_bags(score, labels, bags, DEFAULT_LAMBDAS)
    upper = calibrated_metrics(cal, score, certainly_right(labels, bags))
    lower = calibrated_metrics(cal, score, ~certainly_wrong(labels, bags))
    for lam, row in zip(DEFAULT_LAMBDAS, cal.itertuples()):
        assert upper[f"cal_threshold_{lam:.2f}"] == row.threshold
        assert upper[f"cal_risk_{lam:.2f}"] == pytest.approx(row.risk_upper)
        assert lower[f"cal_risk_{lam:.2f}"] == pytest.approx(row.risk_lower)
    test_score = rng.random(10)
    assert set(calibrated_metrics(cal, test_score, test_score > 0.5)) == set(upper)


# ------------------------------------------------------------------ several settings


def test_bounds_by_setting_matches_calibration_per_setting_and_brackets_accuracy():
    rng = np.random.default_rng(7)
    y = rng.integers(0, 4, 30)
    bags = np.eye(4, dtype=bool)[y] | (rng.random((30, 4)) < 0.4)
    predictions = {k: (rng.random(30), np.where(rng.random(30) < 0.5 + k / 40, y, rng.integers(0, 4, 30)))
                   for k in (5, 10, 20)}
    table = bounds_by_setting(predictions, bags, (0.05, 0.2))
    assert table["setting"].tolist() == [5, 5, 10, 10, 20, 20]
    for k, (score, labels) in predictions.items():
        rows = table[table["setting"] == k].drop(columns=["setting", "accuracy_upper", "accuracy_lower"])
        expected = calibrate_thresholds_from_bags(score, labels, bags, (0.05, 0.2))
        np.testing.assert_array_equal(rows.to_numpy(), expected.to_numpy())
        accuracy = np.mean(labels == y)
        row = table[table["setting"] == k].iloc[0]
        assert row["accuracy_lower"] <= accuracy <= row["accuracy_upper"]
        assert row["accuracy_upper"] == np.mean(bags[np.arange(30), labels])


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("score", "labels", "bags", "lambdas", "error", "match"),
    [
        ([0.5], [0], [1, 0], (0.1,), InvalidDataError, "bags must be a 2-d array"),
        ([0.5], [3], [[1, 0]], (0.1,), InvalidDataError, r"labels\[0\] = 3 is not a class index \[0, 2\)"),
        ([0.5], [-1], [[1, 0]], (0.1,), InvalidDataError, r"labels\[0\] = -1"),
        ([0.5], [0.5], [[1, 0]], (0.1,), InvalidDataError, "labels must hold integer class indices"),
        ([0.5], [0, 1], [[1, 0]], (0.1,), InvalidDataError, "lengths differ: labels has 2 rows, expected 1"),
        ([0.5, 0.1], [0], [[1, 0]], (0.1,), InvalidDataError, "lengths differ: score has 2 rows, expected 1"),
        ([np.nan], [0], [[1, 0]], (0.1,), InvalidDataError, r"score\[0\] = nan is not a finite score"),
        ([0.5], [0], [[2, 0]], (0.1,), InvalidDataError, "bags must hold only 0/1 values"),
        ([], [], np.zeros((0, 2)), (0.1,), InvalidDataError, "no rows to evaluate"),
        ([0.5], [0], [[1, 0]], (-0.1,), InvalidParameterError, "lambdas must be finite numbers >= 0"),
        ([0.5], [0], [[1, 0]], (0.1, 0.101), InvalidParameterError, "coincide at two decimals"),
    ],
)
@pytest.mark.parametrize("function", [risk_bounds, calibrate_thresholds_from_bags])
def test_bad_input_is_refused_with_what_is_wrong(function, score, labels, bags, lambdas, error, match):
    with pytest.raises(error, match=match):
        function(score, labels, bags, lambdas)


def test_certainly_wrong_refuses_labels_out_of_range():
    with pytest.raises(InvalidDataError, match=r"labels\[1\] = 2 is not a class index"):
        certainly_wrong([0, 2], [[1, 0], [0, 1]])
    with pytest.raises(InvalidDataError, match="lengths differ"):
        certainly_right([0], [[1, 0], [0, 1]])


@pytest.mark.parametrize(
    ("predictions", "error", "match"),
    [
        ({}, InvalidParameterError, "non-empty mapping"),
        ([([0.5], [0])], InvalidParameterError, "non-empty mapping"),
        ({5: [0.5]}, InvalidParameterError, r"predictions\[5\] must be a pair \(score, labels\)"),
        ({5: ([0.5], [0]), 10: ([0.5], [4])}, InvalidDataError, r"^setting 10: labels\[0\] = 4"),
        ({5: ([0.5, 0.2], [0, 0])}, InvalidDataError, "^setting 5: lengths differ"),
    ],
)
def test_bounds_by_setting_refuses_bad_predictions(predictions, error, match):
    with pytest.raises(error, match=match):
        bounds_by_setting(predictions, [[1, 0]], (0.1,))

"""The mathematics of reject-option evaluation, against brute-force oracles written here."""

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.metrics import matthews_corrcoef

from pll.errors import InvalidDataError, InvalidParameterError, PllError
from pll.evaluation import (
    DEFAULT_LAMBDAS,
    aurc,
    calibrate_thresholds,
    calibrated_metrics,
    compare_methods,
    correctness,
    partial_label_report,
    precision_at_percentile,
    reject_report,
    threshold_sweep,
)
from pll.evaluation.metric_names import risk_name, smaller_is_better


def random_case(rng, n, n_classes=4, n_distinct=None):
    y = rng.integers(0, n_classes, n)
    labels = np.where(rng.random(n) < 0.7, y, rng.integers(0, n_classes, n))
    if n_distinct is None:
        score = rng.random(n)
    else:  # few distinct values: many ties
        score = rng.integers(0, n_distinct, n) / max(n_distinct - 1, 1)
    return y, labels, score


# Scores with many ties, and the correctness of each row.
scored_rows = st.integers(1, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(-3, 3).map(lambda v: v / 4), min_size=n, max_size=n),
        st.lists(st.booleans(), min_size=n, max_size=n),
    )
)


# ---------------------------------------------------------------- reject_report


def naive_report(y, labels, accept, lambdas):
    n = len(y)
    acc = sum(a == b for a, b in zip(y, labels)) / n
    rejected = sum(not a for a in accept)
    accepted_right = sum(1 for t, p, a in zip(y, labels, accept) if a and t == p)
    accepted_wrong = sum(1 for t, p, a in zip(y, labels, accept) if a and t != p)
    out = {
        "accuracy": acc,
        "rejection_rate": rejected / n,
        "covered_accuracy": accepted_right / (n - rejected) if n - rejected else 1.0,
        "nonreject_error": accepted_wrong / n,
    }
    for lam in lambdas:
        out[risk_name(lam)] = accepted_wrong / n + lam * rejected / n
    return out


@pytest.mark.parametrize("seed", range(5))
def test_reject_report_matches_a_naive_loop_and_sklearn_mcc(seed):
    rng = np.random.default_rng(seed)
    y, labels, score = random_case(rng, 57, n_classes=5)
    accept = score > 0.3
    report = reject_report(y, labels, accept, n_classes=5)
    expected = naive_report(y, labels, accept, DEFAULT_LAMBDAS)
    assert set(report) == set(expected) | {"mcc"}
    for key, value in expected.items():
        assert report[key] == pytest.approx(value, abs=1e-15), key
    assert report["mcc"] == pytest.approx(matthews_corrcoef(y, labels), abs=1e-12)


def test_risk_names_carry_lambda_with_two_decimals():
    report = reject_report([0, 1], [0, 0], [True, False])
    assert [k for k in report if k.startswith("risk_")] == [
        "risk_0.00",
        "risk_0.05",
        "risk_0.10",
        "risk_0.15",
        "risk_0.20",
    ]
    with pytest.raises(InvalidParameterError, match="two decimals"):
        reject_report([0, 1], [0, 0], [True, False], lambdas=(0.1, 0.101))
    with pytest.raises(InvalidParameterError, match="lambdas"):
        reject_report([0, 1], [0, 0], [True, False], lambdas=(-0.1,))


def test_empty_accepted_set_gives_the_defined_values():
    report = reject_report([0, 1, 2], [1, 1, 0], np.zeros(3, dtype=bool))
    assert report["covered_accuracy"] == 1.0
    assert report["rejection_rate"] == 1.0
    assert report["nonreject_error"] == 0.0
    assert report["risk_0.20"] == pytest.approx(0.2)
    assert all(np.isfinite(v) for v in report.values())


def test_mcc_is_zero_not_nan_when_undefined():
    # A constant prediction: the Matthews correlation's denominator is 0.
    assert reject_report([0, 1, 2], [1, 1, 1], [True] * 3)["mcc"] == 0.0
    assert reject_report([1, 1], [1, 1], [True] * 2)["mcc"] == 0.0
    assert reject_report([0, 1], [0, 1], [True] * 2)["mcc"] == 1.0


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (([0, 1, 2], [0, 1], [True, True]), {}, "lengths differ"),
        (([0, 1], [0, 1], [True, True, True]), {}, "lengths differ"),
        (([0, 1], [0, 1], [1, 0]), {}, "boolean"),
        (([0, 3], [0, 1], [True, True]), {"n_classes": 3}, r"y_true\[1\] = 3"),
        (([0, 1], [0, -1], [True, True]), {}, r"labels\[1\] = -1"),
        (([0, 1], [0.5, 1], [True, True]), {}, "integer"),
        (([[0, 1]], [[0, 1]], [[True, True]]), {}, "1-d"),
        (([], [], np.zeros(0, dtype=bool)), {}, "no rows"),
    ],
)
def test_bad_input_raises_typed_errors_naming_the_problem(args, kwargs, match):
    with pytest.raises(InvalidDataError, match=match):
        reject_report(*args, **kwargs)


# ------------------------------------------------------- partial-label loss mode


def test_partial_label_report_counts_label_outside_bag_as_wrong():
    bags = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 0], [0, 0, 1]], dtype=bool)
    labels = np.array([1, 0, 0, 2])
    accept = np.array([True, True, False, True])
    report = partial_label_report(bags, labels, accept)
    assert report["accuracy"] == 0.75  # row 1 predicts 0, outside {1, 2}
    assert report["nonreject_error"] == 0.25
    assert report["covered_accuracy"] == pytest.approx(2 / 3)
    assert "mcc" not in report


@pytest.mark.parametrize("seed", range(3))
def test_singleton_bags_of_the_true_label_reproduce_the_true_label_report(seed):
    rng = np.random.default_rng(seed)
    y, labels, score = random_case(rng, 40)
    accept = score > 0.5
    bags = np.eye(4, dtype=bool)[y]
    with_truth = reject_report(y, labels, accept)
    with_bags = partial_label_report(bags, labels, accept)
    assert with_bags == {k: v for k, v in with_truth.items() if k != "mcc"}


def test_partial_label_mode_rejects_empty_bags_and_bad_labels():
    bags = np.array([[1, 0], [0, 0]], dtype=bool)
    with pytest.raises(InvalidDataError, match=r"bags\[1\] is empty"):
        partial_label_report(bags, [0, 1], [True, True])
    with pytest.raises(InvalidDataError, match=r"labels\[0\] = 2"):
        correctness([2], bags=[[1, 1]])
    with pytest.raises(InvalidParameterError, match="exactly one"):
        correctness([0], y_true=[0], bags=[[1]])
    assert issubclass(InvalidDataError, PllError)


# ------------------------------------------------------------- threshold sweeps


def naive_sweep(score, correct):
    """Operating points by brute force: try every candidate threshold, keep the distinct ones."""
    n = len(score)
    points = []
    for t in [-np.inf] + sorted(set(score)):
        acc = [c for s, c in zip(score, correct) if s > t]
        points.append(
            (
                (n - len(acc)) / n,
                sum(acc) / len(acc) if acc else 1.0,
                sum(1 for c in acc if not c) / n,
            )
        )
    return points


@settings(max_examples=150, deadline=None)
@given(scored_rows)
def test_sweep_matches_brute_force_with_ties(case):
    score, correct = np.array(case[0]), np.array(case[1])
    sweep = threshold_sweep(score, correct)
    expected = naive_sweep(score, correct)
    got = list(zip(sweep["rejection_rate"], sweep["covered_accuracy"], sweep["nonreject_error"]))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g == pytest.approx(e, abs=1e-12)
    # Each threshold accepts exactly the rows scoring above it: tied rows move together.
    for t, k in zip(sweep["threshold"], sweep["accepted"]):
        assert k == int((score > t).sum())
    assert sweep["accepted"].iat[0] == len(score) and sweep["accepted"].iat[-1] == 0
    assert np.all(np.diff(sweep["accepted"]) < 0)
    assert np.allclose(sweep["coverage"] + sweep["rejection_rate"], 1.0)
    assert np.allclose(sweep["selective_risk"], 1 - sweep["covered_accuracy"])


def test_sweep_treats_tied_scores_as_one_step():
    sweep = threshold_sweep([0.5, 0.5, 0.5, 0.9], [True, False, False, True])
    assert sweep["accepted"].tolist() == [4, 1, 0]
    assert sweep["covered_accuracy"].tolist() == [0.5, 1.0, 1.0]


def test_sweep_rejects_non_finite_scores():
    with pytest.raises(InvalidDataError, match=r"score\[1\] = nan"):
        threshold_sweep([0.1, np.nan], [True, False])


def geifman_aurc(score, correct):
    """(1/n) Σ_k risk of the k top-scoring rows (for scores without ties)."""
    order = np.argsort(-np.asarray(score))
    wrong = ~np.asarray(correct)[order]
    return float(np.mean([wrong[: k + 1].mean() for k in range(len(score))]))


@pytest.mark.parametrize("seed", range(5))
def test_aurc_without_ties_is_the_usual_average_of_top_k_risks(seed):
    rng = np.random.default_rng(seed)
    score = rng.permutation(50) / 50.0
    correct = rng.random(50) < 0.7
    assert aurc(threshold_sweep(score, correct)) == pytest.approx(geifman_aurc(score, correct), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_aurc_with_ties_is_the_integral_of_the_risk_coverage_step_function(seed):
    rng = np.random.default_rng(seed)
    n = 30
    score = rng.integers(0, 6, n).astype(float)
    correct = rng.random(n) < 0.6

    def risk_at(coverage):
        # The smallest operating point covering at least `coverage`: its selective risk.
        best = None
        for t in sorted(set(score), reverse=True) + [-np.inf]:
            acc = score > t
            if acc.mean() >= coverage:
                best = acc
                break
        return float((~correct[best]).mean())

    grid = (np.arange(6000) + 0.5) / 6000  # midpoint rule on (0, 1]
    integral = np.mean([risk_at(c) for c in grid])
    assert aurc(threshold_sweep(score, correct)) == pytest.approx(integral, abs=2e-3)


# ------------------------------------------------------------------ calibration


def brute_force_threshold(score, correct, lam):
    """Exact rational risks for every candidate threshold; ties -> the lowest threshold."""
    n = len(score)
    lam = Fraction(str(lam))
    best = None
    for t in [-np.inf] + sorted(set(score)):
        acc = [c for s, c in zip(score, correct) if s > t]
        risk = Fraction(sum(1 for c in acc if not c), n) + lam * Fraction(n - len(acc), n)
        if best is None or risk < best[1]:
            best = (t, risk)
    return best


@settings(max_examples=150, deadline=None)
@given(scored_rows, st.sampled_from(DEFAULT_LAMBDAS + (0.5, 1.0)))
def test_calibrated_threshold_is_the_brute_force_minimizer(case, lam):
    score, correct = np.array(case[0]), np.array(case[1])
    cal = calibrate_thresholds(score, correct, lambdas=(lam,))
    t, risk = brute_force_threshold(score, correct, lam)
    expected_t = np.nextafter(score.min(), -np.inf) if t == -np.inf else t
    assert cal["threshold"].iat[0] == expected_t
    assert cal["risk"].iat[0] == pytest.approx(float(risk), abs=1e-12)
    # Applying the threshold to the same rows reproduces the minimal risk.
    again = calibrated_metrics(cal, score, correct)
    assert again[f"cal_risk_{lam:.2f}"] == pytest.approx(float(risk), abs=1e-12)
    assert again[f"cal_rejection_rate_{lam:.2f}"] == cal["rejection_rate"].iat[0]


@settings(max_examples=100, deadline=None)
@given(scored_rows)
def test_calibrated_risk_grows_and_rejection_shrinks_with_lambda(case):
    score, correct = np.array(case[0]), np.array(case[1])
    lambdas = (0.0, 0.05, 0.1, 0.15, 0.2, 0.5, 1.0)
    cal = calibrate_thresholds(score, correct, lambdas)
    assert np.all(np.diff(cal["risk"]) >= -1e-12)
    assert np.all(np.diff(cal["rejection_rate"]) <= 0)
    assert np.all((cal["rejection_rate"] >= 0) & (cal["rejection_rate"] <= 1))
    # λ = 1 never needs to reject: accepting a row costs at most 1.
    assert cal["risk"].iat[-1] <= min((~correct).mean(), 1.0) + 1e-12
    # The calibrated minimum is never worse than any fixed threshold.
    sweep = threshold_sweep(score, correct)
    for lam, risk in zip(cal["lambda"], cal["risk"]):
        assert risk <= (sweep["nonreject_error"] + lam * sweep["rejection_rate"]).min() + 1e-12


def test_calibrated_metrics_apply_the_validation_threshold_to_other_rows():
    cal = calibrate_thresholds([0.9, 0.5, 0.1], [True, True, False], lambdas=(0.1,))
    assert cal["threshold"].iat[0] == 0.1
    test = calibrated_metrics(cal, np.array([0.05, 0.1, 0.2, 0.95]), np.array([True, False, False, True]))
    # Accepted: 0.2 (wrong) and 0.95 (right); rejected: 0.05 and 0.1 (score not > 0.1).
    assert test == {"cal_threshold_0.10": 0.1, "cal_rejection_rate_0.10": 0.5, "cal_risk_0.10": 0.25 + 0.05}


def test_accept_all_threshold_is_finite():
    cal = calibrate_thresholds([0.3, 0.7], [True, True], lambdas=(0.1,))
    t = cal["threshold"].iat[0]
    assert np.isfinite(t) and t < 0.3 and cal["rejection_rate"].iat[0] == 0.0


# ------------------------------------------------------ precision at percentile


@pytest.mark.parametrize("seed", range(4))
def test_precision_at_percentile_matches_a_naive_loop(seed):
    rng = np.random.default_rng(seed)
    score = rng.integers(0, 8, 40).astype(float)
    correct = rng.random(40) < 0.7
    table = precision_at_percentile(score, correct, percentiles=range(0, 101, 10))
    for row in table.itertuples():
        high = np.percentile(score, row.percentile)
        trusted = [c for s, c in zip(score, correct) if s >= high]
        assert row.precision_trustworthy == pytest.approx(sum(trusted) / len(trusted))
        # Jiang et al.: "suspicious" is the same construction on the negated score, target "wrong".
        neg_cut = np.percentile(-score, row.percentile)
        suspects = [not c for s, c in zip(-score, correct) if s >= neg_cut]
        assert row.precision_suspicious == pytest.approx(sum(suspects) / len(suspects))
        assert row.fraction_suspicious == pytest.approx(len(suspects) / 40)


@settings(max_examples=80, deadline=None)
@given(scored_rows)
def test_precision_sets_are_never_empty_and_start_from_everything(case):
    score, correct = np.array(case[0]), np.array(case[1])
    table = precision_at_percentile(score, correct)
    assert np.all(table["fraction_trustworthy"] > 0) and np.all(table["fraction_suspicious"] > 0)
    first = table.iloc[0]
    assert first["fraction_trustworthy"] == 1.0 and first["fraction_suspicious"] == 1.0
    assert first["precision_trustworthy"] == pytest.approx(correct.mean())
    assert first["precision_suspicious"] == pytest.approx(1 - correct.mean())
    assert np.all(np.diff(table["fraction_trustworthy"]) <= 0)


# ---------------------------------------------------------- across seeds


def long_results(values):
    rows = []
    for method, per_seed in values.items():
        for seed, v in enumerate(per_seed):
            rows.append({"dataset": "d", "method": method, "seed": seed, "value": v})
    return pd.DataFrame(rows)


def test_paired_t_test_matches_a_hand_computation():
    a = [0.81, 0.79, 0.84, 0.80, 0.83]
    b = [0.78, 0.80, 0.80, 0.77, 0.79]
    summary = compare_methods(long_results({"a": a, "b": b})).set_index("method")
    d = np.subtract(a, b)
    n = len(d)
    mean = sum(d) / n
    sd = (sum((x - mean) ** 2 for x in d) / (n - 1)) ** 0.5
    t = mean / (sd / n**0.5)
    p = 2 * stats.t.sf(abs(t), df=n - 1)
    assert summary.loc["b", "p_value"] == pytest.approx(p, rel=1e-10)
    assert summary.loc["a", "best"] and not summary.loc["b", "best"]
    assert summary.loc["a", "mean"] == pytest.approx(np.mean(a))
    assert summary.loc["a", "std"] == pytest.approx(np.std(a, ddof=1))
    assert summary.loc["b", "marked"] == (p >= 0.05)


def test_marks_the_best_and_those_not_significantly_worse():
    values = {
        "best": [0.90, 0.91, 0.92, 0.93, 0.94],
        "close": [0.91, 0.89, 0.93, 0.92, 0.95],  # noisy, not significantly different
        "worse": [0.80, 0.82, 0.81, 0.83, 0.84],  # clearly worse every seed
    }
    summary = compare_methods(long_results(values)).set_index("method")
    assert summary["marked"].to_dict() == {"best": True, "close": True, "worse": False}
    assert summary.loc["worse", "p_value"] < 0.05 <= summary.loc["close", "p_value"]


def test_risks_are_lower_is_better_by_metric_name():
    frame = long_results({"a": [0.10, 0.12, 0.11], "b": [0.05, 0.06, 0.04]}).assign(metric="risk_0.10")
    summary = compare_methods(frame).set_index("method")
    assert summary.loc["b", "best"] and summary.loc["b", "metric"] == "risk_0.10"
    assert smaller_is_better("cal_risk_0.10") and smaller_is_better("aurc") and not smaller_is_better("mcc")
    higher = compare_methods(frame.drop(columns="metric"), lower_is_better=False).set_index("method")
    assert higher.loc["a", "best"]


def test_table_two_style_pairs_over_all_settings():
    rows = []
    for ds, offset in (("x", 0.0), ("y", 0.3)):
        for seed in range(3):
            rows.append({"dataset": ds, "seed": seed, "method": "a", "value": offset + 0.01 * seed})
            rows.append({"dataset": ds, "seed": seed, "method": "b", "value": offset + 0.01 * seed + 0.1})
    summary = compare_methods(pd.DataFrame(rows), by=(), pair=("dataset", "seed")).set_index("method")
    assert summary.loc["b", "n"] == 6 and summary.loc["b", "best"]
    # Every paired difference is exactly +0.1 up to rounding: significant.
    assert summary.loc["a", "p_value"] < 0.05 and not summary.loc["a", "marked"]


def test_identical_methods_and_single_seeds_have_defined_marks():
    same = compare_methods(long_results({"a": [0.5, 0.6], "b": [0.5, 0.6]})).set_index("method")
    assert same.loc["b", "p_value"] == 1.0 and same["marked"].all()
    single = compare_methods(long_results({"a": [0.5], "b": [0.4]})).set_index("method")
    assert np.isnan(single.loc["b", "p_value"]) and not single.loc["b", "marked"]
    assert single.loc["a", "std"] == 0.0
    # Two seeds: a t-test with one degree of freedom would call almost anything "not worse".
    two = compare_methods(long_results({"a": [0.9, 0.5], "b": [0.1, 0.4]})).set_index("method")
    assert np.isnan(two.loc["b", "p_value"]) and not two.loc["b", "marked"] and two.loc["a", "marked"]


def test_compare_methods_validates_its_table():
    frame = long_results({"a": [0.5, 0.6]})
    with pytest.raises(InvalidDataError, match="seed"):
        compare_methods(frame.drop(columns="seed"))
    with pytest.raises(InvalidDataError, match="second value"):
        compare_methods(pd.concat([frame, frame]))
    with pytest.raises(InvalidDataError, match="not a finite number"):
        compare_methods(frame.assign(value=[0.5, np.nan]))

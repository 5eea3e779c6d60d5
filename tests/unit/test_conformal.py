"""Conformal prediction sets from partial labels: the finite-sample quantile, the sets, and the coverage guarantee itself."""

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression

import pll
from pll.reject.conformal import (
    ConformalSets,
    bag_hit_rate,
    calibration_weights,
    conformal_quantile,
    conformity,
    crossfit_conformity,
    fit_temperature,
    min_calibration_rows,
    nonconformity,
    plausibility,
    set_report,
    weighted_quantile,
)
from pll.errors import InvalidDataError, InvalidParameterError, NotFittedError, PllError
from pll.noise import uniform
from tests.oracles import loop_pl_aknn, nearest

# --- the finite-sample quantile ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "alpha", "rank"),
    [
        (9, 0.1, 9),  # (n + 1)(1 − α) = 9 exactly: not rounded up to 10 by binary floating point
        (8, 0.1, 9),  # 8.1 → 9 > n: q̂ = ∞
        (19, 0.1, 18),
        (4, 0.2, 4),  # 5 · 0.8 = 4 exactly
        (99, 0.05, 95),
        (1, 0.5, 1),
        (0, 0.3, 1),
    ],
)
def test_the_quantile_is_the_score_of_rank_ceil_n_plus_one_times_one_minus_alpha(n, alpha, rank):
    scores = np.arange(1.0, n + 1)[::-1]  # the k-th smallest is k
    assert conformal_quantile(scores, alpha) == (rank if rank <= n else math.inf)


@pytest.mark.parametrize(("alpha", "rows"), [(0.1, 9), (0.2, 4), (0.05, 19), (0.3, 3), (0.5, 1), (0.15, 6)])
def test_min_calibration_rows_is_the_first_n_with_a_finite_quantile(alpha, rows):
    assert min_calibration_rows(alpha) == rows
    assert conformal_quantile(np.ones(rows), alpha) == 1.0
    assert conformal_quantile(np.ones(rows - 1), alpha) == math.inf


def test_conformal_quantile_on_hand_cases():
    scores = [0.5, 0.1, 0.4, 0.2, 0.3, 0.9, 0.8, 0.6, 0.7]  # n = 9
    assert conformal_quantile(scores, 0.1) == 0.9  # rank 9: the largest
    assert conformal_quantile(scores, 0.2) == 0.8  # ceil(10 · 0.8) = 8
    assert conformal_quantile(scores, 0.25) == 0.8  # ceil(7.5) = 8
    assert conformal_quantile(scores[:8], 0.1) == math.inf  # rank 9 of 8 scores
    assert conformal_quantile([0.3, 0.3, 0.3], 0.5) == 0.3  # ties: the value at the rank
    assert conformal_quantile([], 0.5) == math.inf


def test_weighted_quantile_counts_each_row_by_its_weights():
    # Two rows, half their weight on each of two scores: t(0.2) = 2, t(0.4) = 1.5, t(0.6) = 1, t(0.8) = 0.5.
    scores = np.array([[0.2, 0.6], [0.4, 0.8]])
    weights = np.full((2, 2), 0.5)
    assert weighted_quantile(scores, weights, 0.4) == 0.8  # need t > 3 · 0.4 − 1 = 0.2
    assert weighted_quantile(scores, weights, 0.5) == 0.6  # need t > 0.5: 0.8's half a row is not enough
    assert weighted_quantile(scores, weights, 0.7) == 0.4  # need t > 1.1
    assert weighted_quantile(scores, weights, 0.9) == 0.2  # need t > 1.7
    point = np.array([[1.0, 0.0], [0.0, 1.0]])  # a point mass per row is split conformal on the picked scores
    assert weighted_quantile(scores, point, 0.5) == conformal_quantile([0.2, 0.8], 0.5)


def test_scores_from_conformity():
    conf = np.array([[0.8, 0.4, 0.4, 0.0], [0.0, 0.0, 0.0, 0.0]])
    np.testing.assert_allclose(nonconformity(conf, "own"), 1 - conf)
    np.testing.assert_allclose(nonconformity(conf, "probability"), [[0.5, 0.75, 0.75, 1.0], [0.75] * 4])
    # Cumulative: the normalised mass of the classes at least as conforming; ties share the larger sum.
    np.testing.assert_allclose(nonconformity(conf, "cumulative"), [[0.5, 1.0, 1.0, 1.0], [1.0] * 4])
    with pytest.raises(InvalidParameterError, match="unknown score 'rank'"):
        nonconformity(conf, "rank")


def test_calibration_weights_of_each_procedure():
    conf = np.array([[0.7, 0.2, 0.1], [0.1, 0.5, 0.4], [0.3, 0.3, 0.4]])
    scores = 1 - conf
    bags = np.array([[1, 1, 0], [0, 1, 0], [0, 0, 0]], dtype=bool)  # the last bag is empty: every label
    worst, t = calibration_weights(scores, conf, bags, "conservative")
    np.testing.assert_array_equal(worst, [[0, 1, 0], [0, 1, 0], [1, 0, 0]])
    assert t is None
    best, _ = calibration_weights(scores, conf, bags, "min")
    np.testing.assert_array_equal(best, [[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    w, t = calibration_weights(scores, conf, bags, "monte_carlo")
    np.testing.assert_allclose(w, plausibility(conf, bags, t))
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    assert (w[~np.where(bags.any(axis=1, keepdims=True), bags, True)] == 0).all()
    # π ∝ c^{1/T} on the bag: row 0 at T = 1 is 0.7 : 0.2.
    np.testing.assert_allclose(plausibility(conf[:1], bags[:1], 1.0), [[7 / 9, 2 / 9, 0.0]])
    with pytest.raises(InvalidParameterError, match="unknown procedure 'max'"):
        calibration_weights(scores, conf, bags, "max")


def _bag_loglik(conf, bags, t):
    return np.log((plausibility(conf, np.ones_like(bags), t) * bags).sum(axis=1)).sum()


def test_the_temperature_is_the_upper_end_of_the_likelihood_interval_around_the_one_that_drew_the_labels():
    # Labels drawn from c^{1/T} normalised, bags = label + uniform distractors (they say nothing about the label):
    # the bags' likelihood peaks near the true T; the temperature returned is the flattest within χ²₁(0.95)/2 of it.
    rng = np.random.default_rng(0)
    conf = rng.random((4000, 5))
    for true_t in (0.25, 1.0):
        p = plausibility(conf, np.ones_like(conf, dtype=bool), true_t)
        y = (rng.random((4000, 1)) > p.cumsum(axis=1)).sum(axis=1)
        bags = uniform(y, 5, p=0.6, r=1, random_state=1)
        t = fit_temperature(conf, bags)
        grid = true_t * np.exp(np.linspace(-0.5, 0.5, 201))
        peak = max(_bag_loglik(conf, bags, g) for g in grid)
        assert _bag_loglik(conf, bags, t) == pytest.approx(peak - 1.9207, abs=0.01)
        assert t > grid[np.argmax([_bag_loglik(conf, bags, g) for g in grid])]
        assert t == pytest.approx(true_t, rel=0.15)


# --- sets, p-values and the reject option on a fixed model -------------------------------------


class Fixed:
    """A 'classifier' whose probabilities are given: rows of ``X`` index a table."""

    def __init__(self, table):
        self.table = np.asarray(table, dtype=float)
        self.classes_ = np.arange(self.table.shape[1])

    def predict_proba(self, X):
        return self.table[np.asarray(X, dtype=int)[:, 0]]


def test_sets_p_values_and_reject_option_on_a_hand_case():
    table = [[0.9, 0.1, 0.0], [0.6, 0.4, 0.0], [0.2, 0.3, 0.5], [0.05, 0.9, 0.05]]
    model = Fixed(table)
    # Calibration rows 0..3 with bags holding: {0}, {0, 1}, {2}, {1}: scores 0.1, 0.6, 0.5, 0.1.
    cal = ConformalSets(model, alpha=0.2, procedure="conservative", score="own")
    cal.fit([[0], [1], [2], [3]], [{0}, {0, 1}, {2}, {1}])
    assert cal.quantile_ == 0.6  # rank ceil(5 · 0.8) = 4
    sets = cal.predict_sets([[0], [1], [2]])
    np.testing.assert_array_equal(sets, [[1, 0, 0], [1, 1, 0], [0, 0, 1]])
    # p(y) = (1 + #{s_i ≥ s(x, y)}) / 5: row 1 has s = 0.4, 0.6, 1.0.
    np.testing.assert_allclose(cal.p_values([[1]]), [[3 / 5, 2 / 5, 1 / 5]])
    np.testing.assert_array_equal(cal.p_values([[0], [1], [2]]) > 0.2, sets)
    r = cal.predict_with_reject([[0], [1], [2]])
    np.testing.assert_array_equal(r.accept, [True, False, True])
    np.testing.assert_array_equal(r.labels, [0, 0, 2])
    np.testing.assert_allclose(r.score, [1 - 1 / 5, 1 - 2 / 5, 1 - 1 / 5])
    np.testing.assert_array_equal(r.sets, sets)
    # A row's own candidates cut its set (to nothing: rejected); a single candidate left scores 1.
    r = cal.predict_with_reject([[1], [2]], candidates=[{1}, {0, 1}])
    np.testing.assert_array_equal(r.sets, [[0, 1, 0], [0, 0, 0]])
    np.testing.assert_array_equal(r.labels, [1, 1])
    assert r.accept.tolist() == [True, False] and r.score[0] == 1.0


def test_an_empty_set_is_a_rejection():
    model = Fixed([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    tight = ConformalSets(model, alpha=0.5, score="own").fit([[0], [0], [0]], [{0}, {0}, {0}])  # q̂ = 0
    r = tight.predict_with_reject([[1], [0]])
    assert r.sets[0].sum() == 0 and not r.accept[0] and r.accept[1]
    assert r.reason.tolist() == ["no_support", "none"]


def test_refuses_too_few_calibration_rows_and_bags_without_candidates():
    model = Fixed([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    with pytest.raises(InvalidDataError, match=r"^8 calibration rows are too few for conformal sets at alpha=0.1: "
                       r"it needs at least 9; with fewer every set would hold every label"):
        ConformalSets(model, alpha=0.1).fit([[0]] * 8, [{0}] * 8)
    with pytest.raises(InvalidDataError, match="none of the 4 calibration rows has a candidate label"):
        ConformalSets(model, alpha=0.5).fit([[0]] * 4, np.zeros((4, 2), dtype=bool))
    sets = ConformalSets(model, alpha=0.1)
    with pytest.raises(InvalidDataError):
        sets.fit([[0]] * 8, [{0}] * 8)
    assert not hasattr(sets, "quantile_")  # nothing half-written


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 30),
    st.integers(2, 5),
    st.floats(0.02, 0.6),
    st.integers(0, 2**32 - 1),
)
def test_sets_are_the_labels_whose_p_value_exceeds_alpha(n_cal, l, alpha, seed):
    rng = np.random.default_rng(seed)
    table = rng.integers(0, 5, size=(n_cal + 10, l)) / 4.0  # coarse values: many ties
    model = Fixed(table)
    bags = rng.random((n_cal, l)) < 0.4
    cal = ConformalSets(model, alpha=alpha, procedure="conservative", score="own")
    if n_cal < min_calibration_rows(alpha) or not bags.any():
        with pytest.raises(InvalidDataError):
            cal.fit(np.arange(n_cal)[:, None], bags)
        return
    cal.fit(np.arange(n_cal)[:, None], bags)
    queries = np.arange(n_cal, n_cal + 10)[:, None]
    # p > α in exact arithmetic (α read as the decimal it prints as): floats round 1/3 > 0.3333333333333333 away.
    counts = np.rint(cal.p_values(queries) * (n_cal + 1)).astype(int)
    exceeds = np.vectorize(lambda c: Fraction(int(c), n_cal + 1) > Fraction(repr(alpha)))(counts)
    np.testing.assert_array_equal(cal.predict_sets(queries), exceeds)
    r = cal.predict_with_reject(queries)
    np.testing.assert_array_equal(r.accept, r.sets.sum(axis=1) == 1)
    assert (r.sets[r.accept, np.searchsorted(model.classes_, r.labels[r.accept])]).all()


def test_refuses_an_unfitted_method_and_bad_alpha():
    with pytest.raises(NotFittedError, match="other than the calibration rows"):
        ConformalSets(pll.PlKnn()).fit([[0.0], [1.0]], [{0}, {1}])
    model = Fixed([[1.0, 0.0]])
    for alpha in (0.0, 1.0, -0.1, "0.1"):
        with pytest.raises(PllError, match="alpha"):
            ConformalSets(model, alpha=alpha).fit([[0]], [{0}])
    for name in ("procedure", "score"):
        with pytest.raises(InvalidParameterError, match=name):
            ConformalSets(model, alpha=0.5, **{name: "max"}).fit([[0]], [{0}])
    with pytest.raises(NotFittedError, match="not calibrated"):
        ConformalSets(model).predict_sets([[0]])


# --- the methods' conformity -------------------------------------------------------------------


def _blobs(n, seed, n_classes=4):
    X, y = make_classification(
        n_samples=n, n_features=5, n_informative=4, n_redundant=0, n_classes=n_classes,
        n_clusters_per_class=1, class_sep=1.0, flip_y=0.05, random_state=seed,
    )
    return X, y


def test_conformity_of_each_method_is_its_documented_per_class_score():
    X, y = _blobs(260, 0)
    S = uniform(y, 4, p=0.7, r=1, random_state=0)
    Xq = X[200:]
    knn = pll.PlKnn(n_neighbors=7).fit(X[:200], S[:200])
    np.testing.assert_array_equal(knn.conformity(Xq), knn.predict_proba(Xq))
    dst = pll.DstPll(n_neighbors=7).fit(X[:200], S[:200])
    np.testing.assert_array_equal(dst.conformity(Xq), dst.predict_with_reject(Xq).plausibilities)
    aknn = pll.PlAknn(max_neighbors=20).fit(X[:200], S[:200])
    got = aknn.conformity(Xq)
    order, _ = nearest(X[:200], Xq, 20)
    for q in range(Xq.shape[0]):
        _, decided_at, _ = loop_pl_aknn(order[q], S[:200], np.ones(4, bool), 200, 20, 0.5, 0.1)
        size = decided_at or 20
        np.testing.assert_allclose(got[q], S[:200][order[q, :size]].mean(axis=0), rtol=0, atol=1e-15)
    assert ((got >= 0) & (got <= 1)).all()
    with pytest.raises(InvalidParameterError, match="neither conformity nor predict_proba"):
        conformity(object(), Xq)


# --- the guarantee, over many seeds ------------------------------------------------------------


def _coverage_over_seeds(make_method, alpha, n_seeds, bags_of, procedure="conservative", n=900):
    """Empirical coverage of the true label on fresh test rows, one split per seed."""
    coverages, sizes = [], []
    for seed in range(n_seeds):
        X, y = _blobs(n, seed)
        S = bags_of(y, seed)
        fit, cal, test = np.split(np.random.default_rng(seed).permutation(n), [n // 3, 2 * n // 3])
        method = make_method()
        method = method.fit(X[fit], S[fit] if isinstance(method, pll.methods.NeighborMethod) else y[fit])
        sets = ConformalSets(method, alpha=alpha, procedure=procedure).fit(X[cal], S[cal]).predict_sets(X[test])
        report = set_report(sets, y[test])
        coverages.append(report["coverage"])
        sizes.append(report["mean_set_size"])
    c = np.asarray(coverages)
    return c.mean(), c.std(ddof=1) / np.sqrt(c.size), float(np.mean(sizes))


def _noisy(p):
    """Bags that keep their true label: a wrong label added to a share ``p`` of the rows."""
    return lambda y, seed: uniform(y, 4, p=p, r=1, random_state=seed)


@pytest.mark.parametrize("make_method", [
    lambda: pll.PlKnn(n_neighbors=10),
    lambda: pll.DstPll(n_neighbors=10),
    lambda: pll.PlAknn(max_neighbors=30),
], ids=["pl_knn", "dst_pll", "pl_aknn"])
@pytest.mark.parametrize(("alpha", "p"), [(0.1, 0.05), (0.2, 0.1)])
def test_conservative_coverage_of_bags_that_keep_the_true_label_is_at_least_one_minus_alpha(make_method, alpha, p):
    # Noise below α keeps q̂ below 1, so the sets are informative and the coverage is not trivially 1
    # (with more than α of the bags holding an implausible label every set becomes every class).
    mean, se, size = _coverage_over_seeds(make_method, alpha, 40, _noisy(p))
    assert mean >= 1 - alpha - 3 * se
    assert size < 3  # of four classes


def test_with_singleton_bags_and_tie_free_scores_coverage_is_not_far_above_one_minus_alpha():
    # Exchangeable, continuous scores: 1 − α ≤ coverage ≤ 1 − α + 1/(n_cal + 1) in expectation; with one
    # candidate per bag every procedure is split conformal prediction, the default one included.
    alpha, n = 0.1, 900
    mean, se, _ = _coverage_over_seeds(
        lambda: LogisticRegression(max_iter=500), alpha, 60, lambda y, seed: np.eye(4, dtype=bool)[y],
        procedure="monte_carlo", n=n,
    )
    assert 1 - alpha - 3 * se <= mean <= 1 - alpha + 1 / (n // 3 + 1) + 3 * se


# A world whose model is right: row i's label is drawn from its conformity row c_i sharpened at temperature
# TRUE_T, so the plausibility π ∝ c^{1/T} on the bag is the label's distribution given the row and its bag
# whenever the bag says nothing about which of its candidates is true.  Rows of X index the table.
L, TRUE_T, N_CAL, N_TEST = 5, 0.5, 400, 2000


def _world(seed, bags):
    """Conformity table, true labels and bags (``bags``: the bag process) of N_CAL + N_TEST rows."""
    rng = np.random.default_rng(seed)
    conf = rng.random((N_CAL + N_TEST, L)) ** 2
    p = plausibility(conf, np.ones_like(conf, dtype=bool), TRUE_T)
    y = (rng.random((p.shape[0], 1)) > p.cumsum(axis=1)).sum(axis=1)
    return conf, y, bags(conf, y, seed)


def _uniform_bags(conf, y, seed, p=0.6):
    """A random wrong label joins a share ``p`` of the bags: the bag does not tell which candidate is true."""
    return uniform(y, L, p=p, r=1, random_state=seed)


def _few_distractors(conf, y, seed):
    """Wrong labels in 5 % of the bags only: fewer than α, so that conservative sets stay informative."""
    return _uniform_bags(conf, y, seed, p=0.05)


def _favourite_distractor(conf, y, seed):
    """Every bag gets the wrong label the model likes best: a bag {a, b} now tells which of a, b is true."""
    S = np.eye(L, dtype=bool)[y]
    wrong = np.where(S, -np.inf, conf)
    S[np.arange(y.size), wrong.argmax(axis=1)] = True
    return S


def _favourite_instead_of_truth(conf, y, seed):
    """One-label bags, but 40 % of the rows whose true label is not the model's favourite hold the favourite instead."""
    favourite = conf.argmax(axis=1)
    swap = (favourite != y) & (np.random.default_rng([seed, 1]).random(y.size) < 0.4)
    return np.eye(L, dtype=bool)[np.where(swap, favourite, y)]


def _world_coverage(bags, procedure, alpha=0.1, n_seeds=60):
    """Mean coverage of the true label over seeds, its standard error, and the mean set size.

    Rows are indices, not features: the method's own plausibility is what is under test (``weights="method"``).
    """
    coverages, sizes = [], []
    for seed in range(n_seeds):
        conf, y, S = _world(seed, bags)
        sets = ConformalSets(Fixed(conf), alpha=alpha, procedure=procedure, weights="method")
        sets.fit(np.arange(N_CAL)[:, None], S[:N_CAL])
        report = set_report(sets.predict_sets(np.arange(N_CAL, N_CAL + N_TEST)[:, None]), y[N_CAL:])
        coverages.append(report["coverage"])
        sizes.append(report["mean_set_size"])
    c = np.asarray(coverages)
    return c.mean(), c.std(ddof=1) / np.sqrt(c.size), float(np.mean(sizes))


@pytest.mark.parametrize("alpha", [0.1, 0.2])
def test_monte_carlo_covers_the_true_label_when_its_plausibility_is_right(alpha):
    mean, se, size = _world_coverage(_uniform_bags, "monte_carlo", alpha)
    assert 1 - alpha - 3 * se <= mean <= 1 - alpha + 0.02  # near 1 − α, not above it by accident
    _, _, conservative = _world_coverage(_uniform_bags, "conservative", alpha, n_seeds=5)
    assert size < conservative - 0.5


def test_monte_carlo_under_covers_when_the_bag_tells_which_candidate_is_true():
    mean, se, _ = _world_coverage(_favourite_distractor, "monte_carlo")
    assert mean < 0.9 - 3 * se
    guaranteed, g_se, _ = _world_coverage(_favourite_distractor, "conservative", n_seeds=20)
    assert guaranteed >= 0.9 - 3 * g_se  # the bags still hold their true label: conservative keeps its guarantee


def test_conservative_covers_any_bags_that_hold_the_true_label_and_fails_when_they_do_not():
    mean, se, size = _world_coverage(_few_distractors, "conservative", n_seeds=30)
    assert mean >= 0.9 - 3 * se and size < L - 1  # informative sets, and still covering
    mean, se, _ = _world_coverage(_favourite_instead_of_truth, "conservative", n_seeds=30)
    assert mean < 0.9 - 3 * se


def test_min_has_no_guarantee_it_under_covers_bags_with_a_distractor():
    mean, se, _ = _world_coverage(_uniform_bags, "min", n_seeds=30)
    assert mean < 0.9 - 3 * se


def test_label_free_bounds_bracket_the_calibration_coverage_and_bags_bound_the_test_coverage():
    conf, y, S = _world(0, _uniform_bags)
    sets = ConformalSets(Fixed(conf), alpha=0.1).fit(np.arange(N_CAL)[:, None], S[:N_CAL])
    cal = set_report(sets.predict_sets(np.arange(N_CAL)[:, None]), y[:N_CAL])["coverage"]
    assert sets.bounds_["coverage_if_worst"] <= cal <= sets.bounds_["coverage_if_best"]
    test = sets.predict_sets(np.arange(N_CAL, N_CAL + N_TEST)[:, None])
    assert set_report(test, y[N_CAL:])["coverage"] <= bag_hit_rate(test, S[N_CAL:])
    assert bag_hit_rate([[1, 0], [0, 1], [0, 0]], [[1, 0], [1, 0], [0, 0]]) == pytest.approx(1 / 3)
    report = sets.calibration_report()
    assert report["temperature"] == pytest.approx(TRUE_T, rel=0.5)
    assert report["coverage_if_best"] - report["coverage_if_worst"] > 0.1
    assert any(note.startswith("bounds are wide") for note in report["notes"])


def test_set_report_counts_sizes_and_per_class_coverage():
    sets = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0], [0, 0, 1]], dtype=bool)
    report = set_report(sets, [0, 1, 1, 0])
    assert report == {
        "mean_set_size": 1.0, "singleton_rate": 0.5, "empty_rate": 0.25,
        "coverage": 0.5, "coverage_0": 0.5, "coverage_1": 0.5,
    }
    assert "coverage" not in set_report(sets)


# --- a trained model's sets and threshold (pll train / pll score) ------------------------------


def test_a_trained_model_ships_sets_from_a_holdout_and_can_choose_its_threshold_there():
    from pll.serving import calibrate_threshold, fit_holdout, fit_model

    ds = pll.noise.apply_noise(pll.load_dataset("wine"), "uniform", {"p": 0.5, "r": 1}, random_state=1)
    model = fit_model(ds, "pl_knn", random_state=1, conformal_alpha=0.2, reject_lambda=0.1)
    holdout = fit_holdout(ds, "pl_knn", random_state=1)
    assert model.set_predictor.n_fit + model.set_predictor.n_calibration == ds.n_rows
    assert model.set_predictor.n_fit == holdout.n_fit  # the same seeded hold-out
    # The sets are those of the hold-out model, calibrated on the rows it never saw.
    expected = ConformalSets(holdout.estimator, alpha=0.2).fit(holdout.X, ds.S[holdout.rows])
    table = pd.DataFrame(ds.X[:20], columns=list(model.feature_names))
    frame = model.predict_frame(table)
    sets = expected.predict_sets(holdout.transformer.transform(ds.X[:20]))
    assert frame["set"].tolist() == ["|".join(model.classes[row]) for row in sets]
    assert (frame["set_size"] == sets.sum(axis=1)).all()
    # The threshold minimises R_0.10 on the hold-out: with true labels here, from the bags without them.
    assert model.threshold == model.calibration["threshold"] == calibrate_threshold(ds, holdout, 0.1)["threshold"]
    blind = pll.PartialLabelDataset(ds.X, ds.S, None, ds.classes, "blind")
    bound = calibrate_threshold(blind, holdout, 0.1)
    assert bound["risk_lower"] <= bound["risk"] <= 0.1 + 1e-12 and "rejects_all" in bound
    plain = fit_model(ds, "pl_knn", random_state=1, conformal_alpha=None)
    assert plain.set_predictor is None and "set" not in plain.predict_frame(table)
    with pytest.raises(InvalidParameterError, match="not both"):
        fit_model(ds, "pl_knn", threshold=0.5, reject_lambda=0.1)
    with pytest.raises(InvalidParameterError, match="conformal_alpha"):
        fit_model(ds, "pl_knn", conformal_alpha=1.0)


# --- the default run (make run) -----------------------------------------------------------------


def test_the_default_run_accepts_most_rows_and_logs_what_its_bags_say_of_its_sets():
    from pll_pipeline.flows.pipeline import _conformal_lines
    from pll.experiment import run_protocol

    result = run_protocol(pll.load_dataset("digits"))  # what `pll run` runs when told nothing
    test_bags = result.data.S[result.rows.test]
    for o in result.evaluation.options:
        if o.option != "conformal":
            continue
        m = o.metrics
        assert m["rejection_rate"] < 0.5 and m["coverage"] >= 0.85 and m["mean_set_size"] < 2
        fit = next(out.fit for out in result.outputs if (out.name, out.option) == (o.name, "conformal"))
        sets = next(out.test.sets for out in result.outputs if (out.name, out.option) == (o.name, "conformal"))
        assert fit["conformal_procedure"] == "monte_carlo" and fit["conformal_temperature"] > 0
        assert fit["conformal_coverage_if_worst"] <= 0.9 <= fit["conformal_coverage_if_best"]
        assert fit["conformal_bag_hit_rate"] == bag_hit_rate(sets, test_bags) >= m["coverage"]
        lines = list(_conformal_lines(fit, m))
        assert lines[0].startswith(f"procedure monte_carlo (score {fit['conformal_score']}, plausibility temperature ")
        assert f"mean set size {m['mean_set_size']:.2f}, coverage {m['coverage']:.3f}" in lines[0]
        assert lines[1].startswith("without true labels: calibration coverage ")
        assert lines[2].startswith("bounds are wide")  # the class-dependent noise's partners: a distractor in most bags


# --- the check of the method's weights, and the cross-fitted weights ---------------------------


class Lookup:
    """A 'classifier' whose probabilities are given per feature row: the rows of ``X`` are looked up in ``rows``."""

    def __init__(self, rows, table):
        self.index = {row.tobytes(): i for i, row in enumerate(np.asarray(rows, dtype=float))}
        self.table = np.asarray(table, dtype=float)
        self.classes_ = np.arange(self.table.shape[1])

    def predict_proba(self, X):
        return self.table[[self.index[row.tobytes()] for row in np.asarray(X, dtype=float)]]


def _clustered_world(seed, bags):
    """``_world`` whose rows also have features: each near its true class's centre, so that neighbors share labels."""
    conf, y, S = _world(seed, bags)
    rng = np.random.default_rng([seed, 2])
    X = rng.normal(0.0, 4.0, (L, 6))[y] + rng.normal(size=(y.size, 6))
    return X, Lookup(X, conf), y, S


def _clustered_coverage(bags, weights, n_seeds=20, alpha=0.1):
    """Coverage over seeds (mean, standard error), mean set size, and the fitted sets of the last seed."""
    coverages, sizes = [], []
    for seed in range(n_seeds):
        X, model, y, S = _clustered_world(seed, bags)
        sets = ConformalSets(model, alpha=alpha, weights=weights).fit(X[:N_CAL], S[:N_CAL])
        report = set_report(sets.predict_sets(X[N_CAL:]), y[N_CAL:])
        coverages.append(report["coverage"])
        sizes.append(report["mean_set_size"])
        yield sets
    c = np.asarray(coverages)
    yield c.mean(), c.std(ddof=1) / np.sqrt(c.size), float(np.mean(sizes))


def _run(bags, weights, n_seeds=20):
    *fitted, (mean, se, size) = _clustered_coverage(bags, weights, n_seeds)
    return fitted, mean, se, size


def test_the_check_switches_to_cross_fitted_weights_where_the_method_favours_a_distractor():
    # Each bag holds the wrong label the method likes best: its plausibility weighs the distractor, and its
    # sets under-cover.  Neighbors share the true label and not the distractor, so cross-fitted weights find
    # the true label: the check switches to them, says so, and coverage is kept.
    _, own, own_se, _ = _run(_favourite_distractor, "method")
    assert own < 0.9 - 3 * own_se
    fitted, mean, se, _ = _run(_favourite_distractor, "auto")
    assert all(sets.weights_ == "crossfit" and sets.weights_check_ < 0.9 for sets in fitted)
    report = fitted[-1].calibration_report()
    assert report["weights"] == "crossfit" and any(note.startswith("weights switched") for note in report["notes"])
    assert mean >= 0.9 - 3 * se


def test_where_the_method_is_right_the_check_costs_little():
    _, own, _, own_size = _run(_uniform_bags, "method")
    fitted, mean, se, size = _run(_uniform_bags, "auto")
    assert 0.9 - 3 * se <= mean <= own + 0.03 and size <= 1.1 * own_size
    assert {sets.weights_ for sets in fitted} <= {"method", "crossfit"}
    assert all(0.0 <= sets.weights_check_ <= 1.0 for sets in fitted)


def test_weights_other_than_auto_report_no_check_and_other_procedures_no_weights():
    X, model, _, S = _clustered_world(0, _uniform_bags)
    for weights in ("method", "crossfit"):
        sets = ConformalSets(model, weights=weights).fit(X[:N_CAL], S[:N_CAL])
        assert (sets.weights_, sets.weights_check_) == (weights, None)
    sets = ConformalSets(model, procedure="conservative").fit(X[:N_CAL], S[:N_CAL])
    assert (sets.weights_, sets.weights_check_) == (None, None)


def test_cross_fitted_conformity_of_a_row_does_not_depend_on_its_own_bag_or_its_fold_mates_rows():
    X, _, y, S = _clustered_world(1, _uniform_bags)
    X, S = X[:200], S[:200]
    values = crossfit_conformity(X, S, random_state=3)
    changed = S.copy()
    changed[7] = ~changed[7]
    again = crossfit_conformity(X, changed, random_state=3)
    assert np.array_equal(values[7], again[7])  # row 7 never trains the model that scores it
    assert not np.array_equal(values, again)  # it does train the others' models
    assert values.shape == S.shape and ((values >= 0) & (values <= 1)).all()
    # most rows' best class is their true one: the weights carry information about the truth
    assert (values.argmax(axis=1) == y[:200]).mean() > 0.8


def test_sets_pickled_before_the_weights_were_a_choice_load_as_calibrated_on_the_methods_own():
    import pickle

    X, model, y, S = _clustered_world(0, _uniform_bags)
    sets = ConformalSets(model, weights="method").fit(X[:N_CAL], S[:N_CAL])
    old = sets.__getstate__()
    for key in ("weights", "random_state", "weights_", "weights_check_"):
        del old[key]
    restored = ConformalSets.__new__(ConformalSets)
    restored.__setstate__(pickle.loads(pickle.dumps(old)))
    assert restored.get_params()["weights"] == "method" and restored.calibration_report()["weights"] == "method"
    assert np.array_equal(restored.predict_sets(X[N_CAL:]), sets.predict_sets(X[N_CAL:]))

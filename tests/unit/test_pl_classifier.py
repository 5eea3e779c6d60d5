"""PlClassifier: cross-fitted disambiguation over any scikit-learn classifier."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.neighbors import KNeighborsClassifier
from sklearn.svm import SVC

import pll
from pll.errors import InvalidParameterError, NotFittedError
from pll.methods._inner import ESTIMATORS, fit_inner, warm_startable
from pll.methods._pl_classifier import PlClassifier


def blobs(n=120, n_classes=3, seed=0):
    X, y = make_classification(
        n_samples=n, n_features=5, n_informative=4, n_redundant=0, n_classes=n_classes,
        n_clusters_per_class=1, random_state=seed,
    )
    return X, y


# The iteration itself, from uniform weights and without class balance: what the oracles below compute.
PLAIN = {"init": "uniform", "class_balance": False}


def restricted(P, bags):
    """The reference update: P on the bag, renormalised; zero mass on the bag -> uniform over the bag."""
    W = np.where(bags, P, 0.0)
    out = np.empty_like(W)
    for i, row in enumerate(W):
        out[i] = row / row.sum() if row.sum() > 0 else bags[i] / bags[i].sum()
    return out


# --- single-label bags: the inner estimator itself -----------------------------------------------


def test_single_label_bags_give_the_inner_estimator_fitted_with_unit_weights():
    X, y = blobs()
    clf = PlClassifier(LogisticRegression(max_iter=1000), **PLAIN).fit(X, y)
    ref = LogisticRegression(max_iter=1000).fit(X, y, sample_weight=np.ones(len(y)))
    np.testing.assert_allclose(clf.predict_proba(X), ref.predict_proba(X), atol=1e-8)
    np.testing.assert_array_equal(clf.predict(X), ref.predict(X))
    assert (clf.n_rounds_, clf.converged_, clf.weight_changes_) == (1, True, [0.0])
    np.testing.assert_array_equal(clf.weights_, np.eye(3)[y])


# --- the weight update, with a stub whose probabilities are fixed per row ------------------------


class FixedProba:
    """Not a scikit-learn estimator: ``X[:, 0]`` is the row id; predicts ``TABLE[row]`` whatever it was fitted on.

    Every fit and prediction is recorded in the class attributes (the meta-estimator deep-copies instances).
    """

    TABLE = None
    fits = []  # (rows seen, labels, weights) per fit
    predictions = []  # (rows seen by the model, rows predicted) per predict_proba

    def fit(self, X, y, sample_weight=None):
        rows = X[:, 0].astype(int)
        self.seen_ = frozenset(rows.tolist())
        FixedProba.fits.append((rows, np.asarray(y), np.asarray(sample_weight)))
        self.classes_ = np.arange(FixedProba.TABLE.shape[1])
        return self

    def predict_proba(self, X):
        rows = X[:, 0].astype(int)
        FixedProba.predictions.append((self.seen_, frozenset(rows.tolist())))
        return FixedProba.TABLE[rows]


@pytest.fixture
def stub():
    FixedProba.fits, FixedProba.predictions = [], []
    rng = np.random.default_rng(0)
    n = 12
    table = rng.dirichlet(np.ones(3), size=n)
    table[0] = [0.6, 0.2, 0.2]  # bag {0, 1}: weights 0.75, 0.25
    table[1] = [0.0, 0.0, 1.0]  # bag {0, 1} gets no probability: uniform over it
    FixedProba.TABLE = table
    bags = np.ones((n, 3), dtype=bool)
    bags[0] = bags[1] = [1, 1, 0]
    bags[2] = [0, 0, 0]  # empty: all classes
    bags[3] = [0, 1, 0]
    bags[4:8, 2] = False
    bags[8:, 0] = False
    # Outside the rows above, most probability falls in the bag: the rounds beat the class prior.
    table[4:] = np.where(bags[4:], table[4:], 0.1 * table[4:])
    table[4:] /= table[4:].sum(axis=1, keepdims=True)
    X = np.c_[np.arange(n), rng.normal(size=n)]
    yield X, bags, table
    FixedProba.TABLE = None


def test_weights_are_out_of_fold_probabilities_restricted_to_the_bag(stub):
    X, bags, table = stub
    clf = PlClassifier(FixedProba(), max_rounds=5, n_folds=3, random_state=0, **PLAIN).fit(X, bags)
    full = np.where(bags.any(axis=1, keepdims=True), bags, True)
    expected = restricted(table, full)
    np.testing.assert_allclose(clf.weights_, expected)
    np.testing.assert_allclose(clf.weights_[0], [0.75, 0.25, 0.0])
    np.testing.assert_allclose(clf.weights_[1], [0.5, 0.5, 0.0])
    np.testing.assert_allclose(clf.weights_[2], table[2])
    np.testing.assert_allclose(clf.weights_[3], [0.0, 1.0, 0.0])
    # the same probabilities again in round 2: no change, converged
    assert clf.n_rounds_ == 2 and clf.converged_
    assert clf.weight_changes_[0] > 0.1 and clf.weight_changes_[1] == 0.0
    # a round's change: the mean over rows of the total-variation distance between old and new weights
    uniform = full / full.sum(axis=1, keepdims=True)
    assert clf.weight_changes_[0] == pytest.approx(0.5 * np.abs(expected - uniform).sum(axis=1).mean())
    # each round scores its out-of-fold probabilities by their share in the bags, the start by the class prior's
    in_bags = np.where(full, table, 0.0).sum(axis=1).mean()
    prior = np.where(full, uniform.mean(axis=0), 0.0).sum(axis=1).mean()
    assert clf.bag_probabilities_ == pytest.approx([prior, in_bags, in_bags]) and in_bags > prior

    fits = FixedProba.fits
    assert len(fits) == 2 * 3 + 1  # two rounds of three folds, then the final fit
    sizes = full.sum(axis=1)
    for k, (rows, labels, weights) in enumerate(fits):
        # a row's copies stay together: one per candidate, labelled with the candidates
        counts = np.bincount(rows, minlength=len(X))
        seen = counts > 0
        np.testing.assert_array_equal(counts[seen], sizes[seen])
        assert full[rows, labels].all()
        # round 1 fits on uniform weights, round 2 and the final fit on the updated ones
        np.testing.assert_allclose(weights, (1.0 / sizes[rows]) if k < 3 else expected[rows, labels])
    assert len(fits[-1][0]) == full.sum()

    # no row is ever predicted by a model that saw it, and each round predicts every row once
    assert len(FixedProba.predictions) == 6
    for seen, predicted in FixedProba.predictions:
        assert not seen & predicted
        assert seen | predicted == frozenset(range(len(X)))
    for r in (0, 1):
        parts = [p for _, p in FixedProba.predictions[3 * r : 3 * r + 3]]
        assert sorted(i for p in parts for i in p) == list(range(len(X)))
    # the folds stay the same from round to round, and their sizes differ by at most one
    assert [p for _, p in FixedProba.predictions[:3]] == [p for _, p in FixedProba.predictions[3:]]
    assert sorted(len(p) for _, p in FixedProba.predictions[:3]) == [4, 4, 4]


def test_disambiguate_reads_the_final_weights(stub):
    X, bags, table = stub
    clf = PlClassifier(FixedProba(), max_rounds=5, n_folds=3, threshold=0.7, **PLAIN).fit(X, bags)
    d = clf.disambiguate()
    full = np.where(bags.any(axis=1, keepdims=True), bags, True)
    assert full[np.arange(len(X)), d.labels].all()
    np.testing.assert_allclose(d.score, clf.weights_.max(axis=1))
    np.testing.assert_array_equal(d.accept, d.score >= 0.7)
    assert d.labels[0] == 0 and not d.guess[0] and d.accept[0]  # 0.75 >= 0.7
    assert d.guess[1] and not d.accept[1]  # 0.5 / 0.5 tie
    assert d.labels[3] == 1 and d.score[3] == 1.0


def test_max_rounds_zero_keeps_the_uniform_weights(stub):
    X, bags, _ = stub
    clf = PlClassifier(FixedProba(), max_rounds=0, n_folds=3, **PLAIN).fit(X, bags)
    full = np.where(bags.any(axis=1, keepdims=True), bags, True)
    np.testing.assert_allclose(clf.weights_, full / full.sum(axis=1, keepdims=True))
    assert (clf.n_rounds_, clf.converged_, clf.weight_changes_) == (0, False, [])
    assert len(FixedProba.fits) == 1


def test_stops_after_max_rounds_when_the_weights_keep_moving():
    X, y = blobs(90)
    S = pll.noise.uniform(y, 3, p=1.0, r=1, random_state=0)
    clf = PlClassifier(max_rounds=3, tol=1e-12, **PLAIN).fit(X, S)
    assert clf.n_rounds_ == 3 and not clf.converged_ and len(clf.weight_changes_) == 3


# --- on synthetic partial labels -----------------------------------------------------------------


def test_disambiguation_beats_its_first_round_and_uniform_weights_on_held_out_rows():
    X, y = make_classification(
        n_samples=2000, n_features=10, n_informative=6, n_redundant=0, n_classes=4,
        n_clusters_per_class=1, random_state=0,
    )
    S = pll.noise.uniform(y, 4, p=1.0, r=2, random_state=0)  # every bag: the true label and 2 others
    tr, te = slice(0, 1000), slice(1000, None)

    def fitted(max_rounds):
        return PlClassifier(LogisticRegression(max_iter=1000), max_rounds=max_rounds, random_state=0, **PLAIN).fit(
            X[tr], S[tr])

    full, first, uniform = fitted(20), fitted(1), fitted(0)
    acc = {name: (m.predict(X[te]) == y[te]).mean() for name, m in [("full", full), ("first", first), ("uniform", uniform)]}
    assert acc["full"] > acc["first"] + 0.05 and acc["full"] > acc["uniform"] + 0.05, acc
    # the inner estimator on the uniformly weighted expansion is what max_rounds=0 fits
    rows, cols = np.nonzero(S[tr])
    ref = LogisticRegression(max_iter=1000).fit(X[tr][rows], cols, sample_weight=1.0 / S[tr].sum(axis=1)[rows])
    np.testing.assert_allclose(uniform.predict_proba(X[te]), ref.predict_proba(X[te]), atol=1e-8)
    # the weights concentrate on the true label
    on_true = full.weights_[np.arange(1000), y[tr]]
    assert (full.disambiguate().labels == y[tr]).mean() > 0.75
    assert on_true.mean() > 0.65 and (on_true > 0.5).mean() > 0.7
    assert on_true.mean() > first.weights_[np.arange(1000), y[tr]].mean() + 0.2


@pytest.mark.parametrize("init, method", [("pl_knn", pll.PlKnn), ("ipal", pll.Ipal)])
def test_knn_initialisation_is_the_methods_disambiguation_on_the_bag(init, method):
    X, y = blobs(60)
    S = pll.noise.uniform(y, 3, p=1.0, r=1, random_state=1)
    X = X * [1.0, 10.0, 100.0, 1e3, 1e4]  # the search standardizes the columns: their scales do not matter
    clf = PlClassifier(init=init, max_rounds=0, random_state=0).fit(X, S)
    standardized = (X - X.mean(axis=0)) / X.std(axis=0)
    labels = method(n_neighbors=10, random_state=0).fit(standardized, S).disambiguate()
    np.testing.assert_allclose(clf.weights_, restricted(labels.shares, S))
    assert (clf.weights_[~S] == 0).all()
    np.testing.assert_allclose(clf.weights_.sum(axis=1), 1.0)
    # the largest weight is on the label the method disambiguated (rows of no tie), mostly the true one
    sure = ~labels.guess
    assert sure.mean() > 0.8
    np.testing.assert_array_equal(clf.weights_.argmax(axis=1)[sure], labels.labels[sure])
    assert (clf.weights_.argmax(axis=1) == y).mean() > 0.8
    with pytest.raises(InvalidParameterError, match=f"init='{init}' needs at least 11"):
        PlClassifier(init=init).fit(X[:10], S[:10])


def test_the_default_start_is_ipal_on_more_than_10_rows_else_uniform():
    X, y = blobs(60)
    S = pll.noise.uniform(y, 3, p=1.0, r=1, random_state=1)
    auto, ipal = (PlClassifier(init=init, max_rounds=0, random_state=0).fit(X, S) for init in ("auto", "ipal"))
    assert PlClassifier().init == "auto"
    np.testing.assert_array_equal(auto.weights_, ipal.weights_)
    small = PlClassifier(max_rounds=0, n_folds=2).fit(X[:10], S[:10])
    np.testing.assert_allclose(small.weights_, S[:10] / S[:10].sum(axis=1, keepdims=True))


class BreaksOnUnequalWeights(LogisticRegression):
    """Logistic regression, except that fitted on weights that are not all equal it predicts the least likely class."""

    def fit(self, X, y, sample_weight=None):
        self.broken_ = np.ptp(sample_weight) > 1e-12
        return super().fit(X, y, sample_weight=sample_weight)

    def predict_proba(self, X):
        P = super().predict_proba(X)
        return np.eye(P.shape[1])[P.argmin(axis=1)] if self.broken_ else P


def test_a_round_whose_models_predict_the_bags_worse_is_dropped():
    X, y = blobs(150)
    S = pll.noise.uniform(y, 3, p=1.0, r=1, random_state=0)  # bags of two: uniform weights are all 1/2
    clf = PlClassifier(BreaksOnUnequalWeights(max_iter=1000), max_rounds=5, random_state=0, **PLAIN).fit(X, S)
    # round 1 (from uniform weights) beats the prior; round 2's models, fitted on round 1's weights, fall below it
    prior, first, second = clf.bag_probabilities_
    assert first > prior > second
    np.testing.assert_allclose(clf.weights_, S / S.sum(axis=1, keepdims=True))  # the weights before round 1's
    assert (clf.n_rounds_, clf.weight_changes_, clf.estimator_.broken_) == (0, [], False)
    assert (clf.predict(X) == y).mean() > 0.8
    # an estimator that does not break runs on
    plain = PlClassifier(LogisticRegression(max_iter=1000), max_rounds=5, random_state=0, **PLAIN).fit(X, S)
    assert plain.n_rounds_ >= 2 and np.all(np.diff(plain.bag_probabilities_) >= 0)


def test_class_balance_fits_equal_class_totals_and_corrects_back_to_the_class_shares():
    from sklearn.dummy import DummyClassifier

    X, y = blobs(90)
    S = pll.noise.uniform(y, 3, p=0.5, r=1, random_state=0)
    S[y == 2] = np.eye(3, dtype=bool)[2]  # class 2 only unambiguous: its share differs from the others'
    seen = []

    class Recorder(DummyClassifier):
        def fit(self, X, y, sample_weight=None):
            seen.append(np.bincount(y, weights=sample_weight, minlength=3))
            return super().fit(X, y, sample_weight=sample_weight)

    clf = PlClassifier(Recorder(strategy="prior"), max_rounds=0, init="uniform").fit(X, S)
    np.testing.assert_allclose(seen[-1], seen[-1].mean())  # every class the same total
    shares = (S / S.sum(axis=1, keepdims=True)).mean(axis=0)
    np.testing.assert_allclose(clf.class_prior_, shares)
    # the prior-predicting model, fitted balanced, predicts uniform; Bayes' rule moves it back to the shares
    np.testing.assert_allclose(clf.predict_proba(X[:3]), np.tile(shares, (3, 1)))
    unbalanced = PlClassifier(Recorder(strategy="prior"), max_rounds=0, init="uniform", class_balance=False).fit(X, S)
    assert unbalanced.class_prior_ is None
    np.testing.assert_allclose(unbalanced.predict_proba(X[:3]), clf.predict_proba(X[:3]))


def test_a_model_pickled_before_class_balance_predicts_as_it_was_fitted():
    import pickle

    X, y = blobs(60)
    clf = PlClassifier(max_rounds=0, init="uniform", class_balance=False).fit(X, y)
    state = dict(clf.__getstate__())
    del state["class_balance"], state["class_prior_"]
    old = PlClassifier.__new__(PlClassifier)
    old.__setstate__(state)
    np.testing.assert_allclose(pickle.loads(pickle.dumps(old)).predict_proba(X), clf.predict_proba(X))


# --- predictions with a reject option -----------------------------------------------------------


@pytest.fixture(scope="module")
def fitted():
    X, y = blobs(150, n_classes=4, seed=3)
    S = pll.noise.uniform(y, 4, p=0.7, r=1, random_state=0)
    return PlClassifier(max_rounds=3, random_state=0).fit(X[:100], S[:100]), X[100:], y[100:]


def test_predict_with_reject_accepts_iff_the_top_probability_reaches_the_threshold(fitted):
    clf, X, _ = fitted
    P = clf.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    r = clf.predict_with_reject(X)
    np.testing.assert_array_equal(r.labels, clf.classes_[P.argmax(axis=1)])
    np.testing.assert_allclose(r.score, P.max(axis=1))
    np.testing.assert_array_equal(r.accept, r.score >= 0.9)
    assert 0 < r.accept.sum() < len(X)
    assert not r.guess.any()
    np.testing.assert_array_equal(clf.predict(X), r.labels)
    np.testing.assert_allclose(clf.decision_function(X), r.score)
    np.testing.assert_allclose(clf.conformity(X), P)
    at = clf.set_params(threshold=float(r.score[0])).predict_with_reject(X)  # >=, not >
    assert at.accept[0] and (at.accept == (r.score >= r.score[0])).all()
    clf.set_params(threshold=0.9)


def test_candidates_restrict_and_renormalise(fitted):
    clf, X, _ = fitted
    P = clf.predict_proba(X)
    cand = np.zeros((len(X), 4), dtype=bool)
    cand[:, [1, 3]] = True
    cand[0] = False  # empty: all classes
    r = clf.predict_with_reject(X, candidates=cand)
    assert (r.labels[1:] % 2 == 1).all()
    sub = P[1:][:, [1, 3]]
    np.testing.assert_allclose(r.score[1:], sub.max(axis=1) / sub.sum(axis=1))
    assert r.labels[0] == P[0].argmax() and np.isclose(r.score[0], P[0].max())
    np.testing.assert_array_equal(r.accept, r.score >= clf.threshold)
    sets = [{1, 3}] * len(X)
    np.testing.assert_array_equal(clf.predict_with_reject(X, candidates=sets).labels[1:], r.labels[1:])


def test_score_is_the_partial_label_accuracy(fitted):
    clf, X, y = fitted
    assert clf.score(X, y) == pytest.approx((clf.predict(X) == y).mean())
    everything = np.ones((len(X), 4), dtype=bool)
    assert clf.score(X, everything) == 1.0


def test_label_sets_with_string_labels():
    X, y = blobs(90)
    names = np.array(["cat", "dog", "owl"])
    S = [{names[c], names[(c + 1) % 3]} if i % 2 else {names[c]} for i, c in enumerate(y)]
    clf = PlClassifier(random_state=0).fit(X, S)
    np.testing.assert_array_equal(clf.classes_, names)
    assert clf.n_classes_ == 3 and clf.n_features_in_ == 5
    pred = clf.predict(X)
    assert set(pred) <= set(names) and (pred == names[y]).mean() > 0.8
    d = clf.disambiguate()
    assert all(label in bag for label, bag in zip(d.labels, S))
    r = clf.predict_with_reject(X[:5], candidates=[{"owl"}] * 5)
    assert (r.labels == "owl").all() and (r.score == 1.0).all()
    assert clf.score(X, S) == pytest.approx(np.mean([p in bag for p, bag in zip(pred, S)]))


def test_a_class_in_no_bag_gets_probability_zero():
    X, y = blobs(60)
    S = np.zeros((60, 4), dtype=bool)
    S[np.arange(60), y] = True
    S[::3, (y[::3] + 1) % 3] = True  # class 3 is in no bag
    clf = PlClassifier(max_rounds=2).fit(X, S)
    np.testing.assert_array_equal(clf.classes_, np.arange(4))
    P = clf.predict_proba(X)
    assert P.shape == (60, 4) and (P[:, 3] == 0).all()
    np.testing.assert_allclose(P.sum(axis=1), 1.0)


def test_sparse_bags_and_data_frames():
    import pandas as pd
    import scipy.sparse as sp

    X, y = blobs(60)
    S = pll.noise.uniform(y, 3, p=0.5, r=1, random_state=0)
    dense = PlClassifier(max_rounds=2, random_state=0).fit(X, S)
    sparse = PlClassifier(max_rounds=2, random_state=0).fit(X, sp.csr_matrix(S.astype(int)))
    np.testing.assert_allclose(sparse.weights_, dense.weights_)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(5)])
    clf = PlClassifier(max_rounds=2, random_state=0).fit(frame, S)
    assert list(clf.feature_names_in_) == list(frame.columns)
    np.testing.assert_allclose(clf.predict_proba(frame), dense.predict_proba(X))


def test_neighbors_are_not_needed_and_ignored():
    X, y = blobs(60)
    S = pll.noise.uniform(y, 3, p=0.5, r=1, random_state=0)
    clf = PlClassifier(max_rounds=2, random_state=0)
    assert clf._n_neighbors_needed() == 0 and clf._k_param is None
    nb = pll.neighbors.kneighbors(X, None, k=3)
    a = clf.fit(X, S, neighbors=nb).predict_proba(X, neighbors=nb)
    b = clone(clf).fit(X, S).predict_proba(X)
    np.testing.assert_allclose(a, b)


def test_same_seed_same_result_other_seed_other_folds():
    X, y = blobs(90)
    S = pll.noise.uniform(y, 3, p=1.0, r=1, random_state=0)
    a, b = (PlClassifier(max_rounds=2, random_state=5).fit(X, S) for _ in range(2))
    np.testing.assert_array_equal(a.weights_, b.weights_)
    c = PlClassifier(max_rounds=2, random_state=6).fit(X, S)
    assert not np.array_equal(a.weights_, c.weights_)


# --- estimators by name, and what is refused -----------------------------------------------------


@pytest.mark.parametrize(
    "name, cls",
    [("logistic_regression", LogisticRegression), ("hist_gradient_boosting", HistGradientBoostingClassifier),
     ("random_forest", RandomForestClassifier), ("sgd", SGDClassifier)],
)
def test_estimator_by_name(name, cls):
    X, y = blobs(60)
    S = pll.noise.uniform(y, 3, p=0.5, r=1, random_state=0)
    clf = PlClassifier(name, max_rounds=1, n_folds=2, random_state=3)
    assert clone(clf).get_params()["estimator"] == name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SGD's ConvergenceWarning
        clf.fit(X, S)
    assert type(clf.estimator_) is cls and clf.get_params()["estimator"] == name
    if name != "logistic_regression":  # lbfgs draws nothing: LogisticRegression() takes no seed
        assert clf.estimator_.random_state == 3
    assert name in ESTIMATORS and clf.predict_proba(X).shape == (60, 3)


def test_warm_starts_only_where_they_refit_from_the_previous_solution():
    assert warm_startable(LogisticRegression()) and warm_startable(SGDClassifier())
    # ensembles have warm_start too, but there it adds members to the old ones
    assert not warm_startable(RandomForestClassifier()) and not warm_startable(HistGradientBoostingClassifier())
    X, y = blobs(90)
    previous, _ = fit_inner(LogisticRegression(warm_start=True, max_iter=1000), X, y, np.ones(len(y)))
    again, classes = fit_inner(LogisticRegression(warm_start=True), X, y, np.ones(len(y)), previous=previous)
    assert again is previous and list(classes) == [0, 1, 2]
    # a previous model over other labels is not continued
    fresh, _ = fit_inner(LogisticRegression(warm_start=True), X[y < 2], y[y < 2], np.ones((y < 2).sum()), previous=previous)
    assert fresh is not previous


def test_warm_started_logistic_regression_reaches_the_cold_weights():
    """A convex fit has one solution: starting from the last round's only shortens the way there."""
    X, y = blobs(300)
    S = pll.noise.uniform(y, 3, p=1.0, r=1, random_state=0)
    warm, cold = (PlClassifier(LogisticRegression(max_iter=5000, tol=1e-10), max_rounds=4, tol=1e-12, warm_start=w,
                               random_state=0, **PLAIN).fit(X, S) for w in (True, False))
    np.testing.assert_allclose(warm.weights_, cold.weights_, atol=1e-5)
    assert warm.weight_changes_ == pytest.approx(cold.weight_changes_, abs=1e-5)
    assert not warm.estimator_.get_params()["warm_start"]  # the final estimator is a fresh clone of the given one


def test_named_boosting_regularises_its_leaves():
    """Unregularised leaves (-G/H) explode where the weights have left a class (pll/methods/_inner.py)."""
    assert ESTIMATORS["hist_gradient_boosting"](0).l2_regularization == 1.0


def test_a_given_estimator_is_cloned_not_fitted():
    X, y = blobs(60)
    inner = LogisticRegression(C=0.5, max_iter=1000)
    clf = PlClassifier(inner, max_rounds=1).fit(X, y)
    assert not hasattr(inner, "coef_") and clf.estimator_ is not inner and clf.estimator_.C == 0.5


@pytest.mark.parametrize(
    "params, match",
    [
        ({"max_rounds": -1}, "'max_rounds'"),
        ({"max_rounds": 2.5}, "'max_rounds'"),
        ({"max_rounds": True}, "'max_rounds'"),
        ({"n_folds": 1}, "'n_folds'"),
        ({"tol": 0.0}, "'tol'"),
        ({"init": "knn"}, "'init'"),
        ({"threshold": 1.5}, "'threshold'"),
        ({"random_state": -1}, "'random_state'"),
        ({"estimator": "svm"}, "'estimator'.*unknown name 'svm'"),
        ({"estimator": SVC()}, "'estimator'.*SVC has no predict_proba"),
        ({"estimator": KNeighborsClassifier()}, "'estimator'.*KNeighborsClassifier.fit takes no sample_weight"),
        ({"estimator": LogisticRegression}, "'estimator'.*the class LogisticRegression"),
        ({"estimator": 3}, "'estimator'.*int has no fit method"),
    ],
)
def test_bad_parameters_are_refused_naming_them(params, match):
    X, y = blobs(30)
    with pytest.raises(InvalidParameterError, match=match):
        PlClassifier(**params).fit(X, y)


def test_too_few_rows_for_the_folds():
    X, y = blobs(30)
    with pytest.raises(InvalidParameterError, match="n_folds=5 needs at least 5 training rows, got n_samples=4"):
        PlClassifier().fit(X[:4], y[:4])


def test_bad_data_gets_pll_errors():
    X, y = blobs(30)
    with pytest.raises(pll.errors.InvalidDataError, match="row counts differ"):
        PlClassifier().fit(X, y[:20])
    clf = PlClassifier(max_rounds=1).fit(X, y)
    with pytest.raises(pll.errors.InvalidDataError, match="features"):
        clf.predict(X[:, :3])
    with pytest.raises(pll.errors.InvalidDataError, match="query candidate sets"):
        clf.predict_with_reject(X, candidates=np.ones((30, 2), dtype=bool))


@pytest.mark.parametrize(
    "call",
    [
        lambda c, X: c.predict(X),
        lambda c, X: c.predict_proba(X),
        lambda c, X: c.predict_with_reject(X),
        lambda c, X: c.decision_function(X),
        lambda c, X: c.conformity(X),
        lambda c, X: c.disambiguate(),
    ],
)
def test_not_fitted(call):
    with pytest.raises(NotFittedError, match="PlClassifier is not fitted"):
        call(PlClassifier(), np.zeros((2, 3)))


# scikit-learn's estimator checks: tests/unit/test_estimator_checks.py runs them on PlClassifier too.

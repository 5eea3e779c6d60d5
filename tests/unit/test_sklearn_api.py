"""The methods as a scikit-learn user meets them: input forms, fitted attributes, scores, pipelines, model selection.

And the validation layer they share (:mod:`pll.utils.validation`): bad parameters
and bad input are refused at ``fit`` with one typed line.
"""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
import scipy.sparse
import sklearn.exceptions
from sklearn.base import BaseEstimator, clone
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler

import pll
from pll.errors import InvalidDataError, InvalidParameterError, NotFittedError, PllError
from pll.evaluation import make_risk_scorer, partial_label_report, reject_report
from pll.methods import predict_with_reject
from pll.neighbors import kneighbors
from pll.utils.validation import check_bags, check_features, encode_bags

METHODS = [pll.PlKnn(n_neighbors=5, random_state=0), pll.DstPll(n_neighbors=5, random_state=0), pll.PlAknn(max_neighbors=5)]
ESTIMATORS = [*METHODS, pll.TrustScore(), pll.PlAknnPreprocessor()]
NAMES = np.array(["ant", "bee", "cat", "dog"])


def method_ids(est):
    return type(est).__name__


@pytest.fixture(scope="module")
def data():
    """Four blobs; bags hold the true class and each other class with probability 0.3."""
    rng = np.random.default_rng(0)
    y = rng.integers(4, size=120)
    X = rng.normal(size=(120, 3)) + 3.0 * np.eye(4)[y][:, :3] - 3.0 * np.eye(4)[y][:, 3:]
    S = np.eye(4, dtype=bool)[y] | (rng.random((120, 4)) < 0.3)
    return X[:90], S[:90], y[:90], X[90:], y[90:]


def label_sets(S):
    return [{str(NAMES[j]) for j in np.flatnonzero(row)} for row in S]


# ------------------------------------------------------------------ fit(X, S): every form of candidate sets


@pytest.mark.parametrize("method", METHODS, ids=method_ids)
def test_every_form_of_candidate_sets_gives_the_same_model(method, data):
    X, S, _, Q, _ = data
    on_matrix = clone(method).fit(X, S)
    np.testing.assert_array_equal(on_matrix.classes_, np.arange(4))
    indices = on_matrix.predict(Q)
    assert indices.dtype == np.int64 and set(indices) <= {0, 1, 2, 3}  # a 0/1 matrix: class indices, as before
    for same in (S.astype(np.int8), S.astype(float), scipy.sparse.csr_matrix(S), scipy.sparse.csr_array(S.astype(int))):
        np.testing.assert_array_equal(clone(method).fit(X, same).predict(Q), indices)
    on_sets = clone(method).fit(X, label_sets(S))
    np.testing.assert_array_equal(on_sets.classes_, NAMES)
    np.testing.assert_array_equal(on_sets.predict(Q), NAMES[indices])
    r_sets, r_matrix = on_sets.predict_with_reject(Q), on_matrix.predict_with_reject(Q)
    np.testing.assert_array_equal(r_sets.labels, NAMES[r_matrix.labels])
    np.testing.assert_array_equal(r_sets.score, r_matrix.score)
    np.testing.assert_array_equal(on_sets.disambiguate().labels, NAMES[on_matrix.disambiguate().labels])


@pytest.mark.parametrize("method", METHODS, ids=method_ids)
def test_one_dimensional_labels_are_single_candidate_bags(method, data):
    X, _, y, Q, _ = data
    on_labels = clone(method).fit(X, NAMES[y])
    on_bags = clone(method).fit(X, np.eye(4, dtype=bool)[y])
    np.testing.assert_array_equal(on_labels.classes_, NAMES)
    np.testing.assert_array_equal(on_labels.predict(Q), NAMES[on_bags.predict(Q)])
    shifted = clone(method).fit(X, y + 10)  # integer labels are values, not column indices
    np.testing.assert_array_equal(shifted.classes_, [10, 11, 12, 13])
    np.testing.assert_array_equal(shifted.predict(Q), on_bags.predict(Q) + 10)


def test_candidates_at_prediction_take_the_same_forms(data):
    X, S, _, Q, _ = data
    clf = pll.DstPll(n_neighbors=5, random_state=0).fit(X, label_sets(S))
    allowed = [{"ant", "dog"}] * len(Q)
    r = clf.predict_with_reject(Q, candidates=allowed)
    assert set(r.labels) <= {"ant", "dog"}
    matrix = np.zeros((len(Q), 4), dtype=bool)
    matrix[:, [0, 3]] = True
    np.testing.assert_array_equal(clf.predict_with_reject(Q, candidates=matrix).labels, r.labels)
    with pytest.raises(InvalidDataError, match="query candidate sets: row 0 holds 'eel', not one of the classes"):
        clf.predict_with_reject(Q, candidates=[{"eel"}] * len(Q))


def test_bad_candidate_sets_are_refused_in_one_line(data):
    X, S, _, _, _ = data
    cases = [
        (S[:-1], "90 feature rows but 89 candidate sets"),
        (np.where(S, 2, 0), r"candidate sets must hold only 0/1 values \(found 2 at row 0, class column"),
        (None, "fit requires y to be passed, but the target y is None"),
        (np.full(90, 0.5), "Unknown label type: continuous"),
        (np.r_[np.zeros(89), np.nan], "label nan at row 89 is NaN or infinite"),
        ([{1, "a"}] * 90, "labels must be comparable"),
        (np.zeros((90, 2, 2)), "got shape"),
    ]
    for bad, message in cases:
        with pytest.raises(InvalidDataError, match=message):
            pll.PlKnn(n_neighbors=3).fit(X, bad)


# ------------------------------------------------------------------ validation at fit


@pytest.mark.parametrize("method", METHODS, ids=method_ids)
def test_parameters_and_features_are_refused_at_fit(method, data):
    X, S, _, _, _ = data
    k = method._k_param
    cases = [
        ({k: True}, InvalidParameterError, f"'{k}' parameter of {type(method).__name__} must not be a bool"),
        ({k: 0}, InvalidParameterError, f"'{k}' parameter of {type(method).__name__} must be an int"),
        ({"knn": "faiss"}, InvalidParameterError, "unknown kNN backend 'faiss'"),
        ({"knn": "exact", "knn_options": {"n_trees": 3}}, InvalidParameterError, "no option 'n_trees'"),
        ({"random_state": -1}, InvalidParameterError, "'random_state' parameter"),
    ]
    for params, error, message in cases:
        with pytest.raises(error, match=message):
            clone(method).set_params(**params).fit(X, S)
    nan = X.copy()
    nan[7, 2] = np.nan
    message = r"training rows: 1 row\(s\) have a feature that is NaN or infinite \(first at row 7, feature 2\)"
    with pytest.raises(InvalidDataError, match=message):
        clone(method).fit(nan, S)
    with pytest.raises(InvalidDataError, match="sparse input is not supported"):
        clone(method).fit(scipy.sparse.csr_matrix(X), S)
    with pytest.raises(InvalidParameterError, match="needs at least .* training rows, got n_samples=3"):
        clone(method).fit(X[:3], S[:3])


def test_make_method_refuses_bad_values_before_anything_runs():
    from pll.methods import make_method

    with pytest.raises(InvalidParameterError, match="'n_neighbors' parameter of PlKnn must not be a bool"):
        make_method("pl_knn", {"n_neighbors": True})
    with pytest.raises(InvalidParameterError, match="DstPll: unknown kNN backend 'faiss'"):
        make_method("dst_pll", {"knn": "faiss"})
    assert make_method("pl_aknn", {"max_neighbors": 7}, random_state=1).max_neighbors == 7


def test_parameters_are_validated_once_by_scikit_learn_machinery(monkeypatch, data):
    import pll.methods._base as base

    calls = []
    monkeypatch.setattr(base, "check_params", lambda est: calls.append(type(est).__name__))
    X, S, _, _, _ = data
    pll.PlAknn(max_neighbors=5).fit(X, S)
    assert calls == ["PlAknn"]
    assert pll.methods.NeighborMethod._validate_params is BaseEstimator._validate_params
    for est in ESTIMATORS:
        assert type(est)._validate_params is BaseEstimator._validate_params  # scikit-learn's, not overridden
        assert type(est)._parameter_constraints.keys() == set(est.get_params(deep=False))  # every one declared


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=method_ids)
def test_fitted_attributes_and_feature_names(estimator, data):
    X, S, y, Q, _ = data
    target = y if isinstance(estimator, pll.TrustScore) else S
    fitted = clone(estimator).fit(pd.DataFrame(X, columns=["a", "b", "c"]), target)
    assert fitted.n_features_in_ == 3
    np.testing.assert_array_equal(fitted.feature_names_in_, ["a", "b", "c"])
    query = getattr(fitted, "transform", None) or getattr(fitted, "distances", None) or fitted.predict
    with pytest.raises(InvalidDataError, match="^The feature names should match those that were passed during fit"):
        query(pd.DataFrame(Q, columns=["c", "b", "a"]))
    fitted = clone(estimator).fit(X, target)
    assert fitted.n_features_in_ == 3 and not hasattr(fitted, "feature_names_in_")
    query = getattr(fitted, "transform", None) or getattr(fitted, "distances", None) or fitted.predict
    with pytest.raises(InvalidDataError, match=f"X has 2 features, but {type(estimator).__name__} is expecting 3"):
        query(Q[:, :2])


def test_not_fitted_is_scikit_learns_not_fitted_error_too(data):
    X = data[0]
    assert issubclass(NotFittedError, sklearn.exceptions.NotFittedError) and issubclass(NotFittedError, PllError)
    for est in ESTIMATORS:
        method = getattr(est, "transform", None) or getattr(est, "distances", None) or est.predict
        with pytest.raises(sklearn.exceptions.NotFittedError, match="fit"):
            method(X)


# ------------------------------------------------------------------ per-class scores, reject scores, score


def test_predict_proba_and_decision_function(data):
    X, S, _, Q, _ = data
    knn = pll.PlKnn(n_neighbors=5).fit(X, S)
    r = knn.predict_with_reject(Q)
    np.testing.assert_array_equal(knn.predict_proba(Q), r.shares)
    np.testing.assert_array_equal(knn.decision_function(Q), r.score)
    empty = pll.PlKnn(n_neighbors=2).fit(X[:4], np.zeros((4, 4), dtype=bool))  # no neighbor casts a vote
    np.testing.assert_array_equal(empty.predict_proba(Q[:2]), np.full((2, 4), 0.25))
    dst = pll.DstPll(n_neighbors=5).fit(X, S)
    r = dst.predict_with_reject(Q)
    proba = dst.predict_proba(Q)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_allclose(proba * r.plausibilities.sum(axis=1, keepdims=True), r.plausibilities)
    np.testing.assert_array_equal(dst.decision_function(Q), r.score)
    assert not hasattr(pll.PlAknn(), "predict_proba")  # no per-class score to give


@pytest.mark.parametrize("method", METHODS, ids=method_ids)
def test_score_is_the_share_of_predictions_inside_the_candidate_set(method, data):
    X, S, y, Q, y_test = data
    clf = clone(method).fit(X, S)
    pred = clf.predict(X)
    assert clf.score(X, S) == pytest.approx(S[np.arange(len(X)), pred].mean())
    assert clf.score(X, [set(np.flatnonzero(row).tolist()) for row in S]) == clf.score(X, S)
    assert clf.score(X, label_sets(S)) == 0.0  # labels the model never saw are in no set
    assert clf.score(Q, y_test) == pytest.approx((clf.predict(Q) == y_test).mean())  # 1-d labels: accuracy
    weights = np.r_[np.ones(45), np.zeros(45)]
    assert clf.score(X, S, sample_weight=weights) == pytest.approx(S[np.arange(45), pred[:45]].mean())


def test_random_state_is_a_seed_and_none_is_fresh_randomness(data):
    X, S, _, _, _ = data
    for method in (pll.PlKnn(n_neighbors=3), pll.DstPll(n_neighbors=3)):
        a = clone(method).set_params(random_state=0).fit(X, S).predict_with_reject(X)
        b = clone(method).set_params(random_state=0).fit(X, S).predict_with_reject(X)
        c = clone(method).set_params(random_state=1).fit(X, S).predict_with_reject(X)
        assert a.guess.any() and (a.labels != c.labels).any()  # ties were drawn, and seed 1 drew otherwise
        np.testing.assert_array_equal(a.labels, b.labels)
        # 5-6 tied rows: eight fresh draws all alike would happen about once in 10**10 runs
        fresh = {tuple(clone(method).fit(X, S).predict_with_reject(X).labels) for _ in range(8)}
        assert len(fresh) > 1
        assert "None draws fresh randomness, as in scikit-learn" in " ".join(type(method).__doc__.split())


# ------------------------------------------------------------------ pipelines and model selection


def test_predict_with_reject_through_a_pipeline(data):
    X, S, _, Q, _ = data
    pipe = make_pipeline(MinMaxScaler(), pll.DstPll(n_neighbors=5)).fit(X, label_sets(S))
    scaler = MinMaxScaler().fit(X)
    direct = pll.DstPll(n_neighbors=5).fit(scaler.transform(X), label_sets(S)).predict_with_reject(scaler.transform(Q))
    through = predict_with_reject(pipe, Q)
    np.testing.assert_array_equal(through.labels, direct.labels)
    np.testing.assert_array_equal(through.beliefs, direct.beliefs)
    np.testing.assert_array_equal(pipe.predict(Q), direct.labels)
    nb = kneighbors(scaler.transform(X), scaler.transform(Q), k=5)
    np.testing.assert_array_equal(predict_with_reject(pipe, Q, neighbors=nb).score, direct.score)


def test_risk_scorer_scores_the_reject_option_in_a_grid_search(data):
    X, S, _, _, _ = data
    folds = KFold(3)
    scorer = make_risk_scorer(0.1)
    pipe = make_pipeline(MinMaxScaler(), pll.PlKnn())
    scores = cross_val_score(pipe, X, S, scoring=scorer, cv=folds)
    for score, (train, test) in zip(scores, folds.split(X)):
        fitted = clone(pipe).fit(X[train], S[train])
        r = predict_with_reject(fitted, X[test])
        assert score == -partial_label_report(S[test], r.labels, r.accept, lambdas=(0.1,))["risk_0.10"]
    y = np.argmax(S, axis=1)
    fitted = clone(pipe).fit(X, label_sets(S))
    r = predict_with_reject(fitted, X)
    expected = reject_report(y, np.searchsorted(NAMES, r.labels), r.accept, lambdas=(0.1,))["risk_0.10"]
    assert scorer(fitted, X, NAMES[y]) == pytest.approx(-expected)
    search = GridSearchCV(pll.DstPll(), {"n_neighbors": [3, 9]}, scoring=scorer, cv=folds, error_score="raise")
    search.fit(X, label_sets(S))
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    default = GridSearchCV(pll.PlKnn(), {"n_neighbors": [3, 9]}, cv=folds, error_score="raise").fit(X, S)
    assert (default.cv_results_["mean_test_score"] > 0.5).all()  # the estimator's own score: partial-label accuracy
    assert repr(scorer) == "make_risk_scorer(0.1)"


def test_grid_search_scoring_with_candidate_sets_and_with_labels(data):
    """The default scoring takes candidate sets; scikit-learn's ``scoring="accuracy"`` needs 1-d labels.

    "accuracy" compares ``predict`` with ``y`` itself, so on a candidate matrix every fold fails (NaN with
    only a warning, unless ``error_score="raise"``) and the estimator cannot step in; the README says so
    and points to the default score or :func:`make_risk_scorer`.
    """
    X, S, y, _, _ = data
    folds, grid = KFold(3), {"n_neighbors": [3, 9]}
    sets = label_sets(S)
    for candidates, rows_of in ((S, lambda rows: S[rows]), (sets, lambda rows: [sets[i] for i in rows])):
        search = GridSearchCV(pll.PlKnn(random_state=0), grid, cv=folds, error_score="raise").fit(X, candidates)
        for k, score in zip(grid["n_neighbors"], search.cv_results_["mean_test_score"]):
            own = [pll.PlKnn(n_neighbors=k, random_state=0).fit(X[train], rows_of(train)).score(X[test], rows_of(test))
                   for train, test in folds.split(X)]
            assert score == pytest.approx(np.mean(own))  # partial-label accuracy, fold by fold
    on_labels = GridSearchCV(pll.PlKnn(), grid, scoring="accuracy", cv=folds, error_score="raise").fit(X, y)
    scores = on_labels.cv_results_["mean_test_score"]
    assert np.isfinite(scores).all() and (scores > 0.5).all()
    with pytest.raises(ValueError, match="can't handle a mix of multilabel-indicator and multiclass targets"):
        GridSearchCV(pll.PlKnn(), grid, scoring="accuracy", cv=folds, error_score="raise").fit(X, S)


def test_models_read_from_memory_maps_predict(tmp_path, data):
    X, S, _, Q, _ = data
    for method in METHODS:
        fitted = clone(method).fit(X, S)
        for name in ("X_train_", "S_train_", "bag_bits_"):
            if hasattr(fitted, name):
                value = getattr(fitted, name)
                np.save(tmp_path / f"{name}.npy", value)
                setattr(fitted, name, np.load(tmp_path / f"{name}.npy", mmap_mode="r"))
        np.testing.assert_array_equal(fitted.predict(Q), clone(method).fit(X, S).predict(Q))


def test_models_pickled_before_classes_existed_still_predict_indices(data):
    X, S, _, Q, _ = data
    for method in METHODS:
        fitted = clone(method).fit(X, S)
        old = pickle.loads(pickle.dumps(fitted))
        del old.classes_, old.n_features_in_  # what a model pickled by the earlier code holds
        loaded = pickle.loads(pickle.dumps(old))
        np.testing.assert_array_equal(loaded.predict(Q), fitted.predict(Q))
        assert loaded.n_features_in_ == 3


# ------------------------------------------------------------------ the shared checks themselves


def test_feature_checks_name_the_problem():
    cases = [
        (np.zeros(3), r"features must be a 2-d array, got shape \(3,\). Reshape your data"),
        (np.zeros((0, 2)), r"no rows \(shape=\(0, 2\)\)"),
        (np.zeros((4, 0)), r"found 0 feature\(s\) \(shape=\(4, 0\)\) while a minimum of 1 is required"),
        (np.ones((2, 2)) * 1j, "Complex data not supported"),
        (scipy.sparse.eye(3), "sparse input is not supported"),
        (np.array([[1.0, np.inf], [np.nan, 0.0]]), r"2 row\(s\) have a feature that is NaN or infinite \(first at row 0, "),
    ]
    for X, message in cases:
        with pytest.raises(InvalidDataError, match=f"^rows: {message}"):
            check_features(X, "rows")
    with pytest.raises(TypeError, match="features are not numeric"):  # a NonNumericDataError is both
        check_features(np.array([[{"a": 1}]], dtype=object), "rows")
    assert check_features(np.zeros((2, 2), dtype=np.float32), "rows").dtype == np.float32


def test_bag_checks_name_the_row_and_column():
    with pytest.raises(InvalidDataError, match=r"^f: bags must hold only 0/1 values \(found 'x' at row 1, class column 0"):
        check_bags(np.array([[1, 0], ["x", 0]], dtype=object), what="bags", source="f")
    assert check_bags([[1, 0], [0, 1]]).dtype == bool
    bags, classes = encode_bags([{"b"}, {"a", "c"}, set()], 3)
    np.testing.assert_array_equal(classes, ["a", "b", "c"])
    np.testing.assert_array_equal(bags, [[0, 1, 0], [1, 0, 1], [0, 0, 0]])
    bags, _ = encode_bags(["b", "z"], 2, classes, unknown="ignore")  # scoring: an unknown label is in no set
    np.testing.assert_array_equal(bags, [[0, 1, 0], [0, 0, 0]])
    with pytest.raises(InvalidDataError, match="candidate sets have 2 classes, the model 3"):
        encode_bags(np.eye(2), 2, classes)

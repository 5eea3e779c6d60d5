"""Proden: a network trained on every candidate, reweighted each epoch by its own probabilities."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification

torch = pytest.importorskip("torch", reason="Proden needs the deep extra (PyTorch)")

import pll  # noqa: E402
from pll.errors import InvalidDataError, InvalidParameterError, NotFittedError  # noqa: E402
from pll.methods import METHODS, make_method  # noqa: E402
from pll.methods._cleaning import CLEANING_START, calibration_rows, calibration_scores, cleaned_bags  # noqa: E402
from pll.methods._proden import LARGE_DATA_ROWS, Proden  # noqa: E402

FAST = {"max_epochs": 10, "n_networks": 1}


def blobs(n=120, n_classes=3, seed=0, n_features=5):
    return make_classification(
        n_samples=n, n_features=n_features, n_informative=4, n_redundant=0, n_classes=n_classes,
        n_clusters_per_class=1, random_state=seed,
    )


@pytest.fixture(scope="module")
def ambiguous():
    """Every bag holds the true label and two of the three others: the bag alone names no label."""
    X, y = make_classification(
        n_samples=1500, n_features=10, n_informative=6, n_redundant=0, n_classes=4,
        n_clusters_per_class=1, class_sep=1.5, random_state=0,
    )
    S = pll.noise.uniform(y, 4, p=1.0, r=2, random_state=0)
    return X, y, S


@pytest.fixture(scope="module")
def fitted(ambiguous):
    X, y, S = ambiguous
    return Proden(max_epochs=30, n_networks=2, random_state=0).fit(X[:1000], S[:1000])


# --- disambiguation -------------------------------------------------------------------------------


def test_disambiguation_recovers_the_true_labels(ambiguous, fitted):
    X, y, S = ambiguous
    d = fitted.disambiguate()
    # a third of the candidates are right; the uniform start puts a third of the weight on each.  Measured:
    # 91 % of the training rows recovered with 0.75 of their weight, 91 % test accuracy (the same network on
    # true labels: 93 %).
    assert (d.labels == y[:1000]).mean() > 0.85
    assert fitted.weights_[np.arange(1000), y[:1000]].mean() > 0.7
    assert (fitted.predict(X[1000:]) == y[1000:]).mean() > 0.8
    # the weights stay distributions over the bag, and the reweighting settles
    np.testing.assert_allclose(fitted.weights_.sum(axis=1), 1.0)
    assert (fitted.weights_[~S[:1000]] == 0).all()
    changes = fitted.weight_changes_
    assert changes.shape == (2, 30) and (changes[:, -1] < changes[:, 0]).all()


def test_reweighting_beats_a_network_that_keeps_the_uniform_weights(ambiguous, fitted):
    """The first reweighting is after epoch 1: one epoch is what a fixed-weight network of the same start learns."""
    X, y, S = ambiguous
    one_epoch = Proden(max_epochs=1, n_networks=2, random_state=0).fit(X[:1000], S[:1000])
    recovered = (fitted.disambiguate().labels == y[:1000]).mean()
    assert recovered > (one_epoch.disambiguate().labels == y[:1000]).mean() + 0.05


def test_neighbor_votes_recover_what_a_weak_network_alone_does_not(ambiguous):
    """One hidden unit cannot tell four classes apart; the neighbors' weights, mixed into its reweighting, can."""
    X, y, S = ambiguous
    params = {"hidden_layer_sizes": (1,), "max_epochs": 20, "n_networks": 1, "random_state": 0}
    alone = Proden(neighbor_weight=0.0, **params).fit(X[:1000], S[:1000])
    voted = Proden(neighbor_weight=0.5, **params).fit(X[:1000], S[:1000])
    recovered = [(m.disambiguate().labels == y[:1000]).mean() for m in (alone, voted)]
    assert recovered[1] > recovered[0] + 0.05


def test_neighbor_votes_on_fewer_rows_than_ten_neighbors():
    X, y = blobs(6)
    clf = Proden(**FAST, random_state=0).fit(X, y)  # 5 neighbors each, not 10
    np.testing.assert_allclose(clf.weights_[np.arange(6), y], 1.0)


def test_scales_inside_so_feature_scale_does_not_matter(ambiguous):
    X, y, S = ambiguous
    # min-max (the default) removes a positive factor and a shift per feature
    moved = X * np.logspace(-3, 3, X.shape[1]) + 100.0
    a = Proden(**FAST, random_state=1).fit(X[:300], S[:300])
    b = Proden(**FAST, random_state=1).fit(moved[:300], S[:300])
    np.testing.assert_allclose(a.predict_proba(X[300:400]), b.predict_proba(moved[300:400]), atol=1e-5)
    np.testing.assert_allclose(b.offset_, moved[:300].min(axis=0))
    np.testing.assert_allclose(b.scale_, np.ptp(moved[:300], axis=0))
    assert a._scaled(X[:300]).min() == 0 and a._scaled(X[:300]).max() == 1
    # standardizing too; after the cube root only the factor passes through, and is removed
    c, d = (Proden(**FAST, scaling="standard", random_state=1).fit(Z[:300], S[:300]) for Z in (X, moved))
    # (within float32 rounding of the shifted features, which training amplifies: up to 0.02 seen, with every
    # predicted label the same)
    np.testing.assert_allclose(c.predict_proba(X[300:400]), d.predict_proba(moved[300:400]), atol=0.05)
    np.testing.assert_array_equal(c.predict(X[300:400]), d.predict(moved[300:400]))
    scaled = X * np.logspace(-3, 3, X.shape[1])
    e, f = (Proden(**FAST, scaling="cube_root", random_state=1).fit(Z[:300], S[:300]) for Z in (X, scaled))
    np.testing.assert_allclose(e.predict_proba(X[300:400]), f.predict_proba(scaled[300:400]), atol=5e-3)
    np.testing.assert_allclose(f.offset_, np.cbrt(scaled[:300]).mean(axis=0))


def test_a_constant_feature_is_scaled_by_one():
    X, y = blobs(60)
    X[:, 2] = 7.0
    for scaling in ("minmax", "standard", "cube_root"):  # (the mean of 7.0s may differ from 7.0 in its last bit)
        clf = Proden(**FAST, scaling=scaling, random_state=0).fit(X, y)
        assert np.isfinite(clf._scaled(X)).all() and np.isfinite(clf.predict_proba(X)).all()
    assert Proden(**FAST).fit(X, y).scale_[2] == 1.0


def test_batches_of_16_rows_on_small_data_and_of_256_on_large():
    clf = Proden()
    assert clf._batch(LARGE_DATA_ROWS - 1) == 16 and clf._batch(LARGE_DATA_ROWS) == 256
    assert Proden(batch_size=64)._batch(10) == 64
    clf.n_classes_ = 3
    assert clf._steps_per_epoch(100) == 6 and clf._steps_per_epoch(10) == 1  # n // batch, at least one
    assert clf._epochs(100) == 100 and clf._epochs(10**6) == 5  # 3,906 steps an epoch: max_steps leaves 5


def test_max_steps_caps_the_epochs():
    X, y = blobs(200)
    S = pll.noise.uniform(y, 3, p=1.0, r=1, random_state=0)  # 200 rows: 12 steps of 16 or 17 rows an epoch
    assert Proden(max_epochs=10, n_networks=1, random_state=0).fit(X, S).n_epochs_ == 10
    capped = Proden(max_epochs=10, max_steps=50, n_networks=1, random_state=0).fit(X, S)
    assert capped.n_epochs_ == 4 and capped.weight_changes_.shape == (1, 4)
    assert Proden(max_epochs=10, max_steps=1, n_networks=1, random_state=0).fit(X, S).n_epochs_ == 1


# --- seeds ----------------------------------------------------------------------------------------


def test_same_seed_same_model_other_seed_or_none_another():
    X, y = blobs(90)
    S = pll.noise.uniform(y, 3, p=1.0, r=1, random_state=0)
    a, b = (Proden(**FAST, random_state=5).fit(X, S) for _ in range(2))
    np.testing.assert_array_equal(a.weights_, b.weights_)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    other = Proden(**FAST, random_state=6).fit(X, S)
    assert not np.array_equal(a.weights_, other.weights_)
    fresh = [Proden(**FAST).fit(X, S).weights_ for _ in range(2)]  # None: fresh randomness, as in scikit-learn
    assert not np.array_equal(*fresh)


def test_networks_differ_and_the_prediction_averages_them():
    X, y = blobs(90)
    S = pll.noise.uniform(y, 3, p=1.0, r=1, random_state=0)
    clf = Proden(max_epochs=5, n_networks=3, class_balance=True, random_state=0).fit(X, S)
    Z = ((X - X.min(axis=0)) / np.ptp(X, axis=0)).astype(np.float32)  # the networks' input, in single precision
    assert all(net.params.dtype == torch.float32 for net in clf.networks_)
    probas = [net.predict_proba(Z, np.float32) for net in clf.networks_]
    assert not np.allclose(probas[0], probas[1])
    # the networks learn on class-balanced weights: their mean is moved back to the classes' shares (Bayes' rule)
    expected = np.mean(probas, axis=0) * clf.class_prior_
    np.testing.assert_allclose(clf.predict_proba(X), expected / expected.sum(axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(clf.class_prior_, clf.weights_.mean(axis=0))
    plain = Proden(max_epochs=5, n_networks=3, class_balance=False, random_state=0).fit(X, S)
    assert plain.class_prior_ is None
    plain_probas = [net.predict_proba(Z, np.float32) for net in plain.networks_]
    np.testing.assert_allclose(plain.predict_proba(X), np.mean(plain_probas, axis=0), rtol=1e-6)


# --- candidate cleaning ---------------------------------------------------------------------------


def test_cleaning_calibrates_and_narrows_by_the_shared_rule():
    """Proden's cleaning is :mod:`pll.methods._cleaning`'s (tested there), and off without ``cleaning_alpha``."""
    rng = np.random.default_rng(0)
    bags = rng.random((300, 4)) < 0.5
    bags[np.arange(300), rng.integers(0, 4, 300)] = True
    np.testing.assert_array_equal(Proden(cleaning_alpha=0.05)._calibration_rows(bags, 3), calibration_rows(bags, 3))
    assert Proden()._calibration_rows(bags, 0) is None
    P = rng.dirichlet(np.ones(4), size=300).astype(np.float32)
    scores = calibration_scores(P[:60], bags[:60])
    np.testing.assert_array_equal(Proden(cleaning_alpha=0.1)._allowed(P, bags, scores, 12),
                                  cleaned_bags(P, bags, scores, 0.1, 12))
    assert Proden(cleaning_alpha=0.1)._allowed(P, bags, None, 12) is bags


def test_cleaning_drops_candidates_from_the_weights_and_still_recovers_the_true_labels(ambiguous, fitted):
    X, y, S = ambiguous
    cleaned = Proden(max_epochs=30, n_networks=2, cleaning_alpha=0.05, random_state=0).fit(X[:1000], S[:1000])
    inside = S[:1000].astype(bool)
    # restricted to the conformal sets, some candidates get no weight at all; softmax alone leaves none at 0
    assert (cleaned.weights_[inside] == 0).mean() > 0.3 and (fitted.weights_[inside] == 0).mean() < 0.01
    assert (cleaned.weights_[~inside] == 0).all()
    np.testing.assert_allclose(cleaned.weights_.sum(axis=1), 1.0)
    assert (cleaned.disambiguate().labels == y[:1000]).mean() > 0.85
    assert (cleaned.predict(X[1000:]) == y[1000:]).mean() > 0.8


def test_cleaning_starts_after_ten_epochs():
    X, y = blobs(120)
    S = pll.noise.uniform(y, 3, p=1.0, r=1, random_state=0)
    plain, cleaned = (Proden(max_epochs=CLEANING_START, cleaning_alpha=alpha, random_state=0).fit(X, S)
                      for alpha in (None, 0.05))
    np.testing.assert_array_equal(plain.weights_, cleaned.weights_)


def test_class_balance_recovers_a_rare_class_that_always_shares_its_bag_with_a_frequent_one():
    """A rare class whose every bag also holds the most frequent class: unbalanced, the frequent one takes its rows."""
    X, y = make_classification(
        n_samples=900, n_features=8, n_informative=6, n_redundant=0, n_classes=3, n_clusters_per_class=1,
        weights=[0.6, 0.33, 0.07], class_sep=1.0, random_state=1,
    )
    rng = np.random.default_rng(0)
    S = np.eye(3, dtype=bool)[y]
    S[y == 2, 0] = True  # the rare class never without the frequent one
    S[y == 0, rng.choice([1, 2], (y == 0).sum())] = True
    S[y == 1, 0] = rng.random((y == 1).sum()) < 0.5
    rare = y == 2
    recall = {}
    for balance in (True, False):
        clf = Proden(max_epochs=30, n_networks=1, class_balance=balance, random_state=0).fit(X, S)
        recall[balance] = (clf.disambiguate().labels[rare] == 2).mean()
    # measured (seeds 0-2): 61-62 % of the rare rows recovered with the balance, none without
    assert recall[True] > recall[False] + 0.3, recall


def test_a_model_pickled_before_class_balance_predicts_as_it_was_fitted():
    import pickle

    X, y = blobs(60)
    clf = Proden(**FAST, class_balance=True, random_state=0).fit(X, y)
    state = dict(clf.__getstate__())
    del state["class_balance"], state["class_prior_"]
    old = Proden.__new__(Proden)
    old.__setstate__(state)
    assert old.class_prior_ is None and not old.class_balance  # the default, and no correction of what was fitted
    clf.class_prior_ = None
    np.testing.assert_allclose(pickle.loads(pickle.dumps(old)).predict_proba(X), clf.predict_proba(X))


def test_a_model_fitted_with_scikit_learns_networks_is_refused_naming_the_fix():
    import pickle

    X, y = blobs(60)
    state = dict(Proden(**FAST, random_state=0).fit(X, y).__getstate__())
    state["mean_"] = state.pop("offset_")  # what the earlier version stored
    old = Proden.__new__(Proden)
    with pytest.raises(pll.errors.PllError, match="earlier pll .* fit it again"):
        old.__setstate__(state)
    with pytest.raises(pll.errors.PllError, match="pll train --method proden"):
        pickle.loads(pickle.dumps(_Pickled(state)))


class _Pickled:
    """An object that unpickles as a Proden with ``state``, as an old model file would."""

    def __init__(self, state):
        self.state = state

    def __reduce__(self):
        return Proden.__new__, (Proden,), self.state


# --- the reject option, conformity, candidates -----------------------------------------------------


def test_predict_with_reject_accepts_iff_the_top_probability_reaches_0_9(ambiguous, fitted):
    X = ambiguous[0][1000:]
    P = fitted.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    r = fitted.predict_with_reject(X)
    assert fitted.threshold == 0.9
    np.testing.assert_array_equal(r.labels, P.argmax(axis=1))
    np.testing.assert_allclose(r.score, P.max(axis=1))
    np.testing.assert_array_equal(r.accept, r.score >= 0.9)
    assert 0 < r.accept.sum() < len(X)
    np.testing.assert_array_equal(r.reason == "none", r.accept)
    assert set(r.reason) <= {"none", "conflict", "low_score"}
    np.testing.assert_allclose(fitted.decision_function(X), r.score)
    np.testing.assert_allclose(fitted.conformity(X), P)
    # the accepted rows are the surer ones
    y = ambiguous[1][1000:]
    assert (r.labels[r.accept] == y[r.accept]).mean() > (r.labels[~r.accept] == y[~r.accept]).mean()


def test_candidates_restrict_the_prediction(fitted, ambiguous):
    X = ambiguous[0][1000:1100]
    r = fitted.predict_with_reject(X, candidates=[{1, 3}] * len(X))
    assert set(r.labels) <= {1, 3}
    P = fitted.predict_proba(X)[:, [1, 3]]
    np.testing.assert_allclose(r.score, P.max(axis=1) / P.sum(axis=1))


def test_conformal_sets_take_it_as_a_method(fitted, ambiguous):
    X, _, S = ambiguous
    sets = pll.ConformalSets(fitted, alpha=0.2).fit(X[1000:1250], S[1000:1250]).predict_sets(X[1250:])
    assert sets.shape == (250, 4) and sets.any(axis=1).mean() > 0.5


def test_label_sets_with_string_labels_and_data_frames():
    import pandas as pd

    X, y = blobs(90)
    names = np.array(["cat", "dog", "owl"])
    S = [{names[c], names[(c + 1) % 3]} if i % 2 else {names[c]} for i, c in enumerate(y)]
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(5)])
    clf = Proden(max_epochs=20, n_networks=1, random_state=0).fit(frame, S)
    np.testing.assert_array_equal(clf.classes_, names)
    assert list(clf.feature_names_in_) == list(frame.columns)
    assert (clf.predict(frame) == names[y]).mean() > 0.8
    assert all(label in bag for label, bag in zip(clf.disambiguate().labels, S))


# --- odd bags and bad input: as the other methods -------------------------------------------------


def test_an_empty_bag_counts_as_every_class():
    X, y = blobs(60)
    S = np.eye(3, dtype=bool)[y]
    S[0] = False
    clf = Proden(**FAST, random_state=0).fit(X, S)
    full = S.copy()
    full[0] = True
    ref = Proden(**FAST, random_state=0).fit(X, full)
    np.testing.assert_array_equal(clf.weights_, ref.weights_)
    assert not clf.S_train_[0].any()


def test_a_class_in_no_bag_gets_probability_zero():
    X, y = blobs(60)
    S = np.zeros((60, 4), dtype=bool)
    S[np.arange(60), y] = True  # class 3 is in no bag
    clf = Proden(**FAST, random_state=0).fit(X, S)
    P = clf.predict_proba(X)
    assert P.shape == (60, 4) and (P[:, 3] == 0).all()


def test_one_class_in_every_bag_predicts_it():
    X, _ = blobs(30)
    clf = Proden(**FAST, random_state=0).fit(X, np.array(["a"] * 30))
    assert (clf.predict(X) == "a").all() and (clf.predict_proba(X) == 1.0).all()


def test_bad_data_gets_the_same_errors_as_the_other_methods():
    X, y = blobs(30)
    bad = X.copy()
    bad[3, 1] = np.nan
    for cls in (Proden, pll.PlClassifier):
        with pytest.raises(InvalidDataError) as nan:
            cls().fit(bad, y)
        assert "\n" not in str(nan.value) and "row 3" in str(nan.value)
        with pytest.raises(InvalidDataError, match="row counts differ"):
            cls().fit(X, y[:20])
    messages = {}
    for cls in (Proden, pll.PlClassifier):
        with pytest.raises(InvalidDataError) as exc:
            cls().fit(bad, y)
        messages[cls] = str(exc.value).replace(cls.__name__, "<method>")
    assert messages[Proden] == messages[pll.PlClassifier]
    clf = Proden(**FAST).fit(X, y)
    with pytest.raises(InvalidDataError, match="features"):
        clf.predict(X[:, :3])
    with pytest.raises(InvalidDataError, match="query candidate sets"):
        clf.predict_with_reject(X, candidates=np.ones((30, 2), dtype=bool))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"max_epochs": 0}, "'max_epochs'"),
        ({"n_networks": 0}, "'n_networks'"),
        ({"alpha": -1.0}, "'alpha'"),
        ({"learning_rate": 0.0}, "'learning_rate'"),
        ({"batch_size": True}, "'batch_size'"),
        ({"batch_size": 1}, "'batch_size'"),
        ({"batch_size": "big"}, "'batch_size'"),
        ({"hidden_layer_sizes": (0,)}, "'hidden_layer_sizes'"),
        ({"hidden_layer_sizes": 256}, "'hidden_layer_sizes'"),
        ({"scaling": "robust"}, "'scaling'"),
        ({"init": "knn"}, "'init'"),
        ({"neighbor_weight": 1.0}, "'neighbor_weight'"),
        ({"cleaning_alpha": 0.0}, "'cleaning_alpha'"),
        ({"cleaning_alpha": 1.0}, "'cleaning_alpha'"),
        ({"threshold": 1.5}, "'threshold'"),
        ({"random_state": -1}, "'random_state'"),
    ],
)
def test_bad_parameters_are_refused_naming_them(params, match):
    X, y = blobs(30)
    with pytest.raises(InvalidParameterError, match=match):
        Proden(**params).fit(X, y)
    if "random_state" not in params:  # make_method takes the seed apart
        with pytest.raises(InvalidParameterError, match=match):
            make_method("proden", params)  # what a grid or the command line checks before anything runs


def test_a_knn_start_needs_eleven_rows():
    X, y = blobs(30)
    with pytest.raises(InvalidParameterError, match="init='ipal' needs at least 11"):
        Proden(init="ipal").fit(X[:10], y[:10])


@pytest.mark.parametrize("call", [lambda c, X: c.predict(X), lambda c, X: c.predict_with_reject(X),
                                  lambda c, X: c.conformity(X), lambda c, X: c.disambiguate()])
def test_not_fitted(call):
    with pytest.raises(NotFittedError, match="Proden is not fitted"):
        call(Proden(), np.zeros((2, 3)))


# --- the run path ---------------------------------------------------------------------------------


def test_registered_and_run_through_the_protocol():
    from pll.experiment import catalog
    from pll.experiment import run_protocol

    assert METHODS["proden"] is Proden and "proden" in catalog.METHODS
    est = make_method("proden", {"max_epochs": 3}, random_state=4)
    assert est.random_state == 4 and est._n_neighbors_needed() == 0
    assert clone(est).get_params()["max_epochs"] == 3
    result = run_protocol(pll.load_dataset("iris"), seed=1, methods=["pl_knn", "proden"], knn="exact")
    (native,) = [o for o in result.outputs if o.method == "proden" and o.option == "native"]
    assert native.fit["epochs"] == 100 and native.fit["networks"] == 1 and 0.0 <= native.fit["weight_change"] <= 1.0
    # one set of metric names for every method; with its defaults on 96 training rows (6 steps of 16 rows an epoch)
    assert set(result.metrics["proden"]) == set(result.metrics["pl_knn"])
    assert result.metrics["proden"]["accuracy"] > 0.9


def test_trained_and_scored_as_pll_train_and_pll_score_do():
    """``pll train --method proden`` fits through pll.serving.fit_model; the model scores a new table, pickled."""
    import pickle

    import pandas as pd

    from pll.serving import fit_model

    ds = pll.noise.apply_noise(pll.load_dataset("iris"), "auto", random_state=0)
    model = pickle.loads(pickle.dumps(fit_model(ds, "proden", {"max_epochs": 30, "n_networks": 2}, random_state=0)))
    new = pd.DataFrame({"x3": [0.2, 2.3], "x2": [1.4, 5.9], "x1": [3.5, 3.0], "x0": [5.1, 6.8],
                        "candidates": [None, "virginica|versicolor"]})
    scored = model.predict_frame(new)
    assert scored["label"].tolist() == ["setosa", "virginica"]
    assert scored["accept"].tolist() == (scored["score"] >= 0.9).tolist()

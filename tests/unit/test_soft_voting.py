"""SoftVoting: the members' mean probabilities, each member as fitted alone, and the reject option of the mean."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification

import pll
from pll.errors import InvalidDataError, InvalidParameterError, NotFittedError
from pll.methods import make_method
from pll.methods._bag_weights import restricted

pytest.importorskip("torch", reason="SoftVoting's default members need the deep extra (PyTorch)")

FAST_VI = {"max_epochs": 5, "pretrain_epochs": 2, "n_importance": 2, "n_samples": 3, "batch_size": 16}


def members():
    return [("proden", pll.Proden(max_epochs=4)), ("vi_pll", pll.ViPll(**FAST_VI))]


def partial(n=90, seed=0):
    X, y = make_classification(n_samples=n, n_features=5, n_informative=4, n_redundant=0, n_classes=3,
                               n_clusters_per_class=1, random_state=seed)
    return X, y, pll.noise.uniform(y, 3, p=1.0, r=1, random_state=seed)


def test_the_probabilities_are_the_mean_of_the_members_each_as_fitted_alone():
    X, y, S = partial()
    clf = pll.SoftVoting(members(), random_state=3).fit(X, S)
    alone = [pll.Proden(max_epochs=4, random_state=3).fit(X, S), pll.ViPll(**FAST_VI, random_state=3).fit(X, S)]
    np.testing.assert_array_equal(clf.predict_proba(X), (alone[0].predict_proba(X) + alone[1].predict_proba(X)) / 2)
    bags = S.astype(bool)
    np.testing.assert_allclose(clf.weights_, restricted((alone[0].weights_ + alone[1].weights_) / 2, bags))
    assert list(clf.named_estimators_) == ["proden", "vi_pll"] and clf.estimators_[1] is clf.named_estimators_["vi_pll"]
    assert clf.estimators[0][1].random_state is None  # the parameter is not touched: its clone is seeded


def test_members_fitted_side_by_side_give_the_same_model_and_report_their_progress():
    import torch

    from pll.utils.progress import reporting

    X, _, S = partial()
    alone = pll.SoftVoting(members(), random_state=3).fit(X, S)
    threads_before = torch.get_num_threads()
    lines = []
    with reporting(lambda p: lines.append(str(p)), min_rows=0, every_seconds=0.0):
        both = pll.SoftVoting(members(), n_jobs=-1, random_state=3).fit(X, S)
    np.testing.assert_array_equal(both.predict_proba(X), alone.predict_proba(X))
    np.testing.assert_array_equal(both.weights_, alone.weights_)
    assert list(both.named_estimators_) == ["proden", "vi_pll"]
    assert any(line.startswith("Proden network") for line in lines)
    assert any(line.startswith("ViPll networks") for line in lines)
    assert torch.get_num_threads() == threads_before
    with pytest.raises(InvalidParameterError, match="'n_jobs' parameter of SoftVoting"):
        pll.SoftVoting(members(), n_jobs=0).fit(X, S)


def test_a_member_with_its_own_seed_keeps_it():
    X, _, S = partial()
    clf = pll.SoftVoting([("a", pll.Proden(max_epochs=3, random_state=7)), ("b", pll.Proden(max_epochs=3))],
                         random_state=1).fit(X, S)
    assert [m.random_state for m in clf.estimators_] == [7, 1]
    np.testing.assert_array_equal(clf.named_estimators_["a"].predict_proba(X),
                                  pll.Proden(max_epochs=3, random_state=7).fit(X, S).predict_proba(X))


def test_label_sets_give_the_labels_and_the_reject_option_reads_the_mean():
    X, y, S = partial()
    names = np.array(["ant", "bee", "cat"])
    sets = [set(names[row]) for row in S.astype(bool)]
    clf = pll.SoftVoting(members(), threshold=0.7, random_state=0).fit(X, sets)
    assert clf.classes_.tolist() == ["ant", "bee", "cat"]
    r = clf.predict_with_reject(X)
    P = clf.predict_proba(X)
    np.testing.assert_allclose(r.score, P.max(axis=1))
    assert (r.accept == (r.score >= 0.7)).all() and set(r.labels) <= set(names)
    assert (clf.predict(X) == r.labels).all()
    assert clf.score(X, names[y]) > 0.6  # far above chance (1/3) after a few epochs
    d = clf.disambiguate()
    assert all(label in bag for label, bag in zip(d.labels, sets))
    np.testing.assert_array_equal(clf.conformity(X), P)


def test_a_class_no_bag_holds_gets_no_probability_and_an_empty_bag_counts_as_all_classes():
    X, _, S = partial(60)
    S = np.hstack([S, np.zeros((60, 1), dtype=S.dtype)])
    P = pll.SoftVoting(members(), random_state=0).fit(X, S).predict_proba(X)
    assert P.shape == (60, 4) and (P[:, 3] == 0).all()
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    S[0] = 0
    clf = pll.SoftVoting(members(), random_state=0).fit(X, S)
    assert not clf.S_train_[0].any() and (clf.weights_[0] > 0).all() and np.isclose(clf.weights_[0].sum(), 1.0)


def test_nested_parameters_clone_pickle_and_the_registry():
    clf = pll.SoftVoting(members())
    params = clf.get_params()
    assert params["proden__max_epochs"] == 4 and params["vi_pll__n_samples"] == 3
    clf.set_params(proden__max_epochs=2, threshold=0.5)
    assert dict(clf.estimators)["proden"].max_epochs == 2
    assert clone(clf).get_params()["proden__max_epochs"] == 2 and clone(clf).threshold == 0.5
    default = pll.SoftVoting()
    assert default.get_params(deep=False) == {"estimators": None, "threshold": 0.9, "conflict_margin": 0.2,
                                              "device": None, "n_jobs": None, "random_state": None}
    assert default.get_params()["vi_pll__likelihood_weight"] == pll.ViPll().likelihood_weight
    default.set_params(threshold=0.7)
    assert default.estimators is None and default.threshold == 0.7
    default.set_params(vi_pll__likelihood_weight=25)
    assert [(name, type(e)) for name, e in default.estimators] == [("proden", pll.Proden), ("vi_pll", pll.ViPll)]
    assert dict(default.estimators)["vi_pll"].likelihood_weight == 25
    X, y, S = partial()
    fitted = clf.fit(X, S)
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(again.predict_proba(X), fitted.predict_proba(X))
    est = make_method("soft_voting", {"threshold": 0.8}, random_state=4)
    assert isinstance(est, pll.SoftVoting) and est.random_state == 4 and est.estimators is None
    est = make_method("soft_voting", {"proden__max_epochs": 3}, random_state=4)
    assert dict(est.estimators)["proden"].max_epochs == 3 and est.random_state == 4
    with pytest.raises(InvalidParameterError, match="no parameter.*proden__epochs"):
        make_method("soft_voting", {"proden__epochs": 3})


def test_the_default_members_are_proden_and_vi_pll_with_their_defaults():
    from pll.methods._soft_voting import default_members

    names, estimators = zip(*default_members())
    assert names == ("proden", "vi_pll")
    assert [type(e) for e in estimators] == [pll.Proden, pll.ViPll]
    assert [e.get_params() for e in estimators] == [pll.Proden().get_params(), pll.ViPll().get_params()]


def test_the_device_goes_to_every_member_that_has_one_and_a_bad_one_is_refused_naming_it():
    X, _, S = partial(60)
    learners = [("proden", pll.Proden(max_epochs=2, device="auto")), ("logistic", pll.PlClassifier(n_folds=2))]
    clf = pll.SoftVoting(learners, device="cpu", random_state=0).fit(X, S)
    assert clf.named_estimators_["proden"].device == "cpu" and learners[0][1].device == "auto"
    assert pll.SoftVoting(learners, random_state=0).fit(X, S).named_estimators_["proden"].device == "auto"
    with pytest.raises(InvalidParameterError, match="^Proden: device='tpu' is not a device"):
        pll.SoftVoting(learners, device="tpu").fit(X, S)


def test_the_fit_summary_prefixes_each_members_entries():
    X, _, S = partial()
    summary = pll.SoftVoting(members(), random_state=0).fit(X, S).fit_summary()
    assert summary["proden.epochs"] == 4 and summary["vi_pll.epochs"] == 5 and "vi_pll.loss" in summary


@pytest.mark.parametrize(
    "estimators, match",
    [
        ([], "'estimators' is empty"),
        ([("a", pll.Proden()), ("a", pll.ViPll())], "not unique"),
        ([("a", pll.PlKnn())], "member 'a' \\(PlKnn\\) is not a partial-label learner with predict_proba"),
        ([pll.Proden()], "must be a \\(name, estimator\\) pair"),
        ([("a", pll.Proden(max_epochs=0))], "SoftVoting member 'a': The 'max_epochs' parameter of Proden"),
        ((("a", pll.Proden()),), "'estimators' parameter of SoftVoting must be"),
    ],
)
def test_bad_members_are_refused_before_anything_fits(estimators, match):
    X, y, _ = partial(30)
    with pytest.raises(InvalidParameterError, match=match) as error:
        pll.SoftVoting(estimators).fit(X, y)
    assert "\n" not in str(error.value)


def _error(call):
    with pytest.raises(Exception) as exc:
        call()
    return type(exc.value), str(exc.value)


def test_bad_data_gets_the_same_errors_as_proden():
    X, y, _ = partial(30)
    bad = X.copy()
    bad[3, 1] = np.nan
    for data in ((bad, y), (X, y[:20]), (X[:, :, None], y), (X, np.ones((30, 3, 2)))):
        (kind_s, msg_s), (kind_p, msg_p) = (_error(lambda make=make: make().fit(*data))
                                            for make in (lambda: pll.SoftVoting(members()), pll.Proden))
        assert kind_s is kind_p and issubclass(kind_s, InvalidDataError)
        assert msg_s.replace("SoftVoting", "<m>") == msg_p.replace("Proden", "<m>") and "\n" not in msg_s
    sv, pr = pll.SoftVoting(members()).fit(X, y), pll.Proden(max_epochs=2).fit(X, y)
    for call in (lambda c: c.predict(X[:, :3]), lambda c: c.predict(bad),
                 lambda c: c.predict_with_reject(X, candidates=np.ones((30, 2), dtype=bool))):
        (kind_s, msg_s), (kind_p, msg_p) = _error(lambda: call(sv)), _error(lambda: call(pr))
        assert kind_s is kind_p and msg_s.replace("SoftVoting", "<m>") == msg_p.replace("Proden", "<m>")


@pytest.mark.parametrize("call", [lambda c, X: c.predict(X), lambda c, X: c.disambiguate(),
                                  lambda c, X: c.fit_summary()])
def test_not_fitted(call):
    X, _, _ = partial(30)
    with pytest.raises(NotFittedError, match="SoftVoting is not fitted"):
        call(pll.SoftVoting(members()), X)

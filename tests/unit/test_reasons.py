"""Reason codes of rejections (pll.methods.reasons): hand-built cases where each reason must be found, method by method."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest
from sklearn.base import clone

import pll
from pll.errors import InvalidDataError
from pll.neighbors import NeighborResult, kneighbors
from pll.methods.reasons import (
    CONFLICT,
    LOW_SCORE,
    NO_SUPPORT,
    NONE,
    PRECEDENCE,
    REASONS,
    VAGUE,
    assign,
    beyond_support,
    support_radius,
)
from pll.reject.trust_score import with_trust
from tests.oracles import nearest


def line():
    """60 rows on the x axis at x = 0..59: bags {0} below 20, {1} from 20 to 39, {0, 1} (full) from 40 on.

    Integer coordinates make every distance exact, so symmetric neighborhoods tie exactly.
    """
    X = np.c_[np.arange(60.0), np.zeros(60)]
    S = np.zeros((60, 2), dtype=bool)
    S[:20, 0] = True
    S[20:40, 1] = True
    S[40:] = True
    return X, S


QUERIES = {
    "between": [19.5, 0.0],  # five neighbors of each class, exactly as near
    "far between": [19.5, 1000.0],  # the same neighbors, far away
    "full bags": [50.0, 0.0],  # every neighbor's bag holds both classes
    "inside": [5.0, 0.0],  # every neighbor says 0
    "far inside": [5.0, 1000.0],  # every neighbor says 0, far away
}
EXPECTED = {"between": CONFLICT, "far between": NO_SUPPORT, "full bags": VAGUE, "inside": NONE, "far inside": NONE}
Q = np.array(list(QUERIES.values()))

LINE_METHODS = [pll.DstPll(), pll.PlKnn(), pll.PlAknn(max_neighbors=10)]


def method_ids(est):
    return type(est).__name__


def check_codes(pred):
    """The invariants every prediction with reasons keeps."""
    assert pred.reason is not None and pred.reason.shape == pred.accept.shape
    assert set(pred.reason.tolist()) <= set(REASONS)
    np.testing.assert_array_equal(pred.reason == NONE, pred.accept)
    np.testing.assert_array_equal(pred.reason, assign(pred.accept, pred.evidence))
    for value in pred.evidence.values():
        assert value.shape == pred.accept.shape


# ------------------------------------------------------------------ the shared logic


def test_precedence_over_every_combination_of_conditions():
    combos = np.array(list(itertools.product([False, True], repeat=3)))
    for accept in (False, True):
        got = assign(np.full(len(combos), accept), dict(zip(PRECEDENCE, combos.T)))
        expected = [NONE if accept else next((c for c, h in zip(PRECEDENCE, row) if h), LOW_SCORE) for row in combos]
        assert got.tolist() == expected
    assert PRECEDENCE == (NO_SUPPORT, CONFLICT, VAGUE)


def test_missing_conditions_never_hold_and_shapes_must_match():
    assert assign([False, True]).tolist() == [LOW_SCORE, NONE]
    assert assign([False], {VAGUE: [True], "mass": [0.7]}).tolist() == [VAGUE]
    with pytest.raises(InvalidDataError, match="conflict"):
        assign([False, False], {CONFLICT: [True]})


def test_support_radius_is_the_quantile_of_own_distances_and_the_test_is_strict():
    d = np.arange(101.0)
    assert support_radius(d, 0.99) == 99.0 and support_radius(d, 0.5) == 50.0
    assert support_radius(d, None) is None
    np.testing.assert_array_equal(support_radius(np.c_[d, 2 * d], 0.99), [99.0, 198.0])
    np.testing.assert_array_equal(beyond_support([98.0, 99.0, 99.5], 99.0), [False, False, True])
    assert not beyond_support([1e9], None).any()


@pytest.mark.parametrize("method", LINE_METHODS, ids=method_ids)
def test_fit_stores_the_quantile_of_the_training_rows_own_kth_distances(method):
    X, S = line()
    fitted = clone(method).set_params(support_quantile=0.9).fit(X, S)
    k = fitted._n_neighbors_needed()
    _, own = nearest(X, None, k)  # brute force, each row excluded
    expected = np.quantile(own, 0.9, axis=0) if isinstance(method, pll.PlAknn) else np.quantile(own[:, -1], 0.9)
    np.testing.assert_allclose(fitted.support_radius_, expected, rtol=1e-12)


def test_no_radius_without_k_other_rows_and_none_when_turned_off(monkeypatch):
    X, S = line()
    assert pll.DstPll(n_neighbors=10).fit(X[:10], S[:10]).support_radius_ == np.inf

    def no_search(*args, **kwargs):
        raise AssertionError("fit searched neighbors")

    monkeypatch.setattr(pll.methods._base, "kneighbors", no_search)
    off = pll.DstPll(support_quantile=None).fit(X, S)
    assert off.support_radius_ is None
    r = off.predict_with_reject(Q, neighbors=kneighbors(X, Q, 10))
    assert NO_SUPPORT not in r.evidence and NO_SUPPORT not in r.reason


# ------------------------------------------------------------------ each reason, method by method


@pytest.mark.parametrize("method", LINE_METHODS, ids=method_ids)
def test_each_reason_is_found_on_the_line(method):
    X, S = line()
    r = clone(method).fit(X, S).predict_with_reject(Q)
    check_codes(r)
    assert dict(zip(QUERIES, r.reason.tolist())) == EXPECTED
    # The far queries are beyond the support whether accepted or not; the far conflict is a conflict too.
    np.testing.assert_array_equal(r.evidence[NO_SUPPORT], [False, True, False, False, True])
    np.testing.assert_array_equal(r.evidence[CONFLICT], [True, True, False, False, False])
    np.testing.assert_array_equal(r.evidence[VAGUE], [False, False, True, False, False])


def test_dst_pll_evidence_is_the_split_of_the_mass_on_the_candidate_set():
    X, S = line()
    r = pll.DstPll().fit(X, S).predict_with_reject(Q)
    # Five singletons {0} and five {1}: conflict whenever both sides are included.
    assert r.evidence["conflict_mass"][0] == (1 - 2.0**-5) ** 2
    # Ten full bags: nothing informative, all of 1 − 2^-10 that could have left s̃ stays.
    assert r.evidence["vague_mass"][2] == 1 - 2.0**-10 and r.evidence["conflict_mass"][2] == 0.0
    assert r.evidence["vague_mass"][0] == 0.0


def test_dst_pll_conflict_comes_before_vague_and_bags_agreeing_on_two_labels_are_low_score():
    # Hand-built neighborhoods (all distances 0): row 0 has {0}, {1} and eight full bags, so K = 1/4 and
    # V = 1/4 − 2^-10 both exceed 0.2; row 1 has ten bags {0, 1} over three classes: informative, no
    # conflict, no singleton mass.
    S = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 1], [1, 1, 0]] * 3, dtype=bool)  # k = 10 needs 10 rows
    indices = np.array([[0, 1] + [2] * 8, [3] * 10])
    clf = pll.DstPll().fit(np.zeros((12, 1)), S)
    r = clf.predict_with_reject(np.zeros((2, 1)), neighbors=NeighborResult(indices, np.zeros(indices.shape)))
    check_codes(r)
    assert r.evidence["conflict_mass"][0] == 0.25 and r.evidence["vague_mass"][0] == 0.25 - 2.0**-10
    assert r.evidence[CONFLICT][0] and r.evidence[VAGUE][0]
    assert r.reason.tolist() == [CONFLICT, LOW_SCORE]
    assert not r.accept.any()


def test_pl_knn_margins_decide_conflict_vague_and_low_score():
    # Hand-built neighborhoods at distance 0 (all weights 1).
    S = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [1, 1, 1, 1], [1, 1, 0, 0]] * 2, dtype=bool)
    rows = {
        "5 vs 4 vs 1": [0] * 5 + [1] * 4 + [2],  # shares .5 / .4 / .1: a close rival with its own neighbors
        "5 vs 2 vs 2 vs 1": [0] * 5 + [1] * 2 + [2] * 2 + [3],  # gap .3: no close rival; singletons: not vague
        "full bags": [4] * 10,  # a tie, but no neighbor points away from the winner
        "bags {0, 1}": [5] * 10,  # a tie between 0 and 1, mean bag size 2
    }
    indices = np.array(list(rows.values()))
    nb = NeighborResult(indices, np.zeros(indices.shape))
    r = pll.PlKnn().fit(np.zeros((12, 1)), S).predict_with_reject(np.zeros((4, 1)), neighbors=nb)
    check_codes(r)
    assert dict(zip(rows, r.reason.tolist())) == {
        "5 vs 4 vs 1": CONFLICT, "5 vs 2 vs 2 vs 1": LOW_SCORE, "full bags": VAGUE, "bags {0, 1}": VAGUE,
    }
    np.testing.assert_allclose(r.evidence["mean_bag_size"], [1, 1, 4, 2])
    np.testing.assert_allclose(r.evidence["share_gap"], [0.1, 0.3, 0, 0], atol=1e-12)
    # A wider margin makes the second row a conflict; a larger bag size takes vagueness from the last.
    wide = pll.PlKnn(conflict_margin=0.35, vague_bag_size=2.5).fit(np.zeros((12, 1)), S)
    r = wide.predict_with_reject(np.zeros((4, 1)), neighbors=nb)
    assert r.reason.tolist() == [CONFLICT, CONFLICT, VAGUE, LOW_SCORE]


def test_pl_aknn_judges_support_at_its_final_neighborhood_size():
    # T = 4; the training rows' own neighbors are at 1, 2, 3, 4, so the radius is [1, 2, 3, 4] at every q.
    T, n = 4, 12
    S = np.zeros((n, 2), dtype=bool)
    S[:, 0] = True
    own = NeighborResult(
        np.array([[(i + j) % n for j in range(1, T + 1)] for i in range(n)]),
        np.tile([1.0, 2.0, 3.0, 4.0], (n, 1)),
        self_excluded=True,
    )
    clf = pll.PlAknn(max_neighbors=T, c1=0.1).fit(np.zeros((n, 1)), S, neighbors=own)
    np.testing.assert_array_equal(clf.support_radius_, [1.0, 2.0, 3.0, 4.0])
    # Every bag says 0: decided at the first neighbor (K = 1), judged by that neighbor alone.
    distances = np.array([[0.5, 9.0, 9.0, 9.0], [1.5, 1.5, 1.5, 1.5]])
    r = clf.predict_with_reject(np.zeros((2, 1)), neighbors=NeighborResult(np.zeros((2, T), np.int64), distances))
    check_codes(r)
    np.testing.assert_array_equal(r.evidence["neighborhood_size"], [1, 1])
    np.testing.assert_array_equal(r.evidence["neighbor_distance"], [0.5, 1.5])
    np.testing.assert_array_equal(r.evidence[NO_SUPPORT], [False, True])
    # Rejected by a stricter threshold, the far one is no_support, the near one has no named reason.
    assert r.with_accept(np.zeros(2, bool)).reason.tolist() == [LOW_SCORE, NO_SUPPORT]


def arc():
    """Unit vectors at 0.5°, 1.5°, ..., 89.5°: class 0 below 45°, class 1 above."""
    t = np.deg2rad(np.arange(0.5, 90.0, 1.0))
    return np.c_[np.cos(t), np.sin(t)], (np.rad2deg(t) > 45).astype(int)


def at(degrees, radius=1.0):
    a = np.deg2rad(degrees)
    return [radius * np.cos(a), radius * np.sin(a)]


def test_ipal_conflict_and_no_support():
    # Two neighbors, one of each class, symmetric about 45°: each reconstructs half, the errors tie.
    X, y = arc()
    clf = pll.Ipal(n_neighbors=2).fit(X, y)
    r = clf.predict_with_reject(np.array([at(45), at(45, 5.0), at(10), at(10, 5.0)]))
    check_codes(r)
    assert r.reason.tolist() == [CONFLICT, NO_SUPPORT, NONE, NONE]
    np.testing.assert_array_equal(r.evidence[NO_SUPPORT], [False, True, False, True])
    assert VAGUE not in r.evidence
    check_codes(clf.disambiguate())


def test_pl_classifier_conflict_and_low_score_but_no_support_test():
    x = np.arange(40.0)[:, None]
    clf = pll.PlClassifier(n_folds=2).fit(x, (x[:, 0] >= 20).astype(int))
    Qx = np.arange(10.0, 30.0, 0.5)[:, None]
    r = clf.predict_with_reject(Qx)
    check_codes(r)
    assert NO_SUPPORT not in r.evidence and VAGUE not in r.evidence
    gap = r.evidence["probability_gap"]
    assert (r.reason[gap < 0.2] == CONFLICT).all() and (gap < 0.2).any()
    assert set(r.reason[~r.accept & (gap >= 0.2)]) == {LOW_SCORE}
    # Far out along the line the classifier is sure, and nothing judges distance: accepted.
    assert clf.predict_with_reject([[1e4]]).reason.tolist() == [NONE]
    check_codes(clf.disambiguate())


def test_trust_rejections_are_no_support_when_far_else_conflict():
    X, S = line()
    clf = pll.PlKnn().fit(X[:40], S[:40])
    own = clf.predict_with_reject(Q[:2])  # between, far between
    ts = pll.TrustScore().fit(X[:40], clf.disambiguate().labels)
    r = with_trust(own, ts.score(Q[:2], own.labels))
    check_codes(r)
    assert r.reason.tolist() == [CONFLICT, NO_SUPPORT]
    np.testing.assert_array_equal(r.evidence["neighbor_distance"], own.evidence["neighbor_distance"])
    # An explicit test overrides the method's; without either, every rejection is a conflict.
    assert with_trust(own, np.zeros(2), no_support=[True, False]).reason.tolist() == [NO_SUPPORT, CONFLICT]
    bare = pll.methods.RejectPrediction(own.labels, own.accept, own.score, own.guess)
    assert with_trust(bare, np.array([0.0, 9.0])).reason.tolist() == [CONFLICT, NONE]


def test_conformal_several_labels_are_conflict_and_an_empty_set_no_support():
    X, S = line()
    method = pll.PlKnn(n_neighbors=3).fit(X[:40:2], S[:40:2])
    # Calibrated on pure rows only, q̂ = 0: a row with no clear winner conforms to nothing.
    tight = pll.ConformalSets(method, alpha=0.2).fit(X[1:40:2], S[1:40:2])
    assert tight.quantile_ == 0.0
    r = tight.predict_with_reject(np.array([[19.0, 0.0], [5.0, 0.0]]))
    check_codes(r)
    assert r.reason.tolist() == [NO_SUPPORT, NONE] and r.sets.sum(axis=1).tolist() == [0, 1]
    # Bags of both classes calibrated by their least conforming candidate: q̂ = 1, every set is both classes.
    loose = pll.ConformalSets(method, alpha=0.2, procedure="conservative").fit(X[1:40:2], np.ones((20, 2), bool))
    r = loose.predict_with_reject(np.array([[5.0, 0.0]]))
    assert r.reason.tolist() == [CONFLICT] and r.sets.sum() == 2


# ------------------------------------------------------------------ invariants


def noisy_data(seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(4, size=160)
    X = rng.normal(size=(160, 3)) + 2.0 * np.eye(4)[y][:, :3]
    S = np.eye(4, dtype=bool)[y] | (rng.random((160, 4)) < 0.35)
    S[::17] = False  # some empty bags
    return X[:120], S[:120], np.r_[X[120:], X[120:] * 8.0]


ALL_METHODS = [pll.DstPll(random_state=0), pll.PlKnn(random_state=0), pll.PlAknn(max_neighbors=20),
               pll.Ipal(n_neighbors=6, random_state=0)]


@pytest.mark.parametrize("method", ALL_METHODS, ids=method_ids)
def test_codes_are_none_exactly_where_accepted_and_independent_of_precomputed_neighbors(method):
    X, S, Qn = noisy_data()
    k = method._n_neighbors_needed()
    searched = clone(method).fit(X, S)
    given = clone(method).fit(X, S, neighbors=kneighbors(X, None, k))
    assert searched.support_radius_ is not None
    np.testing.assert_array_equal(searched.support_radius_, given.support_radius_)
    a = searched.predict_with_reject(Qn)
    b = given.predict_with_reject(Qn, neighbors=kneighbors(X, Qn, k))
    for pred in (a, b, searched.disambiguate()):
        check_codes(pred)
    np.testing.assert_array_equal(a.reason, b.reason)
    assert a.evidence.keys() == b.evidence.keys()
    for name in a.evidence:
        np.testing.assert_array_equal(a.evidence[name], b.evidence[name])
    assert a.evidence[NO_SUPPORT][40:].mean() > 0.5 > a.evidence[NO_SUPPORT][:40].mean()  # the scaled-out copies
    assert len(set(a.reason.tolist())) >= 2


def test_codes_only_from_reasons_with_ties_empty_bags_and_candidates():
    X, S, Qn = noisy_data(1)
    cand = np.random.default_rng(1).random((Qn.shape[0], 4)) < 0.5
    for method in ALL_METHODS:
        check_codes(clone(method).fit(X, S).predict_with_reject(Qn, candidates=cand))


def test_with_accept_recodes_and_to_frame_shows_reason_and_evidence():
    X, S = line()
    r = pll.DstPll().fit(X, S).predict_with_reject(Q)
    everything = r.with_accept(np.ones(len(Q), bool))
    assert set(everything.reason) == {NONE}
    nothing = r.with_accept(np.zeros(len(Q), bool))
    check_codes(nothing)
    assert nothing.reason.tolist() == [CONFLICT, NO_SUPPORT, VAGUE, LOW_SCORE, NO_SUPPORT]
    frame = r.to_frame(np.array(["a", "b"]))
    assert list(frame.columns[:7]) == ["row", "y_true", "label", "accept", "score", "guess", "reason"]
    assert frame["reason"].tolist() == list(EXPECTED.values())
    assert {"evidence_conflict_mass", "evidence_vague_mass", "evidence_no_support"} <= set(frame.columns)
    plain = pll.methods.RejectPrediction(r.labels, r.accept, r.score, r.guess)
    assert "reason" not in plain.to_frame(["a", "b"]).columns and plain.with_accept(r.accept).reason is None


def test_blocks_do_not_change_reasons(monkeypatch):
    X, S, Qn = noisy_data()
    clf = pll.DstPll().fit(X, S)
    whole = clf.predict_with_reject(Qn)
    monkeypatch.setattr(pll.utils.progress, "BLOCK_BYTES", 8 * (10 + 3 * 4) * 7)  # 7 rows per block
    blocked = clf.predict_with_reject(Qn)
    np.testing.assert_array_equal(whole.reason, blocked.reason)
    for name in whole.evidence:
        np.testing.assert_array_equal(whole.evidence[name], blocked.evidence[name])


def test_margins_are_parameters_checked_at_fit_and_kept_by_clone():
    X, S = line()
    clf = pll.DstPll(conflict_margin=0.5, vague_margin=0.1, support_quantile=0.9)
    assert clone(clf).get_params()["conflict_margin"] == 0.5
    for bad in ({"conflict_margin": 1.5}, {"vague_margin": -0.1}, {"support_quantile": 0.0}):
        with pytest.raises(pll.errors.InvalidParameterError):
            pll.DstPll(**bad).fit(X, S)
    with pytest.raises(pll.errors.InvalidParameterError):
        pll.PlKnn(vague_bag_size=0.5).fit(X, S)
    # A higher conflict margin takes the conflict of the "between" row away (K ≈ 0.94).
    r = pll.DstPll(conflict_margin=0.95).fit(X, S).predict_with_reject(Q[:1])
    assert r.reason.tolist() == [LOW_SCORE]


@pytest.mark.parametrize("method", [*ALL_METHODS, pll.PlClassifier(n_folds=2, random_state=0)], ids=method_ids)
def test_models_pickled_before_reasons_existed_load_with_defaults(method):
    X, S, Qn = noisy_data()
    fitted = clone(method).fit(X, S)
    old = pickle.loads(pickle.dumps(fitted))
    new_params = {"conflict_margin", "vague_margin", "vague_bag_size", "support_quantile"}
    for name in new_params & set(vars(old)):
        delattr(old, name)
    vars(old).pop("support_radius_", None)
    loaded = pickle.loads(pickle.dumps(old))
    assert loaded.get_params() == fitted.get_params()
    r = loaded.predict_with_reject(Qn)
    check_codes(r)
    assert NO_SUPPORT not in r.reason
    np.testing.assert_array_equal(r.labels, fitted.predict_with_reject(Qn).labels)

"""PL A-kNN against a plain per-query loop written from ALGORITHMS.md, step by step."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pll
import pll.utils.progress as progress
from pll.errors import InvalidParameterError
from pll.methods._pl_aknn import elimination_leads
from pll.neighbors import NeighborResult
from pll.methods.reasons import CONFLICT, VAGUE
from tests.oracles import loop_pl_aknn, nearest


def neighbor_order(X_train, X_query, exclude_self):
    """All training rows by increasing distance, ties by lower index (the query itself dropped)."""
    return nearest(X_train, None if exclude_self else X_query)[0]


def check_against_loop(clf, r, X_train, S, X_query, start, T, exclude_self, c1, delta):
    orders = neighbor_order(X_train, X_query, exclude_self)
    A = clf.A_
    for i, order in enumerate(orders):
        label, decided_at, best = loop_pl_aknn(order, S, start[i], X_train.shape[0], T, c1, delta)
        assert r.labels[i] == label, f"row {i}"
        assert r.accept[i] == (decided_at is not None)
        if decided_at is not None:
            assert r.score[i] == (T + 1 - decided_at) / T
        else:
            assert r.score[i] == min(0.0, -best / A)


@st.composite
def cases(draw):
    n = draw(st.integers(3, 30))
    d = draw(st.integers(1, 3))
    l = draw(st.integers(1, 5))
    T = draw(st.integers(1, min(n - 1, 12)))
    seed = draw(st.integers(0, 2**32 - 1))
    c1 = draw(st.sampled_from([0.05, 0.2, 0.5, 1.0]))
    delta = draw(st.sampled_from([0.01, 0.1, 0.5, 0.9]))
    rng = np.random.default_rng(seed)
    # Small integer features: many equal distances, so the index tie-break matters.
    X = rng.integers(0, 3, size=(n, d)).astype(np.float64)
    S = rng.random((n, l)) < draw(st.sampled_from([0.2, 0.5, 0.8]))
    Q = rng.integers(0, 3, size=(draw(st.integers(1, 8)), d)).astype(np.float64)
    cand = rng.random((Q.shape[0], l)) < 0.6
    return X, S, Q, cand, T, c1, delta


def precomputed(orders, T, exclude_self):
    """The first ``T`` neighbors of every query as a neighbor result (distances are not used)."""
    idx = np.array([order[:T] for order in orders], dtype=np.int64)
    return NeighborResult(idx, np.zeros(idx.shape), self_excluded=exclude_self)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_matches_the_per_query_loop(case):
    X, S, Q, cand, T, c1, delta = case
    # Neighbors come from the brute-force order written here, so that only the method is under test.
    nb_query = precomputed(neighbor_order(X, Q, False), T, False)
    nb_train = precomputed(neighbor_order(X, X, True), T, True)
    clf = pll.PlAknn(max_neighbors=T, c1=c1, delta=delta).fit(X, S, neighbors=nb_train)
    all_labels = np.ones_like(cand)
    r = clf.predict_with_reject(Q, neighbors=nb_query)
    check_against_loop(clf, r, X, S, Q, all_labels, T, False, c1, delta)
    # A query's own candidate set restricts the start set (an empty one means all classes).
    start = np.where(cand.any(axis=1, keepdims=True), cand, True)
    r = clf.predict_with_reject(Q, neighbors=nb_query, candidates=cand)
    check_against_loop(clf, r, X, S, Q, start, T, False, c1, delta)
    assert start[np.arange(Q.shape[0]), r.labels].all()
    # Training rows start from their own bag (all classes when it is empty), their neighbors exclude them.
    own = np.where(S.any(axis=1, keepdims=True), S, True)
    check_against_loop(clf, clf.disambiguate(), X, S, X, own, T, True, c1, delta)


def survivors_after(order, S, start, n, T, c1, delta):
    """The labels left after ``T`` neighbors, by the definition's loop; None when one was left earlier."""
    l = S.shape[1]
    A = c1 * math.sqrt(math.log(n) + math.log(l / delta))
    surviving = [y for y in range(l) if start[y]]
    tau = [0] * l
    for k in range(1, T + 1):
        for y in range(l):
            tau[y] += bool(S[order[k - 1], y])
        m1 = max(tau[y] for y in surviving)
        surviving = [y for y in surviving if (m1 - tau[y]) / k < A / math.sqrt(k)]
        if len(surviving) == 1:
            return None
    return surviving


def check_reasons_against_loop(r, X_train, S, X_query, start, T, exclude_self, c1, delta):
    """Undecided rows: conflict iff one of the T neighbors holds some survivors but not all, else vague."""
    for i, order in enumerate(neighbor_order(X_train, X_query, exclude_self)):
        left = survivors_after(order, S, start[i], X_train.shape[0], T, c1, delta)
        split = left is not None and any(0 < S[j, left].sum() < len(left) for j in order[:T])
        assert r.evidence[CONFLICT][i] == split, f"row {i}"
        assert r.evidence[VAGUE][i] == (left is not None and not split), f"row {i}"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_conflict_and_vague_match_the_survivors_of_the_loop(case):
    X, S, Q, cand, T, c1, delta = case
    nb_query = precomputed(neighbor_order(X, Q, False), T, False)
    nb_train = precomputed(neighbor_order(X, X, True), T, True)
    clf = pll.PlAknn(max_neighbors=T, c1=c1, delta=delta).fit(X, S, neighbors=nb_train)
    start = np.where(cand.any(axis=1, keepdims=True), cand, True)
    r = clf.predict_with_reject(Q, neighbors=nb_query, candidates=cand)
    check_reasons_against_loop(r, X, S, Q, start, T, False, c1, delta)
    own = np.where(S.any(axis=1, keepdims=True), S, True)
    check_reasons_against_loop(clf.disambiguate(), X, S, X, own, T, True, c1, delta)


def test_conflict_and_vague_both_occur_and_match_the_loop():
    # Random bags split the survivors; a region of bags that hold classes 0 and 1 together never does.
    rng = np.random.default_rng(5)
    X = np.c_[np.arange(80.0), np.zeros(80)]
    S = rng.random((80, 3)) < 0.5
    S[50:] = [True, True, False]
    Q = np.c_[np.arange(0.25, 80, 2.0), np.zeros(40)]
    clf = pll.PlAknn(max_neighbors=8).fit(X, S)
    r = clf.predict_with_reject(Q)
    check_reasons_against_loop(r, X, S, Q, np.ones((40, 3), bool), 8, False, 0.5, 0.1)
    assert r.evidence[CONFLICT].sum() > 0 and r.evidence[VAGUE].sum() > 0 and r.accept.sum() > 0


def test_backend_neighbors_give_the_loop_result():
    rng = np.random.default_rng(7)
    X = rng.integers(0, 3, size=(60, 2)).astype(float)
    S = rng.random((60, 4)) < 0.5
    Q = rng.integers(0, 3, size=(30, 2)).astype(float)
    clf = pll.PlAknn(max_neighbors=20, c1=0.3).fit(X, S)
    check_against_loop(clf, clf.predict_with_reject(Q), X, S, Q, np.ones((30, 4), bool), 20, False, 0.3, 0.1)
    own = np.where(S.any(axis=1, keepdims=True), S, True)
    check_against_loop(clf, clf.disambiguate(), X, S, X, own, 20, True, 0.3, 0.1)


def test_many_classes_and_long_neighborhoods_give_the_loop_result():
    # Beyond the hypothesis cases: 70 classes (more than one machine word) and T = 60.
    rng = np.random.default_rng(11)
    X = rng.integers(0, 5, size=(150, 2)).astype(float)
    y = X.astype(int).sum(axis=1) * 7 % 70
    S = np.eye(70, dtype=bool)[y] | (rng.random((150, 70)) < 0.15)
    S[::9] = False  # some empty bags
    Q = rng.integers(0, 5, size=(40, 2)).astype(float)
    cand = rng.random((40, 70)) < 0.3
    assert cand.any(axis=1).all()
    clf = pll.PlAknn(max_neighbors=60, c1=0.2).fit(X, S)
    r = clf.predict_with_reject(Q, candidates=cand)
    assert r.accept.any() and not r.accept.all()
    check_against_loop(clf, r, X, S, Q, cand, 60, False, 0.2, 0.1)
    own = np.where(S.any(axis=1, keepdims=True), S, True)
    check_against_loop(clf, clf.disambiguate(), X, S, X, own, 60, True, 0.2, 0.1)


def test_neighbor_indices_outside_the_training_rows_raise():
    X = np.arange(10.0)[:, None]
    S = np.ones((10, 2), dtype=bool)
    clf = pll.PlAknn(max_neighbors=3).fit(X, S)
    idx = np.array([[0, 1, 2], [3, 10, 4]])
    nb = NeighborResult(idx, np.zeros(idx.shape))
    with pytest.raises(pll.errors.NeighborsError, match="query row 1 fall outside the 10 training rows"):
        clf.predict_with_reject(np.zeros((2, 1)), neighbors=nb)


def test_elimination_leads_decide_like_the_definition():
    for scale in (0.0001, 0.4, 1.1264, 2.5, 7.0):
        leads = elimination_leads(scale, 60)
        for k in range(1, 61):
            for lead in range(k + 1):
                assert (lead >= leads[k - 1]) == (lead / k >= scale / math.sqrt(k))


def test_accept_is_a_single_survivor_and_scores_order_decisions():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 2))
    y = (X[:, 0] > 0).astype(int) + 2 * (X[:, 1] > 0)
    S = np.eye(4, dtype=bool)[y] | (rng.random((400, 4)) < 0.3)
    clf = pll.PlAknn(max_neighbors=30).fit(X, S)
    r = clf.predict_with_reject(rng.normal(size=(300, 2)))
    assert np.array_equal(r.accept, r.score > 0)
    assert 0 < r.accept.mean() < 1  # queries near the axes stay undecided
    assert (r.score[r.accept] <= 1).all() and (r.score[r.accept] >= 1 / 30).all()
    assert not r.guess[r.accept].any()
    # Queries far inside a quadrant decide earliest.
    deep = clf.predict_with_reject(np.array([[3.0, 3.0], [-3.0, 3.0]]))
    assert deep.accept.all() and list(deep.labels) == [3, 2]


def test_single_label_bag_decides_at_the_first_step():
    X = np.arange(10.0)[:, None]
    S = np.zeros((10, 3), dtype=bool)
    S[:, 0] = True
    S[0] = [False, False, True]  # its neighbors all say 0, but its bag says 2
    S[1] = False  # an empty bag starts from all classes
    r = pll.PlAknn(max_neighbors=5).fit(X, S).disambiguate()
    assert r.labels[0] == 2 and r.score[0] == 1.0 and r.accept[0]
    assert r.labels[1] == 0


def test_blocking_does_not_change_the_result(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.integers(0, 4, size=(300, 3)).astype(float)
    S = rng.random((300, 6)) < 0.4
    Q = rng.integers(0, 4, size=(200, 3)).astype(float)
    nb = precomputed(neighbor_order(X, Q, False), 45, False)
    nb_train = precomputed(neighbor_order(X, X, True), 45, True)
    clf = pll.PlAknn(max_neighbors=40, c1=0.3).fit(X, S, neighbors=nb_train)
    ref, ref_train = clf.predict_with_reject(Q, neighbors=nb), clf.disambiguate()
    assert ref.accept.any() and not ref.accept.all()
    monkeypatch.setattr(progress, "BLOCK_BYTES", 4000)  # a handful of rows per block
    for got, want in ((clf.predict_with_reject(Q, neighbors=nb), ref), (clf.disambiguate(), ref_train)):
        for field in ("labels", "accept", "score", "guess"):
            assert np.array_equal(getattr(got, field), getattr(want, field))


def test_fallback_guess_flags_exact_ties():
    # Two labels in every bag: they never separate, and their M values are equal at every step.
    X = np.arange(8.0)[:, None]
    S = np.ones((8, 2), dtype=bool)
    r = pll.PlAknn(max_neighbors=5).fit(X, S).predict_with_reject(np.array([[2.0]]))
    assert r.labels[0] == 0 and r.guess[0] and not r.accept[0]
    assert r.score[0] == -1.0  # no lead at all


def test_empty_bags_carry_no_evidence():
    X = np.arange(12.0)[:, None]
    S = np.zeros((12, 2), dtype=bool)
    S[6:, 1] = True
    r = pll.PlAknn(max_neighbors=6, c1=0.1).fit(X, S).predict_with_reject(np.array([[0.0], [11.0]]))
    assert r.labels[1] == 1 and r.accept[1]
    assert not r.accept[0]  # its 6 neighbors all have empty bags


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(max_neighbors=0), "neighbors"),
        (dict(c1=0), "c1"),
        (dict(delta=1.0), "delta"),
        (dict(max_neighbors=10), "max_neighbors=10 needs at least 11 training rows, got n_samples=10"),
    ],
)
def test_bad_parameters_raise_typed_errors(params, match):
    X = np.arange(10.0)[:, None]
    S = np.ones((10, 2), dtype=bool)
    with pytest.raises(InvalidParameterError, match=match):
        pll.PlAknn(**params).fit(X, S)


def test_precomputed_neighbors_must_hold_enough_columns():
    X = np.arange(10.0)[:, None]
    S = np.ones((10, 2), dtype=bool)
    nb = NeighborResult(np.zeros((10, 3), dtype=np.int64), np.zeros((10, 3)), self_excluded=True)
    with pytest.raises(pll.errors.NeighborsError, match="needs 5 neighbors"):
        pll.PlAknn(max_neighbors=5).fit(X, S, neighbors=nb)


def test_registered_for_the_pipeline():
    from pll.methods import METHODS, make_method

    assert METHODS["pl_aknn"] is pll.PlAknn
    clf = make_method("pl_aknn", {"max_neighbors": 7}, random_state=1)
    assert clf._n_neighbors_needed() == 7 and clf.random_state == 1

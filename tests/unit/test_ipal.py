"""IPAL: the kernels against scipy, the whole method against a naive dense reference of the paper, reject semantics.

The reference below is written from the paper (Zhang & Yu, IJCAI 2015) with
plain numpy and :func:`scipy.optimize.nnls`, one row at a time and with dense
matrices in the paper's orientation: ``W[j, i]`` is the weight of row ``j`` in
the reconstruction of row ``i``, ``H = W D⁻¹`` with ``d_i = Σ_j W[j, i]``, and
each step is ``F ← α·Hᵀ F + (1 − α)·P``, rescaled within the bags.  Ties use
the documented rule of :mod:`pll.methods._ipal_kernels`: values within ``TIE_RTOL``
(errors: plus ``TIE_ATOL·‖x‖``) of the best are tied, and the label is drawn
among them with :func:`pll.utils._random.pick_among` keyed by (seed, stream, row) —
stream 2 for training rows, 1 for queries.
"""

from __future__ import annotations


import numpy as np
import pytest
from scipy.optimize import nnls
from scipy.spatial.distance import cdist
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

import pll
from pll.utils._random import pick_among
from pll.errors import InvalidParameterError, PllError
from pll.methods._ipal import Ipal
from pll.methods._ipal_kernels import TIE_ATOL, TIE_RTOL, class_errors, nnls_weights, propagate
from pll.neighbors import NeighborResult


# ---------------------------------------------------------------------------------------------------------
# The naive reference
# ---------------------------------------------------------------------------------------------------------


def brute_neighbors(X_train, X_query, k, exclude_self):
    """k nearest training rows of each query, by distance, ties by lower index."""
    D = cdist(X_query, X_train)
    out = []
    for q in range(len(X_query)):
        order = [j for j in np.lexsort((np.arange(len(X_train)), D[q])) if not (exclude_self and j == q)]
        out.append(order[:k])
    return np.array(out, dtype=np.int64)


def reference_fit(X, S, k, alpha, n_iter, seed):
    n, l = S.shape
    N = brute_neighbors(X, X, k, exclude_self=True)
    W = np.zeros((n, n))
    for i in range(n):
        w, _ = nnls(X[N[i]].T, X[i])
        W[N[i], i] = w
    d = W.sum(axis=0)
    H = np.zeros_like(W)
    for j in range(n):
        if d[j] > 0:
            H[:, j] = W[:, j] / d[j]  # H = W D^-1
    bags = np.where(S.any(axis=1, keepdims=True), S, True)
    P = np.zeros((n, l))
    for i in range(n):
        P[i, bags[i]] = 1.0 / bags[i].sum()
    F = P.copy()
    for _ in range(n_iter):
        F = alpha * H.T @ F + (1 - alpha) * P
        for i in range(n):
            F[i, ~bags[i]] = 0.0
            F[i] = F[i] / F[i].sum()
    mass_ratio = P.sum(axis=0) / F.sum(axis=0)
    G = F * mass_ratio
    tied = np.zeros((n, l), dtype=bool)
    for i in range(n):
        best = max(G[i, c] for c in range(l) if bags[i, c])
        for c in range(l):
            tied[i, c] = bags[i, c] and G[i, c] >= best - TIE_RTOL * best
    labels, _ = pick_among(tied, seed, np.arange(n), 2)
    return N, W, F, labels


def reference_predict(X, yhat, X_query, k, l, seed, candidates=None):
    N = brute_neighbors(X, X_query, k, exclude_self=False)
    labels, scores = [], []
    tied = np.zeros((len(X_query), l), dtype=bool)
    errors = np.zeros((len(X_query), l))
    for q, x in enumerate(X_query):
        w, _ = nnls(X[N[q]].T, x)
        for c in range(l):
            recon = np.zeros_like(x)
            for a, j in enumerate(N[q]):
                if yhat[j] == c:
                    recon = recon + w[a] * X[j]
            errors[q, c] = np.linalg.norm(x - recon)
        cand = np.ones(l, bool) if candidates is None else candidates[q]
        best = errors[q][cand].min()
        tied[q] = cand & (errors[q] <= best + TIE_RTOL * best + TIE_ATOL * np.linalg.norm(x))
    labels, _ = pick_among(tied, seed, np.arange(len(X_query)), 1)
    for q in range(len(X_query)):
        cand = np.ones(l, bool) if candidates is None else candidates[q]
        others = [errors[q, c] for c in range(l) if cand[c] and c != labels[q]]
        e1 = errors[q, labels[q]]
        if not others:
            scores.append(1.0)
        elif tied[q].sum() > 1:
            scores.append(0.0)
        else:
            scores.append((min(others) - e1) / min(others))
    return N, labels, np.array(scores), errors


def random_case(seed, n=40, d=7, l=4, n_query=15):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, l, size=n)
    X = rng.normal(size=(n, d)) + 1.5 * np.eye(l, d)[y]
    S = np.zeros((n, l), dtype=bool)
    S[np.arange(n), y] = True
    S |= rng.random((n, l)) < 0.35
    S[0] = False  # an empty bag: all classes
    S[1] = np.eye(l, dtype=bool)[y[1]]  # a single-label bag
    Xq = rng.normal(size=(n_query, d)) + 1.5 * np.eye(l, d)[rng.integers(0, l, size=n_query)]
    return X, S, Xq


# ---------------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed, n, d, k", [(0, 60, 12, 5), (1, 80, 38, 10), (2, 50, 10, 10), (3, 70, 48, 20)])
def test_nnls_weights_match_scipy_nnls(seed, n, d, k):
    rng = np.random.default_rng(seed)
    points = rng.random((n, d)) + rng.integers(0, 3, size=(n, 1))  # positive and correlated, like scaled data
    queries = rng.random((25, d)) * 2 - 0.5
    indices = np.array([rng.choice(n, size=k, replace=False) for _ in range(25)])
    got = nnls_weights(points, queries, indices)
    want = np.array([nnls(points[idx].T, x)[0] for idx, x in zip(indices, queries)])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-8)
    assert (got >= 0).all() and (got > 0).any()


def test_nnls_with_dependent_neighbors_reaches_the_least_error():
    # Fewer features than neighbors, and a duplicated neighbor: the minimiser is not unique, its error is.
    rng = np.random.default_rng(5)
    points = rng.random((30, 3))
    points[7] = points[3]
    queries = rng.random((20, 3))
    indices = np.array([np.r_[3, 7, rng.choice(np.r_[0:3, 8:30], size=6, replace=False)] for _ in range(20)])
    got = nnls_weights(points, queries, indices)
    assert (got >= 0).all()
    for q in range(20):
        A = points[indices[q]].T
        want = nnls(A, queries[q])[1]
        assert np.linalg.norm(A @ got[q] - queries[q]) <= want + 1e-10


def test_nnls_of_a_query_away_from_every_neighbor_is_zero():
    points = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    w = nnls_weights(points, np.array([[-1.0, -2.0], [0.0, 0.0], [2.0, 0.0]]), np.array([[0, 1, 2]] * 3))
    np.testing.assert_array_equal(w[:2], 0.0)
    np.testing.assert_allclose(w[2], [2.0, 0.0, 0.0], atol=1e-15)


def test_class_errors_hand_computed_and_a_class_without_neighbors_gets_the_norm():
    # x = (3, 4), neighbors (1, 0) labelled 0 and (0, 1) labelled 2, weights 3 and 4: the reconstruction is exact.
    # Class 0 keeps 3·(1, 0): error ‖(0, 4)‖ = 4; class 2 keeps 4·(0, 1): error 3;
    # class 1 has no neighbor: error ‖x‖ = 5.
    points, query = np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[3.0, 4.0]])
    errors, norms = class_errors(points, query, np.array([[0, 1]]), np.array([[3.0, 4.0]]), np.array([0, 2]), 3)
    np.testing.assert_allclose(errors, [[4.0, 5.0, 3.0]], rtol=0, atol=1e-15)
    assert norms.tolist() == [5.0]


def test_propagation_of_a_single_label_bag_and_a_row_with_zero_weights():
    # Row 2 has no weight at all: it keeps P (1/2, 1/2); row 0's bag {1} keeps label 1 with confidence 1.
    indices = np.array([[1, 2], [0, 2], [0, 1]])
    weights = np.array([[0.5, 0.5], [1.0, 0.0], [0.0, 0.0]])
    bags = np.array([[0, 1, 0], [1, 1, 0], [1, 0, 1]], dtype=bool)
    F = propagate(indices, weights, bags, 0.9, 7)
    np.testing.assert_array_equal(F[0], [0.0, 1.0, 0.0])
    np.testing.assert_allclose(F[2], [0.5, 0.0, 0.5], rtol=0, atol=1e-15)
    # Row 1 (bag {0, 1}) takes row 0's confidences: F1 ∝ 0.9·(0, 1) + 0.1·(1/2, 1/2) = (0.05, 0.95), at every step.
    np.testing.assert_allclose(F[1], [0.05, 0.95, 0.0], rtol=0, atol=1e-15)


@pytest.mark.parametrize("n_iter", [1, 2, 5])
def test_propagation_step_count_is_exact(n_iter):
    X, S, _ = random_case(11)
    clf = Ipal(n_neighbors=4, max_iter=n_iter).fit(X, S)
    _, _, F, _ = reference_fit(X, S, 4, 0.95, n_iter, 0)
    np.testing.assert_allclose(clf.confidences_, F, rtol=0, atol=1e-12)
    assert clf.n_iter_ == n_iter


# ---------------------------------------------------------------------------------------------------------
# The method against the reference
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_matches_the_naive_reference(seed):
    X, S, Xq = random_case(seed)
    k, alpha, n_iter = 4 + seed % 3, [0.95, 0.5, 0.8, 0.99, 0.7][seed], 100
    N, W, F, yhat = reference_fit(X, S, k, alpha, n_iter, seed)
    clf = Ipal(n_neighbors=k, alpha=alpha, max_iter=n_iter, random_state=seed).fit(X, S)

    np.testing.assert_array_equal(clf.neighbor_indices_, N)
    dense = np.zeros_like(W)
    for i in range(len(X)):
        dense[clf.neighbor_indices_[i], i] = clf.weights_[i]
    np.testing.assert_allclose(dense, W, rtol=0, atol=1e-8)
    np.testing.assert_allclose(clf.confidences_, F, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(clf.disambiguated_, yhat)

    Nq, labels, scores, errors = reference_predict(X, yhat, Xq, k, S.shape[1], seed)
    r = clf.predict_with_reject(Xq)
    np.testing.assert_array_equal(r.labels, labels)
    np.testing.assert_allclose(r.score, scores, rtol=0, atol=1e-9)
    best = errors.min(axis=1, keepdims=True)
    np.testing.assert_allclose(clf.conformity(Xq), best / errors, rtol=0, atol=1e-9)

    # Candidate sets restrict the choice, also in the reference.
    cand = np.random.default_rng(seed).random((len(Xq), S.shape[1])) < 0.5
    cand[~cand.any(axis=1), 0] = True
    _, labels_c, scores_c, _ = reference_predict(X, yhat, Xq, k, S.shape[1], seed, candidates=cand)
    rc = clf.predict_with_reject(Xq, candidates=cand)
    np.testing.assert_array_equal(rc.labels, labels_c)
    np.testing.assert_allclose(rc.score, scores_c, rtol=0, atol=1e-9)
    assert cand[np.arange(len(Xq)), rc.labels].all()


def test_precomputed_neighbors_give_the_same_result_as_internal_search():
    X, S, Xq = random_case(21, n=60)
    k = 6
    own = pll.neighbors.kneighbors(X, None, 9)  # more columns than needed: the method takes the first k
    query = pll.neighbors.kneighbors(X, Xq, 9)
    a = Ipal(n_neighbors=k).fit(X, S)
    b = Ipal(n_neighbors=k).fit(X, S, neighbors=own)
    np.testing.assert_array_equal(a.weights_, b.weights_)
    np.testing.assert_array_equal(a.confidences_, b.confidences_)
    np.testing.assert_array_equal(a.disambiguated_, b.disambiguated_)
    ra, rb = a.predict_with_reject(Xq), b.predict_with_reject(Xq, neighbors=query)
    for field in ("labels", "accept", "score", "guess", "shares"):
        np.testing.assert_array_equal(getattr(ra, field), getattr(rb, field))
    np.testing.assert_array_equal(a.conformity(Xq), b.conformity(Xq, neighbors=query))
    with pytest.raises(PllError):
        b.predict_with_reject(Xq, neighbors=own)  # the training rows' own neighbors are not neighbors of Xq


# ---------------------------------------------------------------------------------------------------------
# Propagation invariants and disambiguation
# ---------------------------------------------------------------------------------------------------------


def test_confidences_stay_in_bags_sum_to_one_and_single_label_bags_keep_their_label():
    X, S, _ = random_case(3, n=80)
    clf = Ipal(n_neighbors=5).fit(X, S)
    bags = np.where(S.any(axis=1, keepdims=True), S, True)
    F = clf.confidences_
    assert F.shape == S.shape and (F >= 0).all()
    np.testing.assert_array_equal(F[~bags], 0.0)
    np.testing.assert_allclose(F.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    single = S.sum(axis=1) == 1
    assert single.sum() >= 5
    np.testing.assert_array_equal(F[single][S[single]], 1.0)
    np.testing.assert_array_equal(clf.disambiguated_[single], S[single].argmax(axis=1))
    assert bags[np.arange(len(X)), clf.disambiguated_].all()
    assert (F[0] > 0).all()  # row 0's empty bag counts as all classes


def test_disambiguate_returns_the_paper_labels_with_their_margin():
    X, S, _ = random_case(4, n=60)
    clf = Ipal(n_neighbors=5).fit(X, S)
    r = clf.disambiguate()
    np.testing.assert_array_equal(r.labels, clf.classes_[clf.disambiguated_])
    np.testing.assert_array_equal(r.accept, r.score > clf.threshold)
    G = clf.confidences_ * clf.class_mass_ratio_
    bags = np.where(S.any(axis=1, keepdims=True), S, True)
    for i in range(len(X)):
        g = np.sort(G[i, bags[i]])[::-1]
        want = 1.0 if g.size == 1 else 1.0 - g[1] / g[0]
        assert r.score[i] == pytest.approx(want, abs=1e-12)
    np.testing.assert_allclose(r.shares.sum(axis=1), 1.0, atol=1e-12)
    assert not r.guess.any()


def symmetric_case():
    # Mirror symmetric under (a, b) -> (b, a) with classes 0 <-> 1; row 4 on the mirror has bag {0, 1}.
    # Its two nearest rows (2 and 3, equally far) reconstruct it exactly with weights 2/3 each, and their
    # bags are {0} and {1}: F_4 = (1/2, 1/2) and the class masses are equal, so ŷ_4 is a tie.
    X = np.array([[1.0, 0.2], [0.2, 1.0], [1.2, 0.3], [0.3, 1.2], [1.0, 1.0]])
    S = np.array([[1, 0], [0, 1], [1, 0], [0, 1], [1, 1]], dtype=bool)
    return X, S


def test_a_tied_disambiguation_is_a_seeded_guess_and_rejected():
    X, S = symmetric_case()
    labels = set()
    for seed in range(16):
        clf = Ipal(n_neighbors=2, random_state=seed).fit(X, S)
        np.testing.assert_allclose(clf.weights_[4], [2 / 3, 2 / 3], atol=1e-15)
        np.testing.assert_allclose(clf.confidences_[4], [0.5, 0.5], atol=1e-15)
        r = clf.disambiguate()
        assert r.guess.tolist() == [False] * 4 + [True]
        assert r.score[4] == 0.0 and not r.accept[4]
        assert clf.disambiguated_[:4].tolist() == [0, 1, 0, 1]
        labels.add(int(clf.disambiguated_[4]))
        # The same seed gives the same draw.
        again = Ipal(n_neighbors=2, random_state=seed).fit(X, S)
        assert again.disambiguated_[4] == clf.disambiguated_[4]
    assert labels == {0, 1}


def test_a_query_no_neighbor_reconstructs_ties_every_candidate():
    # (−1, −1) points away from every training row: all weights 0, every class's error is ‖x‖.
    X, S = symmetric_case()
    clf = Ipal(n_neighbors=2).fit(X, S)
    r = clf.predict_with_reject(np.array([[-1.0, -1.0]]))
    assert r.guess[0] and r.score[0] == 0.0 and not r.accept[0]
    np.testing.assert_array_equal(clf.conformity(np.array([[-1.0, -1.0]])), [[1.0, 1.0]])
    one = clf.predict_with_reject(np.array([[-1.0, -1.0]]), candidates=[{1}])
    assert one.labels.tolist() == [1] and one.score[0] == 1.0 and not one.guess[0]


def test_hand_computed_prediction_margin():
    # Query (1.1, 0.25) with k = 2: neighbors rows 0 (1, 0.2) and 2 (1.2, 0.3), both labelled 0, reconstruct it
    # exactly with weights (1/2, 1/2): e_0 = 0, e_1 = ‖x‖: margin 1, accepted.
    X, S = symmetric_case()
    clf = Ipal(n_neighbors=2).fit(X, S)
    r = clf.predict_with_reject(np.array([[1.1, 0.25]]))
    assert r.labels.tolist() == [0] and r.accept[0] and not r.guess[0]
    assert r.score[0] == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(r.shares, [[1.0, 0.0]], atol=1e-12)


# ---------------------------------------------------------------------------------------------------------
# Reject semantics, the scikit-learn interface, parameters
# ---------------------------------------------------------------------------------------------------------


def test_reject_semantics_and_per_class_scores():
    X, S, Xq = random_case(7, n=80, n_query=60)
    clf = Ipal(n_neighbors=6).fit(X, S)
    r = clf.predict_with_reject(Xq)
    np.testing.assert_array_equal(r.accept, r.score > clf.threshold)
    assert 0 < r.accept.sum() < len(Xq)  # the default threshold both accepts and rejects here
    assert ((r.score >= 0) & (r.score <= 1)).all()
    np.testing.assert_array_equal(clf.decision_function(Xq), r.score)
    conf = clf.conformity(Xq)
    assert ((conf >= 0) & (conf <= 1)).all()
    np.testing.assert_array_equal(conf[np.arange(len(Xq)), r.labels], 1.0)
    # The score is one minus the largest conformity of another class.
    others = conf.copy()
    others[np.arange(len(Xq)), r.labels] = 0.0
    np.testing.assert_allclose(r.score, 1.0 - others.max(axis=1), atol=1e-12)
    proba = clf.predict_proba(Xq)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(proba.argmax(axis=1), r.labels)
    np.testing.assert_allclose(proba, r.shares, atol=1e-15)
    assert clf.threshold == pytest.approx(1 - 2**-0.5) and "1 − 1/√2" in Ipal.__doc__


def test_candidates_keep_the_prediction_inside_and_a_single_candidate_is_certain():
    X, S, Xq = random_case(8, n=60, n_query=30)
    clf = Ipal(n_neighbors=5).fit(X, S)
    free = clf.predict_with_reject(Xq)
    cand = np.ones((30, 4), dtype=bool)
    cand[np.arange(30), free.labels] = False  # forbid the unrestricted winner
    r = clf.predict_with_reject(Xq, candidates=cand)
    assert cand[np.arange(30), r.labels].all()
    assert (r.shares[~cand] == 0).all()
    single = clf.predict_with_reject(Xq, candidates=np.eye(4, dtype=bool)[np.arange(30) % 4])
    assert single.labels.tolist() == (np.arange(30) % 4).tolist()
    assert (single.score == 1.0).all() and single.accept.all()
    empty = clf.predict_with_reject(Xq, candidates=np.zeros((30, 4), dtype=bool))  # empty = all classes
    np.testing.assert_array_equal(empty.labels, free.labels)


def test_label_sets_with_names_predict_names():
    X, S, Xq = random_case(9, n=50)
    names = np.array(["ant", "bee", "cat", "dog"])
    sets = [set(names[row]) for row in S]
    sets[0] = {"ant", "bee", "cat", "dog"}  # the reference case's empty bag counts as all classes
    a = Ipal(n_neighbors=5).fit(X, S)
    b = Ipal(n_neighbors=5).fit(X, sets)
    assert b.classes_.tolist() == names.tolist()
    np.testing.assert_array_equal(b.predict(Xq), names[a.predict(Xq)])
    np.testing.assert_array_equal(b.disambiguate().labels, names[a.disambiguated_])


def test_synthetic_accuracy_and_disambiguation_beat_chance():
    X, y = make_classification(
        n_samples=1000, n_features=10, n_informative=6, n_classes=4, n_clusters_per_class=1,
        class_sep=1.5, random_state=0,
    )
    X = X - X.min(axis=0)  # non-negative, as min-max scaled features would be
    S = pll.noise.uniform(y, n_classes=4, r=2, random_state=0)
    tr, te = train_test_split(np.arange(len(y)), test_size=0.2, random_state=0)
    clf = Ipal(random_state=0).fit(X[tr], S[tr])
    accuracy = (clf.predict(X[te]) == y[te]).mean()
    assert accuracy > 0.7  # chance is 0.25
    disambiguation = (clf.disambiguated_ == y[tr]).mean()
    uniform_bag = (1.0 / S[tr].sum(axis=1)).mean()  # a label drawn uniformly from the bag
    assert disambiguation > uniform_bag + 0.2
    r = clf.predict_with_reject(X[te])
    assert (r.labels == y[te])[r.accept].mean() > (r.labels == y[te])[~r.accept].mean()


@pytest.mark.parametrize(
    "params",
    [
        {"n_neighbors": 0},
        {"n_neighbors": 2.5},
        {"n_neighbors": True},
        {"alpha": 0.0},
        {"alpha": 1.0},
        {"alpha": 1.5},
        {"alpha": "high"},
        {"max_iter": 0},
        {"max_iter": 10.0},
        {"knn": "nope"},
        {"random_state": -1},
    ],
)
def test_bad_parameters_are_refused_with_pll_errors(params):
    X, S, _ = random_case(0)
    with pytest.raises(InvalidParameterError):
        Ipal(**params).fit(X, S)


def test_too_few_training_rows_and_unfitted_use_are_refused():
    X, S, _ = random_case(0, n=6)
    with pytest.raises(InvalidParameterError, match="needs at least 7 training rows"):
        Ipal(n_neighbors=6).fit(X, S)
    with pytest.raises(pll.errors.NotFittedError):
        Ipal().predict(X)
    with pytest.raises(PllError):
        Ipal(n_neighbors=2).fit(X, S).predict(X[:, :3])  # wrong number of features


def test_neighbor_result_with_too_few_columns_is_refused():
    X, S, _ = random_case(0)
    nb = pll.neighbors.kneighbors(X, None, 3)
    with pytest.raises(PllError, match="needs 5 neighbors"):
        Ipal(n_neighbors=5).fit(X, S, neighbors=nb)
    bad = NeighborResult(np.full((len(X), 5), len(X) + 3), np.ones((len(X), 5)), self_excluded=True)
    with pytest.raises(PllError, match="outside"):
        Ipal(n_neighbors=5).fit(X, S, neighbors=bad)

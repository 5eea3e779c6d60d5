"""PL-kNN: a hand-computed example and a per-query reference loop written from ALGORITHMS.md."""

from __future__ import annotations

import numpy as np
import pytest

import pll
from pll.utils._random import pick_among
from pll.neighbors import NeighborResult



def test_hand_computed_distance_weighted_votes_and_hellman_reject():
    # Training rows on a line; the query sits at 0, so its distances are exactly 1, 2, 3 (and 10).
    # k = 3: d = (1, 2, 3), Σd = 6, w = 1 - d/6 = (5/6, 4/6, 3/6).
    # Votes: y0 = 5/6 + 3/6 = 8/6, y1 = 5/6 + 4/6 = 9/6, y2 = 3/6; winner y1.
    # Share = (9/6) / (20/6) = 0.45 <= 0.5: rejected.
    X = np.array([[1.0], [2.0], [3.0], [10.0]])
    S = np.array([[1, 1, 0], [0, 1, 0], [1, 0, 1], [0, 0, 1]], bool)
    r = pll.PlKnn(n_neighbors=3).fit(X, S).predict_with_reject(np.array([[0.0]]))
    assert r.labels.tolist() == [1] and not r.guess[0]
    np.testing.assert_allclose(r.shares[0], [8 / 20, 9 / 20, 3 / 20], rtol=0, atol=1e-15)
    np.testing.assert_allclose(r.score, [0.45], rtol=0, atol=1e-15)
    assert not r.accept[0]


def test_hand_computed_zero_distances_weigh_every_neighbor_one():
    # Three training rows at the query's position: Σd = 0 < 1e-6, so every weight is 1.
    # Bags {0,1}, {0}, {0,2}: votes (3, 1, 1), share of label 0 = 3/5 = 0.6 > 0.5: accepted.
    S = np.array([[1, 1, 0], [1, 0, 0], [1, 0, 1], [0, 1, 1]], bool)
    nb = NeighborResult(np.array([[0, 1, 2]]), np.zeros((1, 3)))
    r = pll.PlKnn(n_neighbors=3).fit(np.zeros((4, 1)), S).predict_with_reject(np.zeros((1, 1)), neighbors=nb)
    assert r.labels.tolist() == [0] and r.accept[0]
    np.testing.assert_allclose(r.shares[0], [0.6, 0.2, 0.2], rtol=0, atol=1e-15)


def test_hand_computed_tie_is_a_guess_and_rejected():
    # k = 2 at distances 1 and 1: w = (1/2, 1/2); bags {0} and {1}: votes (1/2, 1/2) tie.
    # Share of either winner = 0.5, not above 0.5: rejected; the label is a seeded guess.
    S = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]], bool)
    nb = NeighborResult(np.array([[0, 1]]), np.ones((1, 2)))
    labels = set()
    for seed in range(20):
        clf = pll.PlKnn(n_neighbors=2, random_state=seed).fit(np.zeros((3, 1)), S)
        r = clf.predict_with_reject(np.zeros((1, 1)), neighbors=nb)
        assert r.guess[0] and not r.accept[0] and r.score[0] == 0.5
        labels.add(int(r.labels[0]))
    assert labels == {0, 1}


def test_hand_computed_disambiguation_votes_only_inside_own_bag():
    # Row 0 (bag {0, 2}) at 0 has neighbors row 1 (d = 1, bag {1}) and row 2 (d = 2, bag {1, 2}).
    # Weights 1 - 1/3 = 2/3 and 1 - 2/3 = 1/3. Unrestricted votes would be (0, 1, 1/3) for label 1;
    # restricted to {0, 2}: (0, -, 1/3), so label 2 wins with the whole restricted vote: share 1.
    S = np.array([[1, 0, 1], [0, 1, 0], [0, 1, 1]], bool)
    distances = np.array([[1.0, 2.0], [1.0, 1.0], [1.0, 2.0]])
    nb = NeighborResult(np.array([[1, 2], [0, 2], [1, 0]]), distances, self_excluded=True)
    r = pll.PlKnn(n_neighbors=2).fit(np.zeros((3, 1)), S, neighbors=nb).disambiguate()
    assert r.labels[0] == 2 and r.score[0] == 1.0 and r.accept[0]
    np.testing.assert_allclose(r.shares[0], [0.0, 0.0, 1.0])


def reference(S, indices, distances, cand, seed, stream):
    """One query at a time, straight from the specification."""
    n, n_classes = cand.shape
    shares = np.zeros((n, n_classes))
    tied = np.zeros((n, n_classes), bool)
    for q in range(n):
        total = sum(distances[q])
        weights = [1.0 if total < 1e-6 else 1.0 - d / total for d in distances[q]]
        votes = [0.0] * n_classes
        for w, i in zip(weights, indices[q]):
            for y in range(n_classes):
                if S[i, y] and cand[q, y]:
                    votes[y] += w
        best = max(votes[y] for y in range(n_classes) if cand[q, y])
        for y in range(n_classes):
            tied[q, y] = cand[q, y] and votes[y] >= best - 1e-9 * abs(best)
        vote_sum = sum(votes)
        if vote_sum >= 1e-10:
            shares[q] = [v / vote_sum for v in votes]
    labels, n_tied = pick_among(tied, seed, np.arange(n), stream)
    score = shares[np.arange(n), labels]
    return labels, score, n_tied > 1, shares


def reference_reasons(S, indices, distances, cand, labels, shares, margin=0.2, bag_size=2.0):
    """conflict and vague per query, from the definitions in PlKnn's docstring, one query at a time."""
    conflict, vague = [], []
    for q, (label, row) in enumerate(zip(labels, shares)):
        close = [y for y in range(len(row)) if y != label and row[y] > 0 and row[label] - row[y] < margin]
        conflict.append(any(S[i, y] and not S[i, label] for i in indices[q] for y in close))
        total = sum(distances[q])
        weights = [1.0 if total < 1e-6 else 1.0 - d / total for d in distances[q]]
        sizes = [(S[i] & cand[q]).sum() for i in indices[q]]
        mean = sum(w * b for w, b in zip(weights, sizes)) / sum(weights) if sum(weights) > 0 else np.mean(sizes)
        vague.append(mean >= bag_size)
    return np.array(conflict), np.array(vague)


@pytest.mark.parametrize("n_classes, k", [(3, 1), (4, 5), (7, 10), (20, 15)])
def test_matches_reference_loop_on_random_cases(n_classes, k):
    rng = np.random.default_rng(n_classes * 100 + k)
    n_train, n = 60, 150
    S = rng.random((n_train, n_classes)) < rng.choice([0.1, 0.3, 0.6], size=(n_train, 1))
    S[:3] = False  # empty bags vote for nothing
    indices = np.array([rng.choice(n_train, size=k, replace=False) for _ in range(n)])
    distances = np.sort(rng.choice([0.0, 0.5, 1.0, 2.0], size=(n, k)) * rng.random((n, 1)), axis=1)
    distances[:10] = 0.0  # weights all 1
    indices[10:20] = indices[10]  # identical neighborhoods and ...
    distances[10:20] = 1.0  # ... equal distances: exact ties are common
    cand = rng.random((n, n_classes)) < 0.5
    cand[::3] = True
    cand[1::3] = np.eye(n_classes, dtype=bool)[rng.integers(n_classes, size=len(cand[1::3]))]  # one candidate
    cand[~cand.any(axis=1), 0] = True
    clf = pll.PlKnn(n_neighbors=k, random_state=4).fit(np.zeros((n_train, 1)), S)
    r = clf.predict_with_reject(np.zeros((n, 1)), neighbors=NeighborResult(indices, distances), candidates=cand)
    labels, score, guess, shares = reference(S, indices, distances, cand, 4, clf._query_stream)
    np.testing.assert_array_equal(r.labels, labels)
    np.testing.assert_array_equal(r.guess, guess)
    np.testing.assert_allclose(r.score, score, rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.shares, shares, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(r.accept, score > 0.5)
    assert cand[np.arange(n), r.labels].all()
    assert r.guess.any() and r.accept.any() and not r.accept.all()
    conflict, vague = reference_reasons(S, indices, distances, cand, labels, shares)
    np.testing.assert_array_equal(r.evidence["conflict"], conflict)
    np.testing.assert_array_equal(r.evidence["vague"], vague)
    assert (conflict.any() and vague.any()) or k == 1  # one neighbor never conflicts with itself


def test_relative_tie_tolerance_counts_nearly_equal_votes_as_tied():
    # Votes 1 and 1 - 1e-12 (relative gap below 1e-9) tie; 1 and 1 - 1e-6 do not.
    S = np.array([[1, 0, 0], [0, 1, 0]], bool)
    indices = np.array([[0, 1], [0, 1]])
    # w_i = 1 - d_i / Σd: d = (1 - e, 1 + e) gives weights (1 + e)/2 and (1 - e)/2.
    distances = np.array([[1 - 1e-12, 1 + 1e-12], [1 - 1e-6, 1 + 1e-6]])
    clf = pll.PlKnn(n_neighbors=2).fit(np.zeros((2, 1)), S)
    r = clf.predict_with_reject(np.zeros((2, 1)), neighbors=NeighborResult(indices, distances))
    assert r.guess.tolist() == [True, False]
    assert r.labels[1] == 0

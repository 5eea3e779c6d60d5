"""DST-PLL against the paper's analysis: Lemma 4.4, the counterexample of Appendix A.3, the simulation of B.1."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import pll
from pll.methods._dst_pll import decide
from pll.neighbors import NeighborResult


def predict_one(s_tilde, bags, n_classes, seed=0):
    """DST-PLL for one query with candidate set ``s_tilde`` whose neighbors carry ``bags``."""
    S = np.zeros((max(len(bags), 1), n_classes), bool)
    for i, bag in enumerate(bags):
        S[i, sorted(bag)] = True
    cand = np.isin(np.arange(n_classes), sorted(s_tilde))[None]
    k = len(bags)
    clf = pll.DstPll(n_neighbors=max(k, 1), random_state=seed).fit(np.zeros((len(S), 1)), S)
    nb = NeighborResult(np.arange(k)[None], np.zeros((1, k)))
    return clf.predict_with_reject(np.zeros((1, 1)), neighbors=nb, candidates=cand)


def focal_masses(s_tilde, bags):
    """m̃ by the random-subset view: each informative neighbor is included with probability 1/2."""
    informative = [b & s_tilde for b in bags if b & s_tilde and not s_tilde <= b]
    q = len(informative)
    masses = {}
    for size in range(q + 1):
        for chosen in combinations(informative, size):
            focal = s_tilde.intersection(*chosen) or s_tilde
            masses[focal] = masses.get(focal, Fraction(0)) + Fraction(1, 2**q)
    return masses


@st.composite
def queries(draw):
    n_classes = draw(st.integers(3, 7))
    labels = st.sets(st.integers(0, n_classes - 1))
    s_tilde = frozenset(draw(labels.filter(bool)))
    bags = [frozenset(b) for b in draw(st.lists(labels, min_size=1, max_size=8))]
    return n_classes, s_tilde, bags


@settings(max_examples=300, deadline=None)
@given(queries(), st.integers(0, 2**32))
def test_lemma_4_4_i_a_guess_is_never_accepted(query, seed):
    n_classes, s_tilde, bags = query
    r = predict_one(s_tilde, bags, n_classes, seed)
    fallback = r.beliefs.max() == 0.0
    if fallback:  # Algorithm 1, line 11, second case: the label is drawn from a focal set of 2+ labels
        assert r.guess[0]
    if r.guess[0]:
        assert r.score[0] <= 0.0 and not r.accept[0]


@settings(max_examples=300, deadline=None)
@given(queries(), st.integers(0, 2**32), st.randoms(use_true_random=False))
def test_lemma_4_4_ii_an_accepted_label_wins_under_every_measure_of_the_credal_set(query, seed, random):
    n_classes, s_tilde, bags = query
    r = predict_one(s_tilde, bags, n_classes, seed)
    masses = focal_masses(s_tilde, bags)
    np.testing.assert_array_equal(r.beliefs[0], [float(masses.get(frozenset({y}), 0)) for y in range(n_classes)])
    if not r.accept[0]:
        return
    winner = int(r.labels[0])
    # A measure of the credal set gives each focal set's mass to its members. For each rival y the
    # hardest one gives y every set that holds it and the winner only what it must take ({ŷ});
    # random splits cover the rest.
    for rival in sorted(s_tilde - {winner}):
        allocations = [{a: (rival if rival in a else min(a - {winner} or a)) for a in masses}]
        allocations += [{a: random.choice(sorted(a)) for a in masses} for _ in range(5)]
        for alloc in allocations:
            p = {y: sum((v for a, v in masses.items() if alloc[a] == y), Fraction(0)) for y in s_tilde}
            assert p[winner] > p[rival]


@settings(max_examples=300, deadline=None)
@given(queries(), st.integers(0, 2**32))
def test_lemma_4_4_iii_more_than_half_the_mass_is_accepted(query, seed):
    n_classes, s_tilde, bags = query
    r = predict_one(s_tilde, bags, n_classes, seed)
    if r.beliefs[0, r.labels[0]] > 0.5:
        assert r.score[0] > 0.0 and r.accept[0] and not r.guess[0]


def test_appendix_a3_counterexample_accepts_with_mass_below_half():
    # s̃ = Y = {1, 2, 3} (here 0, 1, 2): m̃({1}) = 0.4, m̃({1, 2}) = m̃({1, 3}) = 0.3.
    # bel({1}) = 0.4; pl({1}) = 1, pl({2}) = pl({3}) = 0.3; Δ = 0.4 - 0.3 = 0.1 > 0.
    beliefs = np.array([[0.4, 0.0, 0.0]])
    plausibilities = np.array([[1.0, 0.3, 0.3]])
    labels, score, guess = decide(beliefs, plausibilities, np.zeros((1, 3), bool), 0, np.arange(1), 1)
    assert labels.tolist() == [0] and not guess[0]
    assert abs(score[0] - 0.1) < 1e-12 and score[0] > 0


def test_a_neighborhood_accepted_with_less_than_half_the_mass():
    # s̃ = {0, 1, 2, 3}; neighbors {0,1,3}, {0,1}, {0,2,3}, {0,2,3}, {0,1,2}: label 0 is in every bag.
    # pl({y}) = P(every included bag holds y) = 2^-(bags without y) = 2^-2 = 8/32 for y = 1, 2, 3.
    # m̃({0}) = 1 - P(E1 ∪ E2 ∪ E3), E_y = "every included bag holds y"; inclusion-exclusion:
    # 3/4 - (1/16 + 1/16 + 1/8) + 1/32 = 17/32, so m̃({0}) = 15/32 < 1/2 and Δ = 15/32 - 8/32 = 7/32.
    bags = [{0, 1, 3}, {0, 1}, {0, 2, 3}, {0, 2, 3}, {0, 1, 2}]
    r = predict_one(frozenset(range(4)), [frozenset(b) for b in bags], 4)
    assert r.labels[0] == 0 and r.beliefs[0, 0] == 15 / 32
    np.testing.assert_array_equal(r.plausibilities[0], [1.0, 8 / 32, 8 / 32, 8 / 32])
    assert r.score[0] == 7 / 32 and r.accept[0]


# Appendix B.1, l = 3, ỹ = 0, ỹc = 1: the neighbors' bags under Assumption 4.1 with p = (0.4, 0.35, 0.25):
# P({0,1}) = p1, P({0}) = P({0,2}) = p2/2, P({1}) = P({2}) = p3/3, P({1,2}) = 2·p3/6.
P1, P2, P3 = 0.4, 0.35, 0.25
B1_BAGS = np.array([[1, 1, 0], [1, 0, 0], [1, 0, 1], [0, 1, 0], [0, 0, 1], [0, 1, 1]], bool)
B1_PROBS = np.array([P1, P2 / 2, P2 / 2, P3 / 3, P3 / 3, P3 / 3])


def test_appendix_b1_true_label_gets_more_expected_mass_than_its_confuser():
    assert abs(B1_PROBS.sum() - 1.0) < 1e-12
    rng = np.random.default_rng(2024)
    n_trials = 40_000
    for k in range(1, 21):
        bag_of = rng.choice(len(B1_BAGS), p=B1_PROBS, size=(n_trials, k))
        S = B1_BAGS[bag_of.ravel()]
        nb = NeighborResult(np.arange(n_trials * k).reshape(n_trials, k), np.zeros((n_trials, k)))
        # Up to 800,000 identical rows: the support test (a search of them all at fit) has nothing to say here.
        clf = pll.DstPll(n_neighbors=k, support_quantile=None).fit(np.zeros((len(S), 1)), S)
        beliefs = clf.predict_with_reject(np.zeros((n_trials, 1)), neighbors=nb).beliefs
        diff = beliefs[:, 0] - beliefs[:, 1]  # paired: m̃({ỹ}) - m̃({ỹc}) per simulated neighborhood
        z = diff.mean() / (diff.std(ddof=1) / np.sqrt(n_trials))
        assert beliefs[:, 0].mean() > beliefs[:, 1].mean()
        assert z > 10, (k, diff.mean(), z)

"""Bag audit: planted wrong bags are found, leave-one-out holds, and the score matches a plain loop of its definition."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from pll.audit import audit_bags, majority_disagreement, neighbor_support, precision_at_top, ranking_auc
from pll.errors import InvalidDataError, InvalidParameterError, NeighborsError
from pll.neighbors import kneighbors

from tests.oracles import nearest


def audit_neighbors(*args, **kwargs):
    """The audit by the neighbors alone, whose mathematics these tests check (the learners' are checked in test_audit_learners.py)."""
    return audit_bags(*args, learners=None, **kwargs)


def two_clusters(seed=0, per_cluster=20):
    """Cluster A (classes 0, sometimes with 2) near 0, cluster B (classes 1, sometimes with 2) near 10."""
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(0.0, 0.5, (per_cluster, 2)), rng.normal(10.0, 0.5, (per_cluster, 2))])
    S = np.zeros((2 * per_cluster, 3), dtype=bool)
    S[:per_cluster, 0] = True
    S[per_cluster:, 1] = True
    S[rng.random(2 * per_cluster) < 0.3, 2] = True
    return X, S


def suspicion_by_row(table):
    out = np.empty(len(table))
    out[table["row"].to_numpy()] = table["suspicion"].to_numpy()
    return out


# ------------------------------------------------------------------ planted wrong bags


@pytest.mark.parametrize("weights", ["distance", "uniform"])
@pytest.mark.parametrize("refine", [True, False])
@pytest.mark.parametrize("planted", [3, 27])
def test_a_planted_bag_of_the_other_cluster_ranks_first(weights, refine, planted):
    X, S = two_clusters()
    right = 0 if planted < 20 else 1
    S[planted] = False
    S[planted, 1 - right] = True  # the other cluster's label only
    table = audit_neighbors(X, S, n_neighbors=5, weights=weights, refine=refine, classes=["a", "b", "c"])
    top = table.iloc[0]
    assert top["row"] == planted
    assert top["bag"] == "ab"[1 - right]
    assert top["suggested"].split("|")[0] == "ab"[right]
    assert top["best_out"] > 0.5 > top["best_in"]
    assert top["suspicion"] > table["suspicion"].iloc[1] + 0.3
    # The baseline finds it too: the planted row disagrees with a unanimous majority.
    assert int(np.argmax(majority_disagreement(X, S, n_neighbors=5))) == planted


def test_a_wrong_bag_among_many_labels_is_found_and_a_right_big_bag_is_not():
    X, S = two_clusters(seed=1)
    S[5] = [False, True, True]  # two labels, both wrong for cluster A
    S[6] = [True, True, True]  # every label: certainly holds the truth
    table = audit_neighbors(X, S, n_neighbors=6)
    assert table["row"].iloc[0] == 5
    assert table.loc[table["row"] == 6, "suspicion"].item() == pytest.approx(0.0)
    assert table.loc[table["row"] == 6, "best_out"].item() == 0.0


def test_refinement_takes_the_weight_of_a_partner_label_away():
    # Row 0's neighbors 1 and 2 carry {0, 1}; their own neighbors (farther from row 0) carry {0}.
    X = np.array([[0.0], [1.0], [-1.0], [1.2], [1.25], [1.3], [-1.2], [-1.25], [-1.3]])
    S = np.zeros((9, 2), dtype=bool)
    S[1:3] = True
    S[3:, 0] = True
    S[0, 1] = True  # the planted bag: the partner label alone
    nb = kneighbors(X, None, k=2)
    assert nb.indices[:3].tolist() == [[1, 2], [3, 4], [6, 7]]
    plain = neighbor_support(S, nb, weights="uniform", refine=False)
    refined = neighbor_support(S, nb, weights="uniform", refine=True)
    assert plain[0].tolist() == [0.5, 0.5]  # half of every neighbor's vote
    # Each neighbor's vote becomes (2 + 1/2, 1/2) / 3 of the pseudo-neighbor's smoothing: p(1) = (2/6 + 1/2) / 3.
    assert refined[0] == pytest.approx([1 - 5 / 18, 5 / 18])
    assert neighbor_support(S, nb, refine=True)[0, 1] < neighbor_support(S, nb, refine=False)[0, 1] - 0.05


def test_a_neighbor_with_a_large_bag_is_weak_evidence():
    X = np.array([[0.0], [1.0], [1.0]])
    small = np.array([[1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]], dtype=bool)
    large = np.array([[1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 1, 0]], dtype=bool)
    nb = kneighbors(X, None, k=2)
    strong = neighbor_support(small, nb, weights="uniform", refine=False)[0]
    weak = neighbor_support(large, nb, weights="uniform", refine=False)[0]
    assert strong[0] == pytest.approx((2 + 0.25) / 3)
    assert weak[0] == pytest.approx((2 / 3 + 0.25) / 3)


# ------------------------------------------------------------------ leave-one-out


@pytest.mark.parametrize("refine", [True, False])
def test_a_rows_own_bag_never_changes_its_support(refine):
    X, S = two_clusters(seed=2)
    nb = kneighbors(X, None, k=7)
    before = neighbor_support(S, nb, refine=refine)
    rng = np.random.default_rng(0)
    for row in (0, 11, 33):
        for _ in range(3):
            changed = S.copy()
            changed[row] = rng.random(3) < 0.5
            after = neighbor_support(changed, nb, refine=refine)
            assert np.array_equal(after[row], before[row])  # bit for bit
            # ... and its suspicion moves only through its bag.
            table = audit_neighbors(X, changed, n_neighbors=7, neighbors=nb, refine=refine)
            got = table.loc[table["row"] == row, "suspicion"].item()
            expected = 1.0 if not changed[row].any() else 1.0 - before[row][changed[row]].sum()
            assert got == pytest.approx(expected, abs=1e-15)
    # A row's bag does change its neighbors' support: the audit is not blind to it.
    changed = S.copy()
    changed[0] = [False, True, False]
    assert not np.array_equal(neighbor_support(changed, nb, refine=refine), before)


def test_an_exact_duplicate_is_a_neighbor_but_the_row_itself_is_not():
    # Rows 0 and 1 coincide; rows 2, 3 are far.  Row 0's only near evidence is row 1's bag.
    X = np.array([[0.0], [0.0], [9.0], [9.5]])
    S = np.array([[1, 0], [0, 1], [1, 0], [1, 0]], dtype=bool)
    support = neighbor_support(S, kneighbors(X, None, k=1), refine=False)
    assert support[0, 1] > support[0, 0]  # row 1 voted, row 0 did not vote for itself
    assert support[1, 0] > support[1, 1]


# ------------------------------------------------------------------ empty bags and ties


def test_empty_bags_are_flagged_and_ranked_first_in_row_order():
    X, S = two_clusters(seed=3)
    S[[30, 4]] = False
    table = audit_neighbors(X, S, n_neighbors=5)
    assert table["row"].iloc[:2].tolist() == [4, 30]
    assert table["empty_bag"].tolist() == [True, True] + [False] * (len(S) - 2)
    assert (table["suspicion"].iloc[:2] == 1.0).all() and (table["suspicion"].iloc[2:] < 1.0).all()
    assert table["bag"].iloc[:2].tolist() == ["", ""]
    assert (table["best_in"].iloc[:2] == 0.0).all()


def test_neighbors_with_empty_bags_say_nothing():
    X = np.array([[0.0], [0.1], [0.2], [5.0]])
    S = np.array([[1, 0, 0], [0, 0, 0], [0, 0, 0], [0, 1, 0]], dtype=bool)
    support = neighbor_support(S, kneighbors(X, None, k=2))
    assert support[0] == pytest.approx([1 / 3] * 3)  # only the pseudo-neighbor: uniform
    assert audit_neighbors(X, S, n_neighbors=2)["suggested"].tolist()[-1] == "0|1|2"


def test_ties_are_ordered_by_row_and_the_table_is_reproducible():
    # Mirror images: rows 0 and 5 (and 1 and 4, ...) see the same evidence.
    X = np.array([[0.0], [1.0], [2.0], [10.0], [11.0], [12.0]])
    S = np.array([[0, 1], [1, 0], [1, 0], [1, 0], [1, 0], [0, 1]], dtype=bool)
    table = audit_neighbors(X, S, n_neighbors=2)
    sus = table["suspicion"].to_numpy()
    assert np.all(np.diff(sus) <= 0)
    for value in np.unique(sus):
        rows = table.loc[sus == value, "row"].tolist()
        assert rows == sorted(rows)
    assert table["row"].iloc[:2].tolist() == [0, 5]
    assert table.equals(audit_neighbors(X, S, n_neighbors=2))


def test_suggested_labels_in_order_of_support_with_ties_in_class_order():
    X = np.array([[0.0], [1.0], [1.0], [-1.0], [-1.0]])
    S = np.array([[0, 0, 1], [0, 1, 0], [0, 1, 0], [1, 0, 0], [1, 0, 0]], dtype=bool)
    table = audit_neighbors(X, S, n_neighbors=4, weights="uniform", refine=False, classes=["x", "y", "z"])
    top = table.iloc[0]
    assert (top["row"], top["bag"], top["suggested"]) == (0, "z", "x|y")


# ------------------------------------------------------------------ the score against its definition, by loops


def loop_support(X, S, k, weights, prior, refine):
    """The support of pll.audit's docstring, one row and one label at a time."""
    n, l = S.shape
    idx, dist = nearest(X, None, k)

    def w(row, t):
        h = dist[row, -1]
        return 1.0 if weights == "uniform" or h == 0 else math.exp(-((dist[row, t] / h) ** 2))

    def v(row, y):
        return S[row, y] / S[row].sum() if S[row].any() else 0.0

    def q(j, i):
        if not S[j].any():
            return [0.0] * l
        if not refine:
            return [v(j, y) for y in range(l)]
        r = [sum(w(j, s) * v(idx[j, s], y) for s in range(k) if idx[j, s] != i) + prior / l for y in range(l)]
        total = sum(r[y] for y in range(l) if S[j, y])
        return [r[y] / total if S[j, y] else 0.0 for y in range(l)]

    P = np.zeros((n, l))
    for i in range(n):
        qs = [q(idx[i, t], i) for t in range(k)]
        den = sum(w(i, t) for t in range(k) if S[idx[i, t]].any()) + prior
        for y in range(l):
            P[i, y] = (sum(w(i, t) * qs[t][y] for t in range(k)) + prior / l) / den
    return P


@st.composite
def small_cases(draw):
    n = draw(st.integers(3, 12))
    l = draw(st.integers(1, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X = rng.integers(0, draw(st.sampled_from([2, 4, 10])), (n, 2)).astype(float)  # integer grid: exact ties
    S = rng.random((n, l)) < draw(st.sampled_from([0.2, 0.5, 0.8]))
    k = draw(st.integers(1, n - 1))
    return X, S, k, draw(st.sampled_from(["distance", "uniform"])), draw(st.sampled_from([0.5, 1.0, 3.0])), draw(
        st.booleans()
    )


@settings(max_examples=60, deadline=None)
@given(small_cases())
def test_support_suspicion_and_order_match_the_definition_by_loops(case):
    X, S, k, weights, prior, refine = case
    expected = loop_support(X, S, k, weights, prior, refine)
    got = neighbor_support(S, kneighbors(X, None, k=k), weights=weights, prior=prior, refine=refine)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got.sum(axis=1), 1.0)
    table = audit_neighbors(X, S, n_neighbors=k, weights=weights, prior=prior, refine=refine)
    sus = [1.0 if not S[i].any() else 1.0 - sum(expected[i, y] for y in range(S.shape[1]) if S[i, y])
           for i in range(len(S))]
    np.testing.assert_allclose(suspicion_by_row(table), sus, rtol=1e-12, atol=1e-14)
    key = [(not S[i].any(), suspicion_by_row(table)[i], -i) for i in range(len(S))]
    assert table["row"].tolist() == sorted(range(len(S)), key=lambda i: key[i], reverse=True)
    for row in table.itertuples():
        assert row.bag == "|".join(str(c) for c in range(S.shape[1]) if S[row.row, c])
        p = expected[row.row]
        ranked = sorted((c for c in range(S.shape[1]) if p[c] >= 0.5 * p.max() - 1e-12), key=lambda c: (-p[c], c))
        assert row.suggested == "|".join(map(str, ranked))


@settings(max_examples=60, deadline=None)
@given(small_cases())
def test_majority_baseline_matches_a_loop(case):
    X, S, k, *_ = case
    idx, _ = nearest(X, None, k)
    expected = []
    for i in range(len(S)):
        votes = [sum(S[j, y] for j in idx[i]) for y in range(S.shape[1])]
        top = max(votes)
        inside = any(votes[y] == top and S[i, y] for y in range(S.shape[1]))
        expected.append(1 - top / k if inside else 1 + top / k)
    np.testing.assert_allclose(majority_disagreement(X, S, n_neighbors=k), expected)


# ------------------------------------------------------------------ inputs, precomputed neighbors


def test_precomputed_neighbors_give_the_same_table_and_their_first_columns_are_used():
    X, S = two_clusters(seed=4)
    own = audit_neighbors(X, S, n_neighbors=5)
    assert own.equals(audit_neighbors(X, S, n_neighbors=5, neighbors=kneighbors(X, None, k=9)))
    assert own.equals(audit_neighbors(None, S, n_neighbors=5, neighbors=kneighbors(X, None, k=5)))


def test_label_sets_and_class_names():
    X = np.array([[0.0], [0.1], [0.2], [5.0], [5.1]])
    sets = [{"cat"}, {"cat", "dog"}, {"dog"}, {"dog"}, set()]
    table = audit_neighbors(X, sets, n_neighbors=2)
    assert table["bag"].tolist()[0] == "" and set(table["bag"]) == {"", "cat", "cat|dog", "dog"}
    named = audit_neighbors(X, sets, n_neighbors=2, classes=["dog", "cat", "bird"])
    assert named.loc[named["row"] == 1, "bag"].item() == "dog|cat"  # in the order of the classes given


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"n_neighbors": 0}, InvalidParameterError, "n_neighbors"),
        ({"n_neighbors": True}, InvalidParameterError, "n_neighbors"),
        ({"n_neighbors": 2.5}, InvalidParameterError, "n_neighbors"),
        ({"n_neighbors": 6}, NeighborsError, "k=6 exceeds the 5 training rows"),
        ({"weights": "gaussian"}, InvalidParameterError, "weights"),
        ({"prior": 0.0}, InvalidParameterError, "prior"),
        ({"prior": float("nan")}, InvalidParameterError, "prior"),
        ({"prior": True}, InvalidParameterError, "prior"),
        ({"refine": "yes"}, InvalidParameterError, "refine"),
        ({"knn": "annoy"}, InvalidParameterError, "annoy"),
        ({"knn": "exact", "knn_options": {"n_trees": 3}}, InvalidParameterError, "n_trees"),
        ({"knn_options": [("a", 1)]}, InvalidParameterError, "knn_options"),
        ({"classes": ["a", "b"]}, InvalidDataError, "3 class columns but 2 classes"),
        ({"classes": ["a", "a", "b"]}, InvalidParameterError, "distinct"),
        ({"neighbors": "nb"}, InvalidParameterError, "NeighborResult"),
    ],
)
def test_bad_parameters_are_named(kwargs, error, match):
    X = np.arange(12.0).reshape(6, 2)
    S = np.eye(3, dtype=bool)[[0, 1, 2, 0, 1, 2]]
    with pytest.raises(error, match=match):
        audit_neighbors(X, S, **{"n_neighbors": 2, **kwargs})


def test_bad_data_and_neighbor_results_are_named():
    X = np.arange(12.0).reshape(6, 2)
    S = np.eye(3, dtype=bool)[[0, 1, 2, 0, 1, 2]]
    with pytest.raises(InvalidDataError, match="X has 5 rows but S has 6 bags"):
        audit_neighbors(X[:5], S)
    with pytest.raises(InvalidDataError, match="0/1 values"):
        audit_neighbors(X, S.astype(int) * 2, n_neighbors=2)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(InvalidDataError, match="row 3"):
        audit_neighbors(bad, S, n_neighbors=2)
    with pytest.raises(InvalidDataError, match="X is None"):
        audit_neighbors(None, S, n_neighbors=2)
    with pytest.raises(NeighborsError, match="own neighbors"):
        audit_neighbors(X, S, n_neighbors=2, neighbors=kneighbors(X, X, k=2))
    with pytest.raises(NeighborsError, match="holds only 2"):
        audit_neighbors(X, S, n_neighbors=3, neighbors=kneighbors(X, None, k=2))
    with pytest.raises(NeighborsError, match="5 queries but 6 rows"):
        audit_neighbors(X, S, n_neighbors=2, neighbors=kneighbors(X[:5], None, k=2))
    with pytest.raises(InvalidDataError, match="bool matrix"):
        neighbor_support(S.astype(int), kneighbors(X, None, k=2))
    with pytest.raises(InvalidParameterError, match="n_neighbors"):
        majority_disagreement(X, S, n_neighbors=-1)


# ------------------------------------------------------------------ precision at the top, AUC


def test_precision_at_top_by_hand():
    score = [0.9, 0.8, 0.7, 0.6, 0.5]
    wrong = np.array([True, False, True, False, False])
    assert precision_at_top(score, wrong, 0.2) == 1.0
    assert precision_at_top(score, wrong, 0.4) == 0.5
    assert precision_at_top(score, wrong, 0.5) == pytest.approx(2 / 3)  # ⌈2.5⌉ = 3 rows
    assert precision_at_top(score, wrong, 1.0) == pytest.approx(0.4)
    # Empty bags are left out: without row 0, the top row is row 1 (right).
    empty = np.array([True, False, False, False, False])
    assert precision_at_top(score, wrong, 0.25, empty=empty) == 0.0
    assert precision_at_top(score, wrong, 0.5, empty=empty) == 0.5
    # q·m on an exact integer in decimal but not in binary: 0.1 · 50 = 5 rows, not 6.
    assert precision_at_top(np.arange(50.0)[::-1], np.arange(50) < 5, 0.1) == 1.0


def test_precision_at_top_counts_a_tie_at_the_cutoff_by_expectation():
    score = np.array([3, 2, 2, 2, 1.0])
    wrong = np.array([False, True, True, False, True])
    q = 0.6  # 3 rows: row 0 and two of the three tied rows
    orders = [p for p in itertools.permutations([1, 2, 3])]
    expected = np.mean([(wrong[0] + wrong[list(p[:2])].sum()) / 3 for p in orders])
    assert precision_at_top(score, wrong, q) == pytest.approx(expected) == pytest.approx(
        (0 + 2 * (2 / 3)) / 3
    )
    assert precision_at_top(score[::-1], wrong[::-1], q) == pytest.approx(expected)


def test_ranking_auc_by_hand_and_against_scikit_learn():
    # Wrong rows score 0.9 and 0.5; right rows 0.5 and 0.1: pairs (0.9 > 0.5, 0.9 > 0.1, 0.5 = 0.5, 0.5 > 0.1).
    assert ranking_auc([0.9, 0.5, 0.5, 0.1], [True, True, False, False]) == pytest.approx(3.5 / 4)
    assert ranking_auc([0.1, 0.9], [True, False]) == 0.0
    assert ranking_auc([5.0, 1.0, 9.0], [False, True, True], empty=[False, False, True]) == 0.0
    rng = np.random.default_rng(1)
    for _ in range(20):
        score = rng.integers(0, 4, 30).astype(float)
        wrong = rng.random(30) < 0.3
        wrong[:2] = [True, False]
        assert ranking_auc(score, wrong) == pytest.approx(roc_auc_score(wrong, score))


def test_evaluation_helpers_refuse_bad_input():
    with pytest.raises(InvalidDataError, match="1 wrong and 0 right"):
        ranking_auc([0.3, 0.2], [True, False], empty=[False, True])
    with pytest.raises(InvalidDataError, match="0 wrong"):
        ranking_auc([0.3, 0.2], [False, False])
    with pytest.raises(InvalidParameterError, match="q must be"):
        precision_at_top([0.3, 0.2], [True, False], 0.0)
    with pytest.raises(InvalidParameterError, match="q must be"):
        precision_at_top([0.3, 0.2], [True, False], 1.5)
    with pytest.raises(InvalidDataError, match="lengths differ"):
        precision_at_top([0.3, 0.2], [True], 0.5)
    with pytest.raises(InvalidDataError, match="boolean"):
        ranking_auc([0.3, 0.2], [1, 0])
    with pytest.raises(InvalidDataError, match="finite"):
        ranking_auc([np.nan, 0.2], [True, False])
    with pytest.raises(InvalidDataError, match="no non-empty bags"):
        precision_at_top([0.3], [True], 0.5, empty=[True])

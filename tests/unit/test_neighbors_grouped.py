"""Nearest row of every group: the one-pass exact search against a brute-force oracle, and its fallbacks."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pll.neighbors.grouped as grouped_module
from pll.errors import InvalidDataError, InvalidParameterError, PllError
from pll.neighbors import kneighbors, nearest_by_group
from pll.neighbors.grouped import nearest_own_and_other
from pll.neighbors.grouped_cells import GroupedCellIndex
from tests.oracles import nearest


def oracle(X, groups, n_groups, Q=None):
    """Per group, its first row in the brute-force order of all rows (a query's own row left out)."""
    order, dist = nearest(X, Q)
    indices = np.full((order.shape[0], n_groups), -1)
    distances = np.full((order.shape[0], n_groups), np.inf)
    for i in range(order.shape[0]):
        for g in range(n_groups):
            first = np.flatnonzero(groups[order[i]] == g)[:1]
            if first.size:
                indices[i, g], distances[i, g] = order[i, first[0]], dist[i, first[0]]
    return indices, distances


@st.composite
def cases(draw):
    """Up to 150 rows in up to 4 groups (several chunks each); integer data gives ties and duplicates."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(1, 150))
    d = draw(st.integers(1, 4))
    n_groups = draw(st.integers(1, 4))
    integer = draw(st.booleans())
    offset = draw(st.sampled_from([0.0, 1e4]))  # large norms widen the float32 rounding bound
    X = (rng.integers(0, 3, size=(n, d)).astype(float) if integer else rng.normal(size=(n, d))) + offset
    groups = rng.integers(-1, n_groups, size=n)
    Q = None
    if draw(st.booleans()):
        m = draw(st.integers(1, 12))
        Q = (rng.integers(0, 3, size=(m, d)).astype(float) if integer else rng.normal(size=(m, d))) + offset
    return X, groups, n_groups, Q


@settings(max_examples=200, deadline=None)
@given(cases())
def test_exact_matches_the_oracle(case):
    X, groups, n_groups, Q = case
    indices, distances = nearest_by_group(X, groups, n_groups, Q)
    expected_indices, expected_distances = oracle(X, groups, n_groups, Q)
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_allclose(distances, expected_distances, rtol=1e-12)


def test_same_bits_as_a_kneighbors_search_of_each_group():
    rng = np.random.default_rng(3)
    X, Q = rng.normal(size=(900, 6)), rng.normal(size=(120, 6))
    groups = rng.integers(0, 3, size=900)
    indices, distances = nearest_by_group(X, groups, 3, Q)
    for g in range(3):
        members = np.flatnonzero(groups == g)
        nb = kneighbors(X[members], Q, 1)
        np.testing.assert_array_equal(indices[:, g], members[nb.indices[:, 0]])
        np.testing.assert_array_equal(distances[:, g], nb.distances[:, 0])


@pytest.mark.parametrize("scale", [1.0, 0.1])
def test_ties_across_chunks_give_the_lowest_index(monkeypatch, scale):
    """Integer rows screen exactly and need no second search; others are searched again in the group."""
    searched = []
    original = grouped_module.GroupedExactIndex._search_group

    def spy(self, g, Q, queries, *args):
        searched.append((g, queries.tolist()))
        return original(self, g, Q, queries, *args)

    monkeypatch.setattr(grouped_module.GroupedExactIndex, "_search_group", spy)
    X = scale * np.vstack([np.ones((3 * grouped_module.CHUNK, 2)), np.zeros((5, 2))])  # group 0: one point thrice a chunk
    groups = np.array([0] * (3 * grouped_module.CHUNK) + [1] * 5)
    Q = scale * np.array([[1.0, 2.0], [0.0, 0.0]])
    indices, distances = nearest_by_group(X, groups, 2, Q)
    assert searched == ([] if scale == 1.0 else [(0, [0, 1])])
    np.testing.assert_array_equal(indices, [[0, 3 * grouped_module.CHUNK], [0, 3 * grouped_module.CHUNK]])
    np.testing.assert_array_equal(distances, oracle(X, groups, 2, Q)[1])


def test_screening_that_cannot_separate_rows_still_returns_the_exact_nearest():
    # Rows 1e-3 apart at norm 1e5 after centering: float32 cannot order them, the float64 search must.
    rng = np.random.default_rng(4)
    X = np.vstack([1e5 + rng.random((60, 2)) * 1e-3, -1e5 + rng.random((60, 2)) * 1e-3])
    groups = np.repeat([0, 1, 0, 1], 30)
    Q = 1e5 + rng.random((5, 2)) * 1e-3
    np.testing.assert_array_equal(nearest_by_group(X, groups, 2, Q)[0], oracle(X, groups, 2, Q)[0])


def test_empty_groups_and_a_lone_row_excluded_from_itself():
    X = np.array([[0.0], [1.0], [3.0]])
    indices, distances = nearest_by_group(X, np.array([0, 0, 2]), 3)
    np.testing.assert_array_equal(indices, [[1, -1, 2], [0, -1, 2], [1, -1, -1]])
    np.testing.assert_array_equal(distances, [[1, np.inf, 3], [1, np.inf, 2], [2, np.inf, np.inf]])


def test_approximate_backend_searches_each_group_and_never_returns_the_row_itself():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(600, 4))
    X[599] = X[0]  # a duplicate stays a neighbor at distance 0
    groups = rng.integers(0, 2, size=600)
    groups[599] = groups[0]
    indices, distances = nearest_by_group(X, groups, 2, None, "nndescent", recall_sample=0)
    exact_indices, exact_distances = nearest_by_group(X, groups, 2)
    assert not (indices == np.arange(600)[:, None]).any()
    assert indices[0, groups[0]] == 599 and distances[0, groups[0]] == 0.0
    assert (distances >= exact_distances).all()
    assert (indices == exact_indices).mean() > 0.95


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda X: nearest_by_group(X, np.zeros(9, int), 2), InvalidDataError, r"shape \(10,\)"),
        (lambda X: nearest_by_group(X, np.zeros(10), 2), InvalidDataError, "int array"),
        (lambda X: nearest_by_group(X, np.full(10, 2), 2), InvalidDataError, r"lie in \[-1, 2\), found 2\.\.2"),
        (lambda X: nearest_by_group(X, np.zeros(10, int), 0), InvalidParameterError, "n_groups must be a positive"),
        (lambda X: nearest_by_group(X, np.zeros(10, int), 1, X[:, :2]), InvalidDataError, "query rows have 2"),
        (lambda X: nearest_by_group(X, np.zeros(10, int), 1, None, "hnsw"), InvalidParameterError, "'hnsw'"),
        (lambda X: nearest_by_group(X, np.zeros(10, int), 1, None, n_trees=3), InvalidParameterError, "n_trees"),
    ],
)
def test_bad_input_raises_typed_errors(call, error, message):
    X = np.random.default_rng(0).normal(size=(10, 3))
    with pytest.raises(error, match=message) as info:
        call(X)
    assert isinstance(info.value, PllError)


def test_tiling_and_query_blocks_do_not_change_the_result(monkeypatch):
    rng = np.random.default_rng(6)
    X = rng.integers(0, 5, size=(500, 3)).astype(float)
    groups = rng.integers(-1, 3, size=500)
    whole = nearest_by_group(X, groups, 3)
    monkeypatch.setattr(grouped_module, "_TILE_ROWS", 2 * grouped_module.CHUNK)
    monkeypatch.setattr(grouped_module, "_BLOCK_BYTES", 4 * 40)
    tiled = nearest_by_group(X, groups, 3)
    np.testing.assert_array_equal(tiled[0], whole[0])
    np.testing.assert_array_equal(tiled[1], whole[1])


def test_auto_searches_exactly_up_to_its_threshold_and_by_cells_beyond(monkeypatch):
    rng = np.random.default_rng(7)
    X, groups = rng.normal(size=(300, 3)), rng.integers(0, 2, size=300)
    exact = nearest_by_group(X, groups, 2)
    np.testing.assert_array_equal(nearest_by_group(X, groups, 2, None, "auto")[0], exact[0])
    monkeypatch.setattr(grouped_module, "AUTO_EXACT_MAX_ROWS", 299)
    monkeypatch.setattr(grouped_module, "EachGroupSearch", None)  # no per-group index: the cells
    indices, distances = nearest_by_group(X, groups, 2, None, "auto", recall_sample=0)
    expected = GroupedCellIndex(X, groups, 2).search(X, np.arange(300))
    np.testing.assert_array_equal(indices, expected[0])
    np.testing.assert_array_equal(distances, expected[1])
    # 300 rows are one cell per group, searched whole: the exact result.
    np.testing.assert_array_equal(indices, exact[0])


@settings(max_examples=150, deadline=None)
@given(cases(), st.integers(0, 2**32 - 1))
def test_own_and_other_are_the_oracle_reduced_to_two_groups(case, seed):
    X, groups, n_groups, Q = case
    _, expected = oracle(X, groups, n_groups, Q)
    own = np.random.default_rng(seed).integers(0, n_groups, size=expected.shape[0])
    own_distance, other_distance, other_group = nearest_own_and_other(X, groups, n_groups, own, Q)
    rows = np.arange(own.size)
    np.testing.assert_allclose(own_distance, expected[rows, own], rtol=1e-12)
    others = expected.copy()
    others[rows, own] = np.inf
    np.testing.assert_allclose(other_distance, others.min(axis=1), rtol=1e-12)
    nearest = np.where(np.isinf(others.min(axis=1)), (own == 0).astype(int), others.argmin(axis=1))
    np.testing.assert_array_equal(other_group, nearest)


def test_known_own_distances_are_returned_as_given():
    X = np.array([[0.0], [1.0], [5.0], [7.0]])
    groups, own = np.array([0, 0, 1, 1]), np.array([0, 1])
    Q = np.array([[2.0], [6.5]])
    own_distance, other_distance, other_group = nearest_own_and_other(X, groups, 2, own, Q,
                                                                      known_own=np.array([np.nan, 0.25]))
    np.testing.assert_array_equal(own_distance, [1.0, 0.25])
    np.testing.assert_array_equal(other_distance, [3.0, 5.5])
    np.testing.assert_array_equal(other_group, [1, 0])


def test_own_and_other_name_a_bad_own_group():
    X = np.zeros((4, 2))
    with pytest.raises(InvalidDataError, match=r"own groups must lie in \[0, 2\), found 0\.\.2"):
        nearest_own_and_other(X, np.array([0, 1, 0, 1]), 2, np.array([0, 2, 1, 0]))
    with pytest.raises(InvalidDataError, match=r"own must be an int array of shape \(4,\)"):
        nearest_own_and_other(X, np.array([0, 1, 0, 1]), 2, np.zeros(3, int))

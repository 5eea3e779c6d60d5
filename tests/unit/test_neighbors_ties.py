"""Exact search where distances tie: repeated rows, integer rows, and a few rows of huge norm, against the oracle."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pll.neighbors.distinct as distinct_module
from pll.data.synthetic import make_repeated_rows_table
from pll.neighbors import kneighbors, nearest_by_group
from pll.neighbors.distinct import DistinctRows
from pll.neighbors.exact import ExactIndex
from pll.neighbors.screening import Screen
from tests.oracles import nearest


def repeated_rows(rng, n, d, kind):
    """``n`` rows drawn from a few prototypes (so rows repeat), of one kind of value."""
    prototypes = {
        "binary": lambda m: rng.integers(0, 2, size=(m, d)).astype(float),
        "counts": lambda m: rng.poisson(3.0, size=(m, d)).astype(float),
        "decimal": lambda m: rng.integers(-3, 4, size=(m, d)) * 0.1,  # not exact in binary: near-ties
        "continuous": lambda m: rng.normal(size=(m, d)),
    }[kind](max(1, n // 4))
    return prototypes[rng.integers(0, len(prototypes), size=n)]


@st.composite
def tied_cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["binary", "counts", "decimal", "continuous"]))
    n, d = draw(st.integers(2, 80)), draw(st.integers(1, 6))
    X = repeated_rows(rng, n, d, kind)
    if draw(st.booleans()):  # the PL A-kNN density transform divides rows without neighbors at a distance by 1e-12
        X[rng.random(n) < 0.2] *= 1e11
    Q = None if draw(st.booleans()) else np.vstack([X[rng.integers(0, n, size=4)], repeated_rows(rng, 4, d, kind)])
    k = draw(st.integers(1, n - 1 if Q is None else n))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    return X.astype(dtype), None if Q is None else Q.astype(dtype), k


@settings(max_examples=250, deadline=None)
@given(tied_cases())
def test_exact_search_of_repeated_rows_matches_the_oracle(case):
    X, Q, k = case
    nb = kneighbors(X, Q, k)
    indices, distances = nearest(X, Q, k)
    np.testing.assert_array_equal(nb.indices, indices)
    np.testing.assert_array_equal(nb.distances, distances)


def test_a_table_of_repeated_binary_rows_matches_the_oracle_after_every_crowded_query(monkeypatch):
    """The stand-in for real bag-of-words data: hundreds of rows tie at the k-th distance."""
    rescreened = []
    original = ExactIndex._rescreen
    monkeypatch.setattr(ExactIndex, "_rescreen", lambda self, *a: rescreened.append(a[3].size) or original(self, *a))
    table = make_repeated_rows_table(1500, n_features=60, n_classes=10, n_prototypes=30, random_state=2)
    X = table.filter(like="x").to_numpy(dtype=np.float64)
    X_train, Q = X[:1200], X[1200:]
    for k in (10, 50):
        for query in (None, Q):
            nb = kneighbors(X_train, query, k)
            indices, distances = nearest(X_train, query, k)
            np.testing.assert_array_equal(nb.indices, indices)
            np.testing.assert_array_equal(nb.distances, distances)
    # The case is what it claims: rows repeat, and some crowds at the k-th place outgrow the proposals.
    assert DistinctRows(X_train).n_distinct < 800 and sum(rescreened) > 10


def test_rows_of_huge_norm_leave_the_others_certified_in_float32(monkeypatch):
    """A few rows at 1e11 must not widen every query's rounding bound (and send it to the float64 rescreen)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 8))
    X[:30] *= 1e11
    Q = rng.normal(size=(200, 8))
    rescreened = []
    original = ExactIndex._rescreen
    monkeypatch.setattr(ExactIndex, "_rescreen", lambda self, *a: rescreened.append(a[3].size) or original(self, *a))
    nb = kneighbors(X, Q, 10)
    np.testing.assert_array_equal(nb.indices, nearest(X, Q, 10)[0])
    assert sum(rescreened) <= 2


def test_integer_rows_screen_exactly_and_others_do_not():
    rng = np.random.default_rng(1)
    X = rng.integers(0, 5, size=(50, 7)).astype(np.float32)
    screen = Screen(X)
    B, sq_q, gamma = screen.queries(np.vstack([X[:3], X[:1] + 0.5]))
    assert screen.integral and gamma.tolist()[:3] == [0.0] * 3 and gamma[3] > 0
    values = B[:3].astype(np.float64) @ screen.rows.T.astype(np.float64)
    exact = ((X[None, :] - X[:3, None]) ** 2).sum(-1) - sq_q[:3, None]
    np.testing.assert_array_equal(values, exact)  # what float32 BLAS must reproduce bit for bit
    assert not Screen(X + 0.25).integral
    # Integers too large for float32's mantissa are screened as any other rows.
    big = Screen(X * 2.0**12)
    assert big.integral and (big.queries(X[:2] * 2.0**12)[2] > 0).all()


def test_distinct_rows_group_identical_rows_by_first_occurrence():
    X = np.array([[1.0, 2.0], [0.0, 0.0], [1.0, 2.0], [0.0, 0.0], [3.0, 1.0], [1.0, 2.0]])
    rows = DistinctRows(X)
    assert rows.first.tolist() == [0, 1, 4]
    assert [rows.members[a:b].tolist() for a, b in zip(rows.offsets, rows.offsets[1:])] == [[0, 2, 5], [1, 3], [4]]
    assert rows.of_row.tolist() == [0, 1, 0, 1, 2, 0]
    # A query excluding row 4 skips its distinct row (alone); excluding row 2 leaves rows 0 and 5 of its row.
    assert rows.excluded(np.array([4, 2, -1])).tolist() == [2, -1, -1]


def test_distinct_rows_survive_hash_collisions(monkeypatch):
    """Rows are compared byte by byte: a hash that always collides still groups only identical rows."""
    monkeypatch.setattr(distinct_module, "_row_hashes", lambda words: np.zeros(words.shape[0], dtype=np.uint64))
    rng = np.random.default_rng(4)
    X = rng.integers(0, 3, size=(200, 2)).astype(float)
    rows = DistinctRows(X)
    _, first, inverse = np.unique(X, axis=0, return_index=True, return_inverse=True)
    assert rows.n_distinct == first.size
    np.testing.assert_array_equal(rows.first[rows.of_row], first[inverse.ravel()])


@pytest.mark.parametrize("integer", [True, False])
def test_nearest_row_per_group_of_repeated_rows_matches_the_oracle(integer):
    rng = np.random.default_rng(5)
    X = repeated_rows(rng, 400, 5, "binary" if integer else "decimal")
    X[rng.random(400) < 0.05] *= 1e11
    groups = rng.integers(0, 4, size=400)
    Q = np.vstack([X[:20], repeated_rows(rng, 20, 5, "binary" if integer else "decimal")])
    for query in (None, Q):
        indices, distances = nearest_by_group(X, groups, 4, query)
        order, dist = nearest(X, query)
        for g in range(4):
            first = np.argmax(groups[order] == g, axis=1)
            np.testing.assert_array_equal(indices[:, g], order[np.arange(order.shape[0]), first])
            np.testing.assert_array_equal(distances[:, g], dist[np.arange(order.shape[0]), first])


def test_nndescent_indexes_each_distinct_row_once_and_expands_copies_by_index():
    """Repeated rows would fill pynndescent's graph with zero distances; the index holds each row once."""
    table = make_repeated_rows_table(3000, n_features=40, n_classes=10, n_prototypes=60, random_state=3)
    X = table.filter(like="x").to_numpy(dtype=np.float64)
    X_train, Q = X[:2500], X[2500:]
    for query in (None, Q):
        nb = kneighbors(X_train, query, 10, backend="nndescent", recall_sample=0)
        indices, distances = nearest(X_train, query, 10)
        assert np.mean(nb.distances <= distances[:, -1:]) >= 0.97  # recall@10, any tied row a hit
        assert (nb.distances == distances).all(axis=1).mean() > 0.9  # whole lists at the exact distances
    # A row's own copies are its nearest neighbors, in index order.
    rows = DistinctRows(X_train)
    nb = kneighbors(X_train, None, 10, backend="nndescent", recall_sample=0)
    for r in range(X_train.shape[0]):
        group = rows.members[rows.offsets[rows.of_row[r]] : rows.offsets[rows.of_row[r] + 1]]
        copies = group[group != r][:10]
        np.testing.assert_array_equal(nb.indices[r, : copies.size], copies)

"""The approximate nearest row per group of ``auto`` at scale: cells searched exactly, never below the exact distance."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pll.data.synthetic import make_partial_label_table
from pll.neighbors import nearest_by_group
from pll.neighbors.exact import rounding_bound
from pll.neighbors.grouped_cells import GroupedCellIndex
from tests.unit.test_neighbors_grouped import oracle


@st.composite
def cases(draw):
    """Up to 200 continuous rows in up to 4 groups, cells of a few rows, queries new or the rows themselves."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n, d, n_groups = draw(st.integers(1, 200)), draw(st.integers(1, 5)), draw(st.integers(1, 4))
    X = rng.normal(size=(n, d))
    groups = rng.integers(-1, n_groups, size=n)
    Q = rng.normal(size=(draw(st.integers(1, 15)), d)) if draw(st.booleans()) else None
    return X, groups, n_groups, Q, draw(st.integers(1, 20)), draw(st.integers(1, 4))


def search(X, groups, n_groups, Q, cell_rows, n_probe):
    queries, exclude = (X, np.arange(X.shape[0])) if Q is None else (Q, np.full(Q.shape[0], -1))
    return GroupedCellIndex(X, groups, n_groups, cell_rows=cell_rows, n_probe=n_probe).search(queries, exclude)


@settings(max_examples=150, deadline=None)
@given(cases())
def test_never_nearer_than_the_exact_row_and_exact_when_every_cell_is_probed(case):
    X, groups, n_groups, Q, cell_rows, n_probe = case
    expected_indices, expected = oracle(X, groups, n_groups, Q)
    indices, distances = search(X, groups, n_groups, Q, cell_rows, n_probe)
    # A group is found exactly when it has rows to offer; its distance is that of the row returned.
    np.testing.assert_array_equal(indices >= 0, expected_indices >= 0)
    found = indices >= 0
    assert np.all(distances[found] >= expected[found] * (1 - 1e-12))
    queries = X if Q is None else Q
    rows = np.nonzero(found)
    np.testing.assert_allclose(distances[found], np.linalg.norm(queries[rows[0]] - X[indices[found]], axis=1),
                               rtol=1e-12, atol=1e-12)
    if Q is None:
        assert not (indices == np.arange(X.shape[0])[:, None]).any()  # a row is never its own nearest
    # Every cell probed: the exact row, but for rows the float32 screening cannot tell apart.
    everything = search(X, groups, n_groups, Q, cell_rows, n_probe=X.shape[0])
    members = X[groups >= 0]
    if members.size:
        center = members.mean(axis=0)
        sq_q = ((queries - center) ** 2).sum(axis=1)
        bound = 2 * rounding_bound(sq_q, ((members - center) ** 2).sum(axis=1).max(), X.shape[1], np.float32)
        assert np.all(everything[1][found] ** 2 <= expected[found] ** 2 + np.broadcast_to(bound[:, None], found.shape)[found])


def test_on_overlapping_classes_it_finds_the_exact_row_for_nearly_every_query():
    table = make_partial_label_table(12_000, random_state=1)
    X = table[[c for c in table.columns if c.startswith("x")]].to_numpy(np.float64)
    groups = table["label"].astype(int).to_numpy()
    X_train, Q = X[:10_000], X[10_000:]
    exact = nearest_by_group(X_train, groups[:10_000], 20, Q)
    cells = GroupedCellIndex(X_train, groups[:10_000], 20, cell_rows=128).search(Q, np.full(len(Q), -1))
    assert (cells[0] == exact[0]).mean() > 0.9
    assert np.median(cells[1] / exact[1]) == 1.0


def test_empty_groups_give_no_row():
    X = np.arange(10.0)[:, None]
    groups = np.array([0] * 5 + [-1] * 5)
    indices, distances = GroupedCellIndex(X, groups, 3, cell_rows=2, n_probe=1).search(np.array([[4.4]]), np.array([-1]))
    assert indices[0, 0] == 4 and distances[0, 0] == pytest.approx(0.4, rel=1e-12)
    assert indices[0, 1:].tolist() == [-1, -1] and np.isinf(distances[0, 1:]).all()


@settings(max_examples=150, deadline=None)
@given(cases(), st.integers(0, 2**32 - 1))
def test_own_and_other_never_nearer_than_exact_and_exact_when_every_cell_is_probed(case, seed):
    X, groups, n_groups, Q, cell_rows, n_probe = case
    _, expected = oracle(X, groups, n_groups, Q)
    queries, exclude = (X, np.arange(X.shape[0])) if Q is None else (Q, np.full(Q.shape[0], -1))
    own = np.random.default_rng(seed).integers(0, n_groups, size=queries.shape[0])
    rows = np.arange(own.size)
    others = expected.copy()
    others[rows, own] = np.inf
    exact = np.column_stack([expected[rows, own], others.min(axis=1)])
    for probe in (n_probe, X.shape[0]):
        index = GroupedCellIndex(X, groups, n_groups, cell_rows=cell_rows, n_probe=probe)
        indices, distances = index.search_own_and_other(queries, exclude, own)
        # Queries that need no own row search the other groups alike and leave the own slot empty.
        need_own = np.random.default_rng(seed + 1).random(own.size) < 0.5
        partial = index.search_own_and_other(queries, exclude, own, need_own=need_own)
        np.testing.assert_array_equal(partial[0][:, 1], indices[:, 1])
        np.testing.assert_array_equal(partial[0][need_own, 0], indices[need_own, 0])
        assert (partial[0][~need_own, 0] == -1).all() and np.isinf(partial[1][~need_own, 0]).all()
        # A slot is filled exactly when the exact search has a row for it, with that row's true distance.
        np.testing.assert_array_equal(indices >= 0, np.isfinite(exact))
        found = indices >= 0
        assert np.all(distances[found] >= exact[found] * (1 - 1e-12))
        np.testing.assert_allclose(distances[found],
                                   np.linalg.norm(queries[np.nonzero(found)[0]] - X[indices[found]], axis=1),
                                   rtol=1e-12, atol=1e-12)
        assert np.all(groups[indices[:, 0][found[:, 0]]] == own[found[:, 0]])
        assert np.all(groups[indices[:, 1][found[:, 1]]] != own[found[:, 1]])
        assert not (found & (indices == exclude[:, None])).any()
    # Every cell probed: exact but for rows the float32 screening cannot tell apart.
    members = X[groups >= 0]
    if members.size:
        center = members.mean(axis=0)
        sq_q = ((queries - center) ** 2).sum(axis=1)
        bound = 2 * rounding_bound(sq_q, ((members - center) ** 2).sum(axis=1).max(), X.shape[1], np.float32)
        assert np.all((distances**2 <= exact**2 + bound[:, None])[found])


def test_own_and_other_on_well_separated_classes_find_the_exact_distances():
    """The scale table's classes lie apart: a query's nearest other row is far, in a cell near it all the same."""
    table = make_partial_label_table(12_000, random_state=1)
    X = table[[c for c in table.columns if c.startswith("x")]].to_numpy(np.float64)
    groups = table["label"].astype(int).to_numpy()
    X_train, Q, own = X[:10_000], X[10_000:], groups[10_000:]
    _, exact = nearest_by_group(X_train, groups[:10_000], 20, Q)
    rows = np.arange(own.size)
    others = exact.copy()
    others[rows, own] = np.inf
    index = GroupedCellIndex(X_train, groups[:10_000], 20, cell_rows=128, n_probe=8)
    _, distances = index.search_own_and_other(Q, np.full(own.size, -1), own)
    assert np.mean(distances[:, 0] == exact[rows, own]) > 0.9
    assert np.mean(distances[:, 1] == others.min(axis=1)) > 0.9

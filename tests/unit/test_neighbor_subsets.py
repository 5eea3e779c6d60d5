"""Neighbors among a subset read from lists over all rows (pll.neighbors.subsets), and their use by the hold-out split."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pll
from pll.errors import InvalidParameterError, NeighborsError
from pll.experiment import calibration_split, make_split
from pll.preprocessing import PlAknnPreprocessor, featurize, shares_fit_neighbors
from pll.neighbors.subsets import own_neighbors_from, restrict_neighbors, subset_list_length
from tests.oracles import nearest


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(12, 60), st.integers(1, 6), st.floats(0.3, 0.95))
def test_restricted_lists_are_the_subsets_own_nearest_rows(seed, n, k, fraction):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)).round(1)  # rounding makes ties, which must break alike
    subset = np.flatnonzero(rng.random(n) < fraction)
    if subset.size <= k:
        return
    length = subset_list_length(k, subset.size / n, n)
    full, _ = nearest(X, None, length)
    got = restrict_neighbors(full, subset, k)
    expected, _ = nearest(X[subset], None, k)
    found = (got >= 0).all(axis=1)
    np.testing.assert_array_equal(got[found], expected[found])  # where a list held k subset rows: exact
    assert np.all(got[~found][:, -1] == -1)
    # a list of every row always holds them
    np.testing.assert_array_equal(restrict_neighbors(nearest(X)[0], subset, k), expected)


def test_list_length_holds_k_subset_rows_with_high_probability():
    assert subset_list_length(10, 0.8, 10**6) == 22
    assert subset_list_length(10, 1.0, 10**6) == 10
    assert subset_list_length(10, 0.5, 30) == 29  # capped by the rows
    for k, f in [(10, 0.8), (10, 0.5), (3, 0.2), (50, 0.9)]:
        L = subset_list_length(k, f, 10**9)
        short = sum(math.comb(L, j) * f**j * (1 - f) ** (L - j) for j in range(k))  # P(Binomial(L, f) < k)
        assert short < 1e-3, (k, f, L, short)
    with pytest.raises(ValueError, match="fraction"):
        subset_list_length(10, 0.0, 100)


def test_given_lists_become_the_exact_result_and_short_rows_are_searched():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 4))
    exact = pll.neighbors.kneighbors(X, None, 5)
    given_lists = exact.indices[:, ::-1].copy()  # any order: reranked
    given_lists[[2, 7], 3] = -1  # two rows short: searched exactly
    nb = own_neighbors_from(X, given_lists, 5)
    np.testing.assert_array_equal(nb.indices, exact.indices)
    np.testing.assert_array_equal(nb.distances, exact.distances)
    assert nb.self_excluded
    with pytest.raises(NeighborsError, match="own neighbor"):
        own_neighbors_from(X, np.arange(50)[:, None].repeat(5, 1), 5)
    with pytest.raises(NeighborsError, match="cannot give"):
        own_neighbors_from(X, exact.indices[:, :3], 5)
    with pytest.raises(NeighborsError, match="outside"):
        own_neighbors_from(X, exact.indices + 50, 5)


def test_a_fit_on_a_subset_given_the_full_fits_neighbors_equals_one_that_searched():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6)) ** 3
    subset = np.sort(rng.choice(300, 240, replace=False))
    full = PlAknnPreprocessor(smooth_k=10, density_k=30)
    plain = PlAknnPreprocessor(smooth_k=10, density_k=30).fit_transform(X)
    np.testing.assert_array_equal(full.fit_transform(X, subset=subset), plain)  # the longer search changes nothing
    assert full.subset_neighbors_.shape == (240, 10)
    shared = PlAknnPreprocessor(smooth_k=10, density_k=30)
    searched = PlAknnPreprocessor(smooth_k=10, density_k=30)
    np.testing.assert_array_equal(shared.fit_transform(X[subset], neighbors=full.subset_neighbors_),
                                  searched.fit_transform(X[subset]))
    np.testing.assert_array_equal(shared.smoothed_, searched.smoothed_)
    np.testing.assert_array_equal(shared.transform(X[:20]), searched.transform(X[:20]))
    assert PlAknnPreprocessor().fit(X).subset_neighbors_ is None


def test_only_a_projection_fitted_on_nothing_shares_its_neighbors():
    X = np.random.default_rng(1).normal(size=(40, 6))
    assert PlAknnPreprocessor("real-world").projection_is_fixed and not PlAknnPreprocessor("vision").projection_is_fixed
    assert shares_fit_neighbors("pl_aknn_real(density_k=20)")
    assert not shares_fit_neighbors("pl_aknn_vision") and not shares_fit_neighbors("minmax")
    with pytest.raises(InvalidParameterError, match="variant='vision'"):
        PlAknnPreprocessor("vision", smooth_k=3, density_k=5).fit(X, subset=np.arange(20))
    with pytest.raises(InvalidParameterError, match="not both"):
        PlAknnPreprocessor(smooth_k=3).fit(X, neighbors=np.zeros((40, 3), int), subset=np.arange(20))
    with pytest.raises(InvalidParameterError, match="sorted distinct"):
        PlAknnPreprocessor(smooth_k=3).fit(X, subset=np.array([5, 2, 9]))


@pytest.mark.parametrize("features", ["pl_aknn_real(density_k=20)", "minmax", "pl_aknn_vision(n_components=3)"])
def test_the_hold_out_split_is_the_same_with_the_full_splits_neighbors(features):
    ds = pll.load_dataset("iris")
    rows = make_split(ds.n_rows, 4)
    split = featurize(ds, rows.train, rows.test, features, subset=rows.fit)
    assert (split.subset_neighbors is not None) == shares_fit_neighbors(features)
    shared = calibration_split(ds, rows, features, 5, "exact", None, split.subset_neighbors)
    searched = calibration_split(ds, rows, features, 5, "exact")
    np.testing.assert_array_equal(shared.split.X_train, searched.split.X_train)
    np.testing.assert_array_equal(shared.split.X_test, searched.split.X_test)
    np.testing.assert_array_equal(shared.test.indices, searched.test.indices)

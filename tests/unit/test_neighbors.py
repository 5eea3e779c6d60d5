"""Neighbor search: exact against a brute-force oracle, nndescent's recall, options, bad input, run metrics."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_blobs

import pll.neighbors.exact as exact_module
import pll.neighbors.auto as auto_module
import pll.neighbors.screening as screening_module
from pll.errors import InvalidDataError, InvalidParameterError, NeighborsError, PllError
from pll.neighbors import NeighborIndex, kneighbors
from pll.neighbors.recall import measure_recall
from tests.oracles import distances as oracle_distances
from tests.oracles import nearest


@st.composite
def grid_case(draw):
    """Integer coordinates: many exact ties and duplicates, and exactly representable distances."""
    n = draw(st.integers(2, 30))
    d = draw(st.integers(1, 4))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    X = np.array(draw(st.lists(st.integers(-2, 2), min_size=n * d, max_size=n * d)), dtype=dtype).reshape(n, d)
    self_excluded = draw(st.booleans())
    if self_excluded:
        Q = None
        k = draw(st.integers(1, n - 1))
    else:
        m = draw(st.integers(1, 8))
        Q = np.array(draw(st.lists(st.integers(-2, 2), min_size=m * d, max_size=m * d)), dtype=dtype).reshape(m, d)
        k = draw(st.integers(1, n))
    return X, Q, k


@settings(max_examples=150, deadline=None)
@given(grid_case())
def test_exact_matches_the_oracle_with_ties_and_duplicates(case):
    X, Q, k = case
    nb = kneighbors(X, Q, k)
    indices, distances = nearest(X, Q, k)
    np.testing.assert_array_equal(nb.indices, indices)
    np.testing.assert_array_equal(nb.distances, distances)
    assert nb.recall is None and nb.backend == "exact" and nb.self_excluded == (Q is None)


def test_exact_on_continuous_data_matches_the_oracle():
    rng = np.random.default_rng(3)
    X, Q = rng.normal(size=(300, 5)), rng.normal(size=(40, 5))
    for query in (None, Q):
        nb = kneighbors(X, query, 7)
        indices, distances = nearest(X, query, 7)
        np.testing.assert_array_equal(nb.indices, indices)
        np.testing.assert_allclose(nb.distances, distances, rtol=1e-12)


def test_rounding_of_the_blas_expansion_does_not_reorder_neighbors():
    """Far from the origin |q|^2 + |x|^2 - 2 q.x cancels badly in float32; the result must not show it."""
    rng = np.random.default_rng(0)
    X = (1000.0 + rng.normal(scale=1e-2, size=(500, 3))).astype(np.float32)
    nb = kneighbors(X, None, 5)
    indices, distances = nearest(X, None, 5)
    np.testing.assert_array_equal(nb.indices, indices)
    np.testing.assert_array_equal(nb.distances, distances)


def test_identical_rows_give_the_lowest_other_indices_at_distance_zero():
    X = np.ones((40, 3), dtype=np.float32)
    nb = kneighbors(X, None, 39)
    for i in range(40):
        assert nb.indices[i].tolist() == [j for j in range(40) if j != i]
    assert not nb.distances.any()


def test_duplicate_of_a_row_stays_its_neighbor_but_the_row_itself_does_not():
    X = np.array([[0.0, 0.0], [5.0, 5.0], [0.0, 0.0], [1.0, 0.0]])
    nb = kneighbors(X, None, 3)
    assert nb.indices.tolist()[0] == [2, 3, 1]
    assert nb.indices.tolist()[2] == [0, 3, 1]
    assert nb.distances[0, 0] == 0.0


def test_k_equal_to_all_other_rows():
    rng = np.random.default_rng(1)
    X = rng.integers(0, 3, size=(25, 2)).astype(float)
    nb = kneighbors(X, None, 24)
    indices, _ = nearest(X, None, 24)
    np.testing.assert_array_equal(nb.indices, indices)
    assert all(sorted(row) == [j for j in range(25) if j != i] for i, row in enumerate(nb.indices.tolist()))


def test_blocking_does_not_change_the_result(monkeypatch):
    rng = np.random.default_rng(2)
    X = rng.integers(0, 4, size=(200, 3)).astype(np.float32)
    whole = kneighbors(X, None, 6)
    monkeypatch.setattr(exact_module, "_BLOCK_BYTES", 2000)
    monkeypatch.setattr(exact_module, "_CHUNK_BYTES", 500)
    monkeypatch.setattr(screening_module, "TILE_ROWS", 7)
    monkeypatch.setattr(screening_module, "QUERY_BLOCK", 5)
    blocked = kneighbors(X, None, 6)
    np.testing.assert_array_equal(blocked.indices, whole.indices)
    np.testing.assert_array_equal(blocked.distances, whole.distances)


def test_screening_keeps_each_querys_smallest_values_in_order(monkeypatch):
    monkeypatch.setattr(screening_module, "TILE_ROWS", 13)
    monkeypatch.setattr(screening_module, "QUERY_BLOCK", 4)
    rng = np.random.default_rng(3)
    X, Q = rng.normal(size=(100, 5)), rng.normal(size=(9, 5))
    center = X.mean(axis=0)
    A, _ = screening_module.screening_rows(X, center)
    B, _ = screening_module.screening_queries(Q, center)
    exclude = np.array([0, 5, -1, 99, 13, -1, 50, 7, 1])
    values, indices = screening_module.smallest(A, B, 12, exclude)
    full = (B.astype(np.float64) @ A.T.astype(np.float64))
    full[np.arange(9)[exclude >= 0], exclude[exclude >= 0]] = np.inf
    np.testing.assert_allclose(values, np.sort(full, axis=1)[:, :12], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.take_along_axis(full, indices, 1), values, rtol=1e-5, atol=1e-5)
    assert (np.diff(values, axis=1) >= 0).all() and not (indices == exclude[:, None]).any()


@pytest.fixture(scope="module")
def blobs():
    """800 training rows: more than one random-projection leaf (250 rows), so pynndescent builds a real graph."""
    X, _ = make_blobs(n_samples=900, n_features=8, centers=12, cluster_std=1.0, random_state=0)
    X = X.astype(np.float32)
    X[799] = X[7]  # an exact duplicate inside the training rows
    return X[:800], X[800:]


@pytest.fixture(scope="module")
def nndescent_results(blobs):
    """Its time is pynndescent's compilation (about 30 s in a fresh process), not the search."""
    X, Q = blobs
    with NeighborIndex(X, 10, "nndescent", recall_sample=500) as index:
        return index.kneighbors(None), index.kneighbors(Q)


def test_nndescent_recall_is_measured_and_high_on_clustered_data(blobs, nndescent_results):
    X, Q = blobs
    own, new = nndescent_results
    exact_own, exact_new = kneighbors(X, None, 10), kneighbors(X, Q, 10)
    for approx, exact in ((own, exact_own), (new, exact_new)):
        assert approx.backend == "nndescent" and approx.indices.shape == exact.indices.shape
        # The reported recall is the recall measured independently on the same sample ...
        assert approx.recall == pytest.approx(
            measure_recall(X, Q if not approx.self_excluded else X, approx.distances,
                           self_excluded=approx.self_excluded, sample=500, random_state=0)
        )
        # ... and on every row it is high.
        hits = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(approx.indices, exact.indices)])
        assert hits >= 0.98 and approx.recall >= 0.98
    assert set(own.timings) == {"build", "query", "recall"}


def test_nndescent_self_neighbors_exclude_the_row_keep_its_duplicate_and_are_reranked(blobs, nndescent_results):
    X, _ = blobs
    own, _ = nndescent_results
    assert not (own.indices == np.arange(len(X))[:, None]).any()
    assert (own.indices[7, 0], own.distances[7, 0]) == (799, 0.0)
    assert (own.indices[799, 0], own.distances[799, 0]) == (7, 0.0)
    # Distances recomputed in float64 and ordered by (distance, index), as exact search orders them.
    np.testing.assert_allclose(own.distances, np.take_along_axis(oracle_distances(X, X), own.indices, 1), rtol=1e-12)
    order = np.lexsort((own.indices, own.distances), axis=1)
    np.testing.assert_array_equal(order, np.broadcast_to(np.arange(10), order.shape))


def test_a_wide_search_in_a_graph_thinner_than_it_takes_the_wide_breadth(blobs):
    """A user's ``n_neighbors`` may leave the graph narrow while a search is wide: the search still runs."""
    from pll.neighbors.nndescent import QUERY_BREADTH, query_defaults

    assert query_defaults(40, 20) == query_defaults(40, 42) == (40 + QUERY_BREADTH[True, True][0], QUERY_BREADTH[True, True][1])
    X, Q = blobs
    with NeighborIndex(X, 40, "nndescent", n_neighbors=20, recall_sample=0) as index:
        assert index.kneighbors(Q, 40).indices.shape == (len(Q), 40)


def test_recall_counts_tied_neighbors_as_hits():
    X = np.array([[0.0], [1.0], [-1.0], [5.0]])
    Q = np.array([[0.0]])
    # Row 2 is as near as row 1: returning it instead is no miss.
    assert measure_recall(X, Q, np.array([[0.0, 1.0]]), self_excluded=False) == 1.0
    assert measure_recall(X, Q, np.array([[0.0, 5.0]]), self_excluded=False) == 0.5


def test_auto_picks_exact_for_small_and_nndescent_for_large(monkeypatch, blobs):
    X, Q = blobs
    assert kneighbors(X, Q, 5, "auto").backend == "exact"
    monkeypatch.setattr(auto_module, "AUTO_EXACT_MAX_ROWS", 500)
    nb = kneighbors(X, Q, 5, "auto", recall_sample=200)
    assert nb.backend == "nndescent" and nb.recall is not None


def test_an_index_serves_several_queries_up_to_its_k(blobs):
    X, Q = blobs
    with NeighborIndex(X[:500], 8) as index:
        a, b = index.kneighbors(Q[:20]), index.kneighbors(Q[:20], 3)
        np.testing.assert_array_equal(a.indices[:, :3], b.indices)
        with pytest.raises(NeighborsError, match="k=9 exceeds the k=8"):
            index.kneighbors(Q, 9)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda X: kneighbors(X, None, 20), NeighborsError, "k=20 exceeds the 19 training rows"),
        (lambda X: kneighbors(X, X[:3], 21), NeighborsError, "k=21 exceeds the 20 training rows"),
        (lambda X: kneighbors(X, None, 0), InvalidParameterError, "k must be a positive integer"),
        (lambda X: kneighbors(X, None, 2.5), InvalidParameterError, "k must be a positive integer"),
        (lambda X: kneighbors(X, X[:, :2], 3), InvalidDataError, "query rows have 2 features but training rows have 3"),
        (lambda X: kneighbors(np.vstack([X, [[np.nan, 0, 0]]]), None, 3), InvalidDataError, "first at row 20"),
        (lambda X: kneighbors(X, np.array([[0, np.inf, 0]]), 3), InvalidDataError, "query rows: 1 row"),
        (lambda X: kneighbors(X[0], None, 3), InvalidDataError, "2-d array"),
        (lambda X: kneighbors(X, None, 3, "annoy"), InvalidParameterError, "unknown kNN backend 'annoy'"),
        (lambda X: kneighbors(X, None, 3, "exact", n_trees=3), InvalidParameterError, "no option 'n_trees'"),
        (lambda X: kneighbors(X, None, 3, "nndescent", trees=3), InvalidParameterError, "no option 'trees'"),
        (lambda X: kneighbors(X, None, 3, recall_sample=-1), InvalidParameterError, "recall_sample"),
        (lambda X: kneighbors(X, None, 3, "dask", shard_backend="hnsw"), InvalidParameterError, "shard_backend"),
    ],
)
def test_bad_input_raises_typed_errors(call, error, message):
    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(error, match=message) as info:
        call(X)
    assert isinstance(info.value, PllError)


def test_a_runs_neighbor_metrics_sum_the_phases_and_keep_the_lowest_recall(nndescent_results):
    """What the pipeline logs for its neighbor stage, computed by the library (tasks.neighbors only logs it)."""
    from pll.experiment import NeighborSet, neighbor_metrics

    own, new = nndescent_results
    metrics = neighbor_metrics("minmax", NeighborSet(train=own, test=new, val=new))
    assert metrics["knn.minmax.recall"] == min(own.recall, new.recall)
    assert metrics["knn.minmax.train.recall"] == own.recall and metrics["knn.minmax.test.recall"] == new.recall
    # The timings are the sums of the measured phases (a consistency check, not a speed assertion).
    assert metrics["knn.minmax.build_seconds"] == pytest.approx(own.timings["build"] + new.timings["build"])
    assert metrics["knn.minmax.query_seconds"] == pytest.approx(own.timings["query"] + 2 * new.timings["query"])

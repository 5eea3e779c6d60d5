"""Sharded neighbor search on a real Dask LocalCluster: equal to exact search, even when a worker dies.

The nndescent shards run on a cluster of worker threads in this process: pynndescent compiles here
once, not for most of a minute in each worker process (``tests/e2e/test_backends_end_to_end.py`` runs
them on worker processes, through the command line).
"""

import os
import signal

import numpy as np
import pytest
from sklearn.datasets import make_blobs

import pll.neighbors.recall as recall_module
from pll.neighbors import kneighbors
from pll.neighbors.exact import exact_kneighbors
from pll.neighbors.sharded import ShardedIndex
from tests.oracles import nearest


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster, set_as_default=False) as client:
            yield cluster, client


@pytest.fixture(scope="module")
def threads():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        with Client(cluster, set_as_default=False) as client:
            yield client


@pytest.fixture(scope="module")
def data():
    X, _ = make_blobs(n_samples=2400, n_features=6, centers=8, random_state=1)
    X = np.round(X, 1).astype(np.float32)  # coarse values: ties and duplicates across shards
    return X[:2000], X[2000:]


def test_exact_shards_equal_exact_search(cluster, data):
    _, client = cluster
    X, Q = data
    for query in (None, Q):
        sharded = kneighbors(X, query, 9, "dask", client=client, n_shards=3, block_rows=150)
        exact = kneighbors(X, query, 9)
        np.testing.assert_array_equal(sharded.indices, exact.indices)
        np.testing.assert_array_equal(sharded.distances, exact.distances)
        assert sharded.backend == "dask" and sharded.recall is None and sharded.self_excluded == (query is None)


def test_address_option_connects_to_an_existing_scheduler(cluster, data):
    local, _ = cluster
    X, Q = data
    nb = kneighbors(X, Q[:50], 4, "dask", address=local.scheduler_address, n_shards=2)
    np.testing.assert_array_equal(nb.indices, kneighbors(X, Q[:50], 4).indices)


def test_nndescent_shards_report_their_measured_recall(threads, data):
    X, Q = data
    nb = kneighbors(X, Q, 5, "dask", client=threads, shard_backend="nndescent", n_neighbors=15, recall_sample=200)
    exact = kneighbors(X, Q, 5)
    hits = np.mean([len(set(a) & set(b)) / 5 for a, b in zip(nb.indices, exact.indices)])
    assert nb.recall is not None and nb.recall >= 0.95 and hits >= 0.95
    assert (np.diff(nb.distances, axis=1) >= 0).all()


def test_trust_score_on_dask_shards_equals_the_exact_one(cluster, data):
    import pll

    _, client = cluster
    X, Q = data
    y = np.arange(len(X)) % 3
    predicted = np.arange(len(Q)) % 3
    sharded = pll.TrustScore(knn="dask", knn_options={"client": client, "n_shards": 2}).fit(X, y)
    exact = pll.TrustScore().fit(X, y)
    np.testing.assert_array_equal(sharded.score(Q, predicted), exact.score(Q, predicted))
    np.testing.assert_array_equal(sharded.score_training(), exact.score_training())


def test_a_set_smaller_than_the_shard_count_is_searched_in_fewer_shards(cluster, data):
    _, client = cluster
    X, Q = data
    for rows, n_shards in ((1, None), (3, 8)):
        nb = kneighbors(X[:rows], Q[:5], 1, "dask", client=client, n_shards=n_shards)
        np.testing.assert_array_equal(nb.indices, exact_kneighbors(X[:rows], Q[:5], 1)[0])


def test_nndescent_shards_escalate_to_the_target_against_brute_force(monkeypatch, threads):
    """The shards search wider, then rebuild thicker, as one index, until they keep ``target_recall``."""
    measured = recall_module.RecallProbe.__init__

    def priced(self, *args, **kwargs):  # exact search priced far above any step: escalation runs its course
        measured(self, *args, **kwargs)
        self.seconds_per_query = 1.0

    monkeypatch.setattr(recall_module.RecallProbe, "__init__", priced)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 256))  # no cluster structure: the shards' defaults fall short
    nb = kneighbors(X, None, 10, "dask", client=threads, n_shards=2, shard_backend="nndescent",
                    recall_sample=300, target_recall=0.97, n_trees=2, leaf_size=30)
    assert nb.backend == "dask" and nb.effort["steps"] >= 1 and nb.recall >= 0.97
    rows = rng.choice(len(X), 100, replace=False)
    kth = np.concatenate([nearest(X, X[part], 11)[1][:, -1] for part in np.array_split(rows, 20)])
    assert (nb.distances[rows] <= kth[:, None]).mean() >= 0.95


@pytest.mark.parametrize("victims", ["the first shard's worker", "every worker"])
def test_killing_workers_mid_query_still_gives_the_exact_result(cluster, data, victims):
    """Every value on a killed worker is gone (Dask keeps no spare copy for long): the client sends the
    query block and the shard's rows again, and the index rebuilds the shard."""
    _, client = cluster
    X, _ = data
    index = ShardedIndex(X, 7, client=client, n_shards=4, block_rows=40)
    try:
        blocks = index.iter_search(X, 7, np.arange(len(X)))
        first = next(blocks)  # the query is under way: one block merged, 49 to go
        pids = client.run(os.getpid)
        holders = pids if victims == "every worker" else client.who_has(index.shards[0])[index.shards[0].key]
        killed = {pids[worker] for worker in holders}
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        parts = [first, *blocks]
    finally:
        index.close()
    indices = np.empty((len(X), 7), dtype=np.int64)
    distances = np.empty((len(X), 7))
    for rows, idx, dist in parts:
        indices[rows], distances[rows] = idx, dist
    assert sum(p[1].shape[0] for p in parts) == len(X)
    assert killed.isdisjoint(client.run(os.getpid).values())  # they really died (their nannies restarted them)
    expected = exact_kneighbors(X, X, 7, exclude=np.arange(len(X)))
    np.testing.assert_array_equal(indices, expected[0])
    np.testing.assert_array_equal(distances, expected[1])

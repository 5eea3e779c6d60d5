"""Dask with nndescent shards keeps target_recall: the shards search wider, then rebuild thicker, as one index."""

import numpy as np
import pytest

import pll.neighbors.recall as recall_module
from tests.oracles import nearest


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster, set_as_default=False) as client:
            yield client


def test_nndescent_shards_escalate_to_the_target_against_brute_force(monkeypatch, client):
    from pll.neighbors import kneighbors

    measured = recall_module.RecallProbe.__init__

    def priced(self, *args, **kwargs):  # exact search priced far above any step: escalation runs its course
        measured(self, *args, **kwargs)
        self.seconds_per_query = 1.0

    monkeypatch.setattr(recall_module.RecallProbe, "__init__", priced)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 256))  # no cluster structure: the shards' defaults fall short
    nb = kneighbors(X, None, 10, "dask", client=client, n_shards=2, shard_backend="nndescent",
                    recall_sample=300, target_recall=0.97, n_trees=2, leaf_size=30)
    assert nb.backend == "dask" and nb.effort["steps"] >= 1 and nb.recall >= 0.97
    rows = rng.choice(len(X), 100, replace=False)
    kth = np.concatenate([nearest(X, X[part], 11)[1][:, -1] for part in np.array_split(rows, 20)])
    assert (nb.distances[rows] <= kth[:, None]).mean() >= 0.95

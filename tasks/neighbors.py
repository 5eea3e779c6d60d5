"""Neighbor stage: :func:`pll.experiment.find_neighbors` as a cached Prefect task, and its logging."""

from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE

from pll import experiment
from pll.experiment import NeighborSet
from tasks.caching import CACHED, RETRIES
from tasks.progress import logged_progress
from tasks.tracking import log_metrics


@task(name="neighbors", **CACHED, **RETRIES, task_run_name="neighbors-{split.features}")
def find_neighbors(split, rows, k: int, backend: str, options: dict | None) -> NeighborSet:
    """``k`` neighbors for every query set of the split (validation indices refer to ``rows.fit``)."""
    with logged_progress():
        return experiment.find_neighbors(split, rows, k, backend, options)


@task(name="log-neighbors", cache_policy=NO_CACHE, task_run_name="log-neighbors-{features}")
def log_neighbors(tracking_uri: str, run_id: str, features: str, neighbors: NeighborSet):
    """Log the neighbor stage of one feature pipeline: backend used, seconds, recall."""
    client = MlflowClient(tracking_uri)
    client.log_param(run_id, f"knn.{features}.backend", neighbors.train.backend)
    log_metrics(client, run_id, experiment.neighbor_metrics(features, neighbors))

"""Neighbor stage: one kNN computation per split and feature pipeline, shared by every method."""

from dataclasses import dataclass

from prefect import task

from pll.neighbors import NeighborResult, kneighbors
from tasks.caching import CACHED, RETRIES


@dataclass(frozen=True)
class NeighborSet:
    """Neighbors of one split: training rows' own, test rows', and validation rows' among the fitting rows."""

    train: NeighborResult
    test: NeighborResult
    val: NeighborResult


@task(name="neighbors", **CACHED, **RETRIES)
def find_neighbors(split, rows, k: int, backend: str, options: dict | None) -> NeighborSet:
    """``k`` neighbors for every query set of the split (validation indices refer to ``rows.fit``)."""
    options = dict(options or {})
    X_fit, X_val = split.X_train[rows.fit], split.X_train[rows.val]
    return NeighborSet(
        train=kneighbors(split.X_train, None, k, backend, **options),
        test=kneighbors(split.X_train, split.X_test, k, backend, **options),
        val=kneighbors(X_fit, X_val, k, backend, **options),
    )

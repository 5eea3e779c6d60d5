"""Neighbor stage: one kNN computation per split, shared by every method."""

from prefect import task
from prefect.cache_policies import NO_CACHE

from pll.neighbors import kneighbors


@task(name="neighbors", cache_policy=NO_CACHE)
def find_neighbors(split, k: int, backend: str, options: dict | None):
    """The training rows' own neighbors and the test rows' neighbors, ``k`` each."""
    options = dict(options or {})
    train = kneighbors(split.X_train, None, k, backend, **options)
    test = kneighbors(split.X_train, split.X_test, k, backend, **options)
    return train, test

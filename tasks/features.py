"""Feature stage: seeded train/test split and a feature pipeline fitted on the training rows."""

from prefect import task
from prefect.cache_policies import NO_CACHE

from pll.data import split_indices
from pll.features import featurize


@task(name="features", cache_policy=NO_CACHE)
def split_and_featurize(ds, seed: int, features: str, test_size: float = 0.2):
    """Split ``ds`` 80/20 with ``seed`` and transform both parts with ``features``."""
    train_rows, test_rows = split_indices(ds.n_rows, test_size, seed)
    return featurize(ds, train_rows, test_rows, features)

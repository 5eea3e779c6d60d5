"""Feature stage: a feature pipeline fitted on the training rows of a split."""

from prefect import task
from prefect.cache_policies import NO_CACHE

from pll.features import featurize


@task(name="features", cache_policy=NO_CACHE)
def split_and_featurize(ds, rows, features: str):
    """Fit the ``features`` pipeline on the training rows of ``rows`` and transform train and test."""
    return featurize(ds, rows.train, rows.test, features)

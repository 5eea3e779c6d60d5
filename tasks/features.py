"""Feature stage: a feature pipeline fitted on the training rows of a split."""

from prefect import task

from pll.features import featurize
from tasks.caching import CACHED, RETRIES


@task(name="features", **CACHED, **RETRIES)
def split_and_featurize(ds, rows, features: str):
    """Fit the ``features`` pipeline on the training rows of ``rows`` and transform train and test."""
    return featurize(ds, rows.train, rows.test, features)

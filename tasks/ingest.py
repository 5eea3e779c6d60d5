"""Ingestion stage: load a data set by name or path."""

from prefect import task
from prefect.cache_policies import NO_CACHE

import pll


@task(name="ingest", cache_policy=NO_CACHE)
def ingest(dataset: str) -> pll.PartialLabelDataset:
    """Load the data set ``dataset`` (a built-in name or a file path)."""
    return pll.load_dataset(dataset)

"""Ingestion stage: load a data set by name or path, optionally prepared by a protocol."""

from prefect import task
from prefect.cache_policies import NO_CACHE

import pll
from pll_pipeline.cache.policy import RETRIES
from pll.data import load_run_data


@task(name="ingest", cache_policy=NO_CACHE, **RETRIES)
def ingest(
    dataset: str, protocol: str = "none", noisy_bags: bool = False, mat_variables: dict | None = None
) -> pll.PartialLabelDataset:
    """Load ``dataset`` (a built-in name or a file path; a ``.mat`` file's variables named by ``mat_variables``).

    ``protocol="dst-pll"`` prepares real-world data as the DST-PLL paper does;
    ``noisy_bags`` accepts empty bags and true labels outside their bags.
    """
    return load_run_data(dataset, protocol, noisy_bags, mat_variables)

"""Noise stage: turn labelled rows into partial-label rows."""

from prefect import task
from prefect.cache_policies import NO_CACHE

from pll.noise import apply_noise


@task(name="noise", cache_policy=NO_CACHE)
def add_noise(ds, model: str, params: dict | None, seed: int):
    """Replace the bags of ``ds`` by those of the noise ``model`` (``"none"`` keeps them)."""
    return apply_noise(ds, model, params, seed)

"""Noise stage: turn labelled rows into partial-label rows."""

from prefect import task

from pll.noise import apply_noise
from pll_pipeline.cache.policy import CACHED, RETRIES


@task(name="noise", **CACHED, **RETRIES)
def add_noise(ds, model: str, params: dict | None, seed: int):
    """Replace the bags of ``ds`` by those of the noise ``model`` (``"none"`` keeps them)."""
    return apply_noise(ds, model, params, seed)

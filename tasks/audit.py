"""Audit stage: :func:`pll.audit.audit_dataset` as a Prefect task."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from pll import audit as audit_
from pll_pipeline.tasks.progress import logged_progress


@task(name="audit", cache_policy=NO_CACHE)
def audit(ds, features: str, n_neighbors: int, knn: str, knn_options: dict | None, seed: int = 0):
    """The data set's training bags ranked by suspicion, most suspicious first; the cross-fitting reports its progress."""
    with logged_progress():
        return audit_.audit_dataset(ds, features=features, n_neighbors=n_neighbors, knn=knn,
                                    knn_options=knn_options, random_state=seed)

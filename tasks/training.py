"""Training stage: :func:`pll.serving.fit_model` on every row, as a Prefect task."""

from prefect import task
from prefect.cache_policies import NO_CACHE

from pll.experiment.catalog import DEFAULT_CONFORMAL_ALPHA
from pll.serving import FittedModel, fit_model
from pll_pipeline.tasks.progress import logged_progress


@task(name="fit-model", cache_policy=NO_CACHE, task_run_name="fit-{method}")
def fit(ds, method: str, params: dict | None, features: str, seed: int, threshold: float | None = None,
        knn: str = "exact", knn_options: dict | None = None,
        conformal_alpha: float | None = DEFAULT_CONFORMAL_ALPHA, reject_lambda: float | None = None) -> FittedModel:
    """Fit ``features`` and ``method`` on every row of ``ds`` (see :func:`pll.serving.fit_model`)."""
    with logged_progress():
        return fit_model(ds, method, params, features, random_state=seed, threshold=threshold, knn=knn,
                         knn_options=knn_options, conformal_alpha=conformal_alpha, reject_lambda=reject_lambda)

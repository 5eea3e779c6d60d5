"""Feature stage: a feature pipeline fitted on the training rows of a split."""

from prefect import task

from pll.features import featurize
from cache.policy import CACHED, RETRIES
from tasks.progress import logged_progress


@task(name="features", **CACHED, **RETRIES, task_run_name="features-{features}")
def split_and_featurize(ds, rows, features: str, knn_backend: str, knn_options: dict | None):
    """Fit the ``features`` pipeline on the training rows of ``rows`` and transform train and test.

    Pipelines that search neighbors use the run's kNN backend, and keep the
    hold-out split's fitting rows' share of that search for its own fit
    (``subset_neighbors``, :func:`pll.features.featurize`).
    """
    with logged_progress():
        return featurize(ds, rows.train, rows.test, features, knn=knn_backend, knn_params=knn_options,
                         subset=rows.fit)

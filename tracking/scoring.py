"""A scoring run in MLflow: the model it loads and links, the counts and figure it logs."""

from __future__ import annotations

from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE

from pll.errors import ModelNotFoundError
from pll.serving import score_figure
from pll_pipeline.tracking.models import link_input, load_model
from pll_pipeline.tracking.runs import log_figure, log_json, log_metrics

METRICS = ("rows", "accepted", "rejected", "rejection_rate", "score_mean", "score_median")
FIGURE = "score_distribution.png"


@task(name="load-model", cache_policy=NO_CACHE)
def load(model_uri: str, tracking_uri: str):
    """The fitted model behind ``model_uri`` and its provenance (see :func:`pll_pipeline.tracking.models.load_model`)."""
    return load_model(model_uri, tracking_uri)


@task(name="load-model-if-any", cache_policy=NO_CACHE)
def load_if_any(model_uri: str, tracking_uri: str):
    """Like :func:`load`, but no pll model at ``model_uri`` is an answer, ``(None, why)``, not a failure.

    For the scheduled folder flow, which waits for a model to be registered:
    a failing task would log a traceback every run.
    """
    try:
        return load_model(model_uri, tracking_uri)
    except ModelNotFoundError as exc:
        return None, str(exc)


@task(name="link-model", cache_policy=NO_CACHE)
def link_model(tracking_uri: str, run_id: str, source: dict):
    """Record the scoring model (URI, its training run, its LoggedModel) on the scoring run."""
    link_input(tracking_uri, run_id, source)


@task(name="log-scoring", cache_policy=NO_CACHE)
def log_scoring(tracking_uri: str, run_id: str, summary: dict, scored, threshold):
    """Log the counts accepted and rejected (in all, and by reason of rejection) and the score distribution figure."""
    client = MlflowClient(tracking_uri)
    log_metrics(client, run_id, {k: v for k, v in summary.items() if k in METRICS or k.startswith("rejected_")})
    log_json(client, run_id, summary, "scoring_summary.json")
    fig = score_figure(scored["score"], scored["accept"], threshold, title=f"Scores of {summary['rows']} rows")
    log_figure(client, run_id, fig, FIGURE)

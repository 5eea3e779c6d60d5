"""An audit run in MLflow: the audit's metrics (with its mixture weights), its table (with each row's reason) and its histogram."""

from __future__ import annotations

from mlflow.entities import Metric
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE

from pll import audit as audit_
from pll.reporting.plots import suspicion_figure
from pll_pipeline.tracking.runs import figure_writer, frame_writer, log_entries, now_ms, upload

TOP_ROWS = 50  # rows of the Markdown table: the most suspicious bags, for a first look


@task(name="log-audit", cache_policy=NO_CACHE)
def log_audit(tracking_uri: str, run_id: str, table, ds) -> dict:
    """Log the audit's metrics (:func:`pll.audit.audit_metrics`), table (Parquet, top rows as Markdown) and histogram.

    Both tables carry each row's reason: ``favoured``, the labels outside its bag that the evidence
    favours, and ``reason``, the same with their probabilities.
    """
    client = MlflowClient(tracking_uri)
    metrics = audit_.audit_metrics(table, ds)
    stamp = now_ms()
    log_entries(client, run_id, metrics=[Metric(k, v, stamp, 0) for k, v in metrics.items()],
                tags={"data_fingerprint": ds.fingerprint()})
    wrong = None if ds.y is None else ~ds.S[table["row"], ds.y[table["row"]]]
    upload(client, run_id, {
        "audit.parquet": frame_writer(table),
        "audit_top.md": frame_writer(table.head(TOP_ROWS)),
        "figures/suspicion.png": figure_writer(suspicion_figure(table, wrong, f"Suspicion of the bags of {ds.name}")),
    })
    return metrics

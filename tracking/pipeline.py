"""MLflow layout of one pipeline execution: a parent run for what the methods share, a child run per method run.

The unit people compare is the method run (:class:`pll.experiment.MethodRun`):
its MLflow run has ``method`` and the method's parameters as plain params,
and metrics named alike for every method (``accuracy``,
``native.risk_0.10``, ``trust.covered_accuracy``, ``conformal.coverage``;
:func:`pll.experiment.run_metrics`), so the runs table sorts every method by
one column.  The parent (the pipeline execution) holds what they share: the
configuration, the data set, the neighbor searches' metrics, the comparison
table, figures and the report.  Each run's files are written to a temporary
folder and uploaded in one call, and its metrics, params and tags in as few
batches as MLflow allows: a grid logs hundreds of runs.
"""

from __future__ import annotations

import json

import numpy as np
from mlflow.entities import Dataset, DatasetInput, InputTag, Metric
from mlflow.tracking import MlflowClient
from prefect import task
from prefect.cache_policies import NO_CACHE

from pll.methods import make_method
from pll.noise import noise_parameters
from pll.evaluation.metric_names import option_metric, risk_name
from pll.reporting.plots import precision_figure, risk_figure, tradeoff_figure
from pll.reporting.report import run_report
from pll.reporting.tables import risk_table
from pll_pipeline.tracking.urls import LOST_WORKERS_TAG, RERUN_TASKS_TAG
from pll_pipeline.tracking.runs import (
    DESCRIPTION_TAG,
    KIND_TAG,
    PARENT_TAG,
    figure_writer,
    frame_writer,
    log_entries,
    now_ms,
    provenance_tags,
    text_writer,
    upload,
)

RUN_OWNED_PARAMS = ("random_state", "knn", "knn_options")
RUN_KIND = "pipeline"
METHOD_KIND = "method"
# Metric series the UI charts as one line per run: R_λ by λ (step: 100·λ) and the risk–coverage curve (step: %).
RISK_BY_LAMBDA = "risk_by_lambda"
RISK_BY_COVERAGE = "risk_by_coverage"
COVERAGE_STEP = 5  # percent between points of the risk–coverage series


def dataset_input(summary: dict) -> DatasetInput:
    """The data set as an MLflow dataset input: the runs table's Dataset column (name, digest, source)."""
    builtin = summary.get("format") == "builtin"
    profile = {k: summary.get(k) for k in ("rows", "features", "classes", "average_bag_size", "has_true_labels")}
    dataset = Dataset(
        name=summary["name"],
        digest=summary["fingerprint"],
        source_type="code" if builtin else "local",
        source=json.dumps({"uri": str(summary.get("source", summary["name"]))}),
        profile=json.dumps(profile),
    )
    return DatasetInput(dataset, [InputTag("mlflow.data.context", "training and evaluation")])


def method_params(run) -> dict:
    """Params of a method run: ``method`` and every parameter of the method as plain names (defaults included)."""
    estimator = make_method(run.method, run.params)
    # The run's seed and kNN backend are the run's params; the method searches no neighbors of its own here.
    values = {k: v for k, v in estimator.get_params(deep=False).items() if k not in RUN_OWNED_PARAMS}
    return {"method": run.method, **{k: v if isinstance(v, str) else json.dumps(v, default=str) for k, v in values.items()}}


def metric_series(evaluation, name: str, lambdas, stamp: int) -> list:
    """Risk against λ and the risk–coverage curve of every option of method run ``name``, as MLflow metric steps."""
    series = []
    for o in evaluation.options:
        if o.name != name:
            continue
        for lam in lambdas:
            series.append(Metric(option_metric(o.option, RISK_BY_LAMBDA), float(o.metrics[risk_name(lam)]), stamp,
                                 int(round(100 * lam))))
        for percent, risk in coverage_curve(o.sweep):
            series.append(Metric(option_metric(o.option, RISK_BY_COVERAGE), risk, stamp, percent))
    return series


def coverage_curve(sweep):
    """(coverage %, selective risk) every :data:`COVERAGE_STEP` percent the threshold sweep reaches.

    At each percent the sweep's largest coverage not above it counts (the
    risk of the accepted rows there: 1 − covered accuracy); percents below
    the smallest reachable coverage are left out.
    """
    accepted = sweep[sweep["accepted"] > 0]
    coverage = 1.0 - accepted["rejection_rate"].to_numpy()
    risk = 1.0 - accepted["covered_accuracy"].to_numpy()
    order = np.argsort(coverage, kind="stable")
    coverage, risk = coverage[order], risk[order]
    points = []
    for percent in range(COVERAGE_STEP, 101, COVERAGE_STEP):
        at = np.searchsorted(coverage, percent / 100 + 1e-12, side="right") - 1
        if at >= 0:
            points.append((percent, float(risk[at])))
    return points


def log_method_runs(tracking_uri: str, parent_run_id: str, context: dict, runs, evaluation, predictions: dict,
                    summary: dict, lambdas, tags: dict | None = None, run_tags: dict | None = None,
                    run_params: dict | None = None) -> dict:
    """A child run of ``parent_run_id`` per method run; returns method run name -> MLflow run id.

    ``context``: the params every method run shares with its parent (data
    set, noise, seed, features, kNN backend...); ``runs``: the
    :class:`~pll.experiment.MethodRun` s; ``evaluation``: their
    :class:`~pll.experiment.Evaluation`; ``predictions``:
    :func:`pll.experiment.prediction_frames`; ``tags``: tags of every
    method run (the flow run that made them); ``run_tags``: per method run
    name, its own (a grid's cell keys); ``run_params``: per method run name,
    params its fit settled (the weights its conformal sets were calibrated on).
    """
    client = MlflowClient(tracking_uri)
    experiment_id = client.get_run(parent_run_id).info.experiment_id
    metrics, stamp, ids = evaluation.metrics, now_ms(), {}
    shared_tags = {**provenance_tags(), **(tags or {}), PARENT_TAG: parent_run_id, KIND_TAG: METHOD_KIND,
                   "data_fingerprint": summary["fingerprint"]}
    for run in runs:
        options = [o for o in evaluation.options if o.name == run.name]
        description = (f"{run.name} on {summary['name']} ({context.get('noise', 'no')} noise, seed "
                       f"{context.get('seed')}): reject options {', '.join(o.option for o in options)}, evaluated on the test rows.")
        created = client.create_run(experiment_id, run_name=run.name, tags={
            **shared_tags, "pll.method": run.method, DESCRIPTION_TAG: description, **(run_tags or {}).get(run.name, {})})
        run_id = ids[run.name] = created.info.run_id
        scalars = [Metric(k, float(v), stamp, 0) for k, v in metrics[run.name].items()]
        log_entries(client, run_id, metrics=scalars + metric_series(evaluation, run.name, lambdas, stamp),
                    params={**context, "features": run.features, **method_params(run),
                            **(run_params or {}).get(run.name, {})})
        client.log_inputs(run_id, datasets=[dataset_input(summary)])
        files = {f"predictions/{part}.parquet": frame_writer(frame) for part, frame in predictions[run.name].items()}
        for o in options:  # the option's own tables, not the evaluation's dicts, which rebuild on each access
            files[f"curves/{o.option}.sweep.csv"] = frame_writer(o.sweep)
            files[f"curves/{o.option}.precision.csv"] = frame_writer(o.precision)
            files[f"curves/{o.option}.calibration.csv"] = frame_writer(o.calibration)
        upload(client, run_id, files)
        client.set_terminated(run_id, "FINISHED")
    return ids


def log_lost_workers(tracking_uri: str, run_id: str, lost) -> None:
    """Tag the pipeline run with the Dask workers it lost (:class:`pll_pipeline.flows.cluster.LostWorker`), if any."""
    if lost:
        log_entries(MlflowClient(tracking_uri), run_id, tags={
            LOST_WORKERS_TAG: ", ".join(f"{w.name} ({w.address})" for w in lost),
            RERUN_TASKS_TAG: "; ".join(", ".join(w.tasks) or "none" for w in lost)})


@task(name="log-results", cache_policy=NO_CACHE)
def log_results(tracking_uri: str, run_id: str, summary: dict, evaluation, neighbor_metrics: dict,
                neighbor_params: dict, method_runs: dict, figures: bool = True) -> dict:
    """Log a finished pipeline execution and end its run; return method run name -> MLflow run id.

    The parent run gets its share (:func:`log_shared`), then each method run
    its child run (:func:`log_method_runs`, ``method_runs`` holding its
    arguments after the first two), and the parent ends FINISHED: one task,
    not three, since a grid logs hundreds of executions.
    """
    log_shared(tracking_uri, run_id, summary, evaluation, neighbor_metrics, neighbor_params, figures)
    ids = log_method_runs(tracking_uri, run_id, evaluation=evaluation, summary=summary, **method_runs)
    MlflowClient(tracking_uri).set_terminated(run_id, "FINISHED")
    return ids


def noise_params(summary: dict) -> dict:
    """What the run did to the labels, as params: the noise model applied (``auto`` resolved; ``none``: bags as
    loaded) and every parameter it used, defaults included."""
    model = summary.get("noise") or "none"
    used = {} if model == "none" else noise_parameters(model, summary.get("noise_params"))
    return {"noise_applied": model, "noise_applied_params": json.dumps(used, sort_keys=True)}


def log_shared(tracking_uri: str, run_id: str, summary: dict, evaluation, neighbor_metrics: dict,
               neighbor_params: dict, figures: bool = True) -> None:
    """The parent run's share: data set, neighbor searches, comparison table, risks, figures and report.

    ``neighbor_metrics`` (:func:`pll.experiment.neighbor_metrics`) and
    ``neighbor_params`` (the backend each search used) describe the
    searches; ``figures=False`` leaves out the figures (a grid draws its own, across seeds).
    """
    client = MlflowClient(tracking_uri)
    table = evaluation.table
    risks = risk_table(table)
    log_entries(client, run_id, metrics=[Metric(k, float(v), now_ms(), 0) for k, v in neighbor_metrics.items()],
                params={"truth": evaluation.truth, **noise_params(summary), **neighbor_params},  # truth: what "correct" meant
                tags={"data_fingerprint": summary["fingerprint"], "evaluated_against": evaluation.truth})
    client.log_inputs(run_id, datasets=[dataset_input(summary)])
    files = {
        "dataset_summary.json": text_writer(json.dumps(summary, indent=2, default=str)),
        "metrics.csv": frame_writer(table),
        "metrics.md": frame_writer(table),
        "risks.csv": frame_writer(risks),
    }
    name = summary.get("name", "data")
    drawn = {}
    if figures:
        drawn = {
            "Reject trade-off": ("figures/tradeoff.png", tradeoff_figure(
                evaluation.sweeps, evaluation.operating_points, f"Reject trade-off on {name} (test rows)")),
            "Risk against λ": ("figures/risk.png", risk_figure(risks, f"Reject-option risk on {name} (test rows)")),
            "Precision at percentile": ("figures/precision.png", precision_figure(
                evaluation.precision, f"Precision at percentile on {name} (test rows)")),
        }
        files.update({path: figure_writer(fig) for path, fig in drawn.values()})
    report = run_report(summary, table, risks, {caption: path for caption, (path, _) in drawn.items()},
                        truth=evaluation.truth)
    files["report.md"] = text_writer(report)
    upload(client, run_id, files)

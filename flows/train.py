"""The training flow: fit one method on all rows of a data set and log it as an MLflow model."""

from __future__ import annotations

from prefect import flow

from pll_pipeline.flows import LOG_PRINTS, checks
from pll_pipeline.flows.links import flow_run_tags, name_flow_run, tag_flow_run
from pll.experiment import catalog
from pll.experiment import dataset_label
from pll.neighbors import DEFAULT_BACKEND
from pll_pipeline.tasks.ingest import ingest
from pll_pipeline.tasks.training import fit
from pll_pipeline.tracking.models import input_example, log_model
from pll_pipeline.tasks.noise import add_noise
from pll_pipeline.flows.tracked import ending_on_error
from pll_pipeline.tracking.runs import end_run, resolve_tracking_uri, start_run


@flow(name="pll-train", log_prints=LOG_PRINTS)
def train(
    dataset: str = catalog.DEFAULT_DATASET,
    mat_variables: dict | None = None,
    protocol: str = catalog.DEFAULT_PROTOCOL,
    noisy_bags: bool = False,
    method: str = catalog.DEFAULT_METHOD,
    method_params: dict | None = None,
    features: str = catalog.DEFAULT_FEATURES,
    knn: str = DEFAULT_BACKEND,
    knn_options: dict | None = None,
    noise: str = catalog.DEFAULT_NOISE,
    noise_params: dict | None = None,
    preset: str | None = None,
    seed: int = 0,
    threshold: float | None = None,
    reject_lambda: float | None = None,
    conformal_alpha: float | None = catalog.DEFAULT_CONFORMAL_ALPHA,
    registered_name: str | None = None,
    tracking_uri: str | None = None,
    experiment: str = catalog.DEFAULT_EXPERIMENT,
) -> dict:
    """Fit ``method`` (with ``features``) on every row of ``dataset``; log it as a pyfunc model.

    The noise model works as in the pipeline: ``"auto"`` gives a fully
    labelled data set (every bag a single label, e.g. the built-in
    ``digits``) class-dependent partial labels, so that a demo trains on
    partial labels, and keeps the bags of a data set that already has them.
    ``protocol``, ``noisy_bags`` and ``mat_variables`` prepare the data as in the pipeline.

    Every neighbor search of the model (its features', its method's, at
    training and at scoring time) uses ``knn`` with ``knn_options``.

    ``threshold`` (e.g. one calibrated by a benchmark) replaces the method's
    own reject decision by ``score > threshold``; ``reject_lambda`` chooses
    that threshold on a 20 % hold-out to minimise ``R_λ`` there (with true
    labels, or without them the bags' upper bound: see
    :func:`pll.serving.calibrate_threshold`).  ``conformal_alpha`` (None:
    none) adds prediction sets with coverage ≥ 1 − α to the model's output,
    calibrated on the same hold-out.

    The run, and the LoggedModel, get the model's quality on that hold-out
    (:func:`pll.serving.evaluate_holdout`), by the names a pipeline's method
    run logs (``accuracy``, ``native.risk_0.10``, ``conformal.coverage``, ...);
    the run's description says what they measure (:func:`metrics_note`).

    Returns a dict with ``model_uri`` (``models:/<model_id>``), ``model_id``,
    ``registered_uri`` when ``registered_name`` names a registered model, the
    training ``run_id``, ``experiment`` and ``tracking_uri``.
    """
    # A bad name or parameter fails before any run is created; locals() are still the parameters.
    noise_params = checks.training(locals())["noise_params"]
    tracking_uri = resolve_tracking_uri(tracking_uri)
    config = {
        "dataset": dataset,
        "mat_variables": mat_variables or {},
        "protocol": protocol,
        "noisy_bags": noisy_bags,
        "method": method,
        "method_params": method_params or {},
        "features": features,
        "knn": knn,
        "knn_options": knn_options or {},
        "noise": noise,
        "noise_params": noise_params or {},
        "seed": seed,
        "threshold": threshold,
        "reject_lambda": reject_lambda,
        "conformal_alpha": conformal_alpha,
        "registered_name": registered_name,
    }
    name = f"train {method} on {dataset_label(dataset)}"
    run_id = start_run(tracking_uri, experiment, name, config, tags={"pll.kind": "training", **flow_run_tags(name)},
                       description=metrics_note(threshold, reject_lambda, conformal_alpha))
    name_flow_run(name)
    tag_flow_run(run_id)
    with ending_on_error(tracking_uri, run_id):
        ds = add_noise(ingest(dataset, protocol, noisy_bags, mat_variables), noise, noise_params, seed)
        fitted = fit(ds, method, method_params, features, seed, threshold, knn, knn_options, conformal_alpha,
                     reject_lambda)
        logged = log_model(tracking_uri, run_id, fitted, input_example(ds), ds.summary(), registered_name)
    end_run(tracking_uri, run_id)
    return {**logged, "run_id": run_id, "experiment": experiment, "tracking_uri": tracking_uri}


def metrics_note(threshold=None, reject_lambda=None, conformal_alpha=None) -> str:
    """The training run's description: what its metrics measure, and which of them are in-sample.

    The hold-out both calibrates the model's threshold and sets and judges
    them; a reader of the registry should not take those figures for test
    results.
    """
    rule = ("its threshold" if threshold is not None or reject_lambda is not None else "the method's own rule")
    lines = [
        "Metrics: the model's quality on a seeded 20 % hold-out, predicted by its twin fitted on the other "
        "80 % (against true labels when the data has them, else against the rows' bags).",
        f"`accuracy`, `mcc` (true labels only) and `native.*`: its predictions with {rule}, what `pll score` applies.",
    ]
    if reject_lambda is not None:
        lines.append("The threshold was chosen on the same hold-out (`holdout.*`), so `native.*` is in-sample.")
    if conformal_alpha is not None:
        lines.append("`conformal.*`: the prediction sets, calibrated on the same hold-out rows, so their coverage "
                     "there is in-sample, no test of their guarantee.")
    return "\n\n".join(lines)

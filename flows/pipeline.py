"""The pipeline flow: ingest -> noise -> features -> neighbors -> methods -> evaluate, logged to MLflow."""

from __future__ import annotations

from prefect import flow
from prefect.context import FlowRunContext
from prefect.futures import as_completed

from flows import LOG_PRINTS
from pll import catalog
from pll.experiment import check_run, make_split, plan_run, prediction_frames
from pll.neighbors import DEFAULT_BACKEND
from pll.tables import metrics_table
from tasks.caching import bounded
from tasks.conformal import calibration_split, conformal_option
from tasks.evaluate import evaluate
from tasks.features import split_and_featurize
from tasks.ingest import ingest
from tasks.methods import run_method
from tasks.neighbors import find_neighbors, log_neighbors
from tasks.noise import add_noise
from tasks.progress import stop_stages
from tasks.tracking import end_run, log_results, resolve_tracking_uri, start_run
from tasks.trust import trust_option


def _results(futures):
    """The stages' results; at the first that fails, the others are asked to stop and its own error is raised.

    Not the "upstream not ready" of the stages that waited for it, and not
    minutes later: the stages still running end at their next block of rows
    (:func:`tasks.progress.stop_stages`).
    """
    done = []
    for future in as_completed(futures):
        future.wait()  # its final state, not the API's record of it, which may lag behind
        done.append(future)
        if not future.state.is_completed():
            stop_stages(FlowRunContext.get().flow_run.id)
            failed = [f for f in done if f.state.is_failed()]  # a stage that was not ready waited for these
            (failed or [future])[0].result()
    return [future.result() for future in futures]


@flow(name="pll-pipeline", log_prints=LOG_PRINTS)
def pipeline(
    dataset: str = catalog.DEFAULT_DATASET,
    mat_variables: dict | None = None,
    protocol: str = catalog.DEFAULT_PROTOCOL,
    noisy_bags: bool = False,
    noise: str = catalog.DEFAULT_NOISE,
    noise_params: dict | None = None,
    seed: int = 0,
    methods: list[str] = list(catalog.DEFAULT_METHODS),
    method_params: dict[str, dict] | None = None,
    features: str = catalog.DEFAULT_FEATURES,
    method_features: dict[str, str] | None = None,
    val_fraction: float = 0.2,
    knn_backend: str = DEFAULT_BACKEND,
    knn_options: dict | None = None,
    conformal_alpha: float | None = catalog.DEFAULT_CONFORMAL_ALPHA,
    tracking_uri: str | None = None,
    experiment: str = catalog.DEFAULT_EXPERIMENT,
    dask_address: str | None = None,
    run_tags: dict | None = None,
) -> dict:
    """Run every stage on one data set and seed; log it all as one MLflow run.

    Returns a dict with the MLflow ``run_id``, ``experiment``, ``tracking_uri``,
    the ``metrics`` table (one row per method and reject option) and ``truth``,
    what "correct" meant there (true labels, or the partial-label loss).
    ``dask_address``: the scheduler of the Dask cluster the kNN backend
    ``dask`` uses (the caller picks the task runner, see
    :func:`flows.cluster.on_dask`); ``run_tags``: extra MLflow tags.
    ``protocol="dst-pll"`` prepares real-world data as the DST-PLL paper does;
    ``noisy_bags`` accepts empty bags and true labels outside their bags;
    ``mat_variables`` names a ``.mat`` file's variables (see :func:`pll.load_dataset`).
    ``knn_backend`` with ``knn_options`` serves every neighbor search: the
    methods', the feature pipelines' and the trust score's.  ``conformal_alpha``:
    the miscoverage of the conformal prediction sets evaluated as a third
    reject option (None: not evaluated).  Stages of a run
    on more rows than :func:`tasks.caching.cache_max_rows` are not cached.
    """
    check_run(dataset=dataset, mat_variables=mat_variables, protocol=protocol, noise=noise,
              noise_params=noise_params, methods=methods, method_params=method_params, features=features,
              method_features=method_features, knn_backend=knn_backend, knn_options=knn_options,
              val_fraction=val_fraction, conformal_alpha=conformal_alpha)
    tracking_uri = resolve_tracking_uri(tracking_uri)
    plan = plan_run(methods, method_params, features, method_features)
    if knn_backend == "dask" and dask_address:
        knn_options = {"address": dask_address, **(knn_options or {})}
    config = {
        "dataset": dataset,
        "mat_variables": mat_variables or {},
        "protocol": protocol,
        "noisy_bags": noisy_bags,
        "noise": noise,
        "noise_params": noise_params or {},
        "seed": seed,
        "methods": plan.method_params,
        "features": features,
        "method_features": plan.method_features,
        "val_fraction": val_fraction,
        "knn_backend": knn_backend,
        "knn_options": knn_options or {},
        "conformal_alpha": conformal_alpha,
        "dask_address": dask_address,
    }
    run_id = start_run(tracking_uri, experiment, f"{dataset}-seed{seed}", config, run_tags)
    try:
        raw = ingest(dataset, protocol, noisy_bags, mat_variables)
        featurize_, neighbors_, method_, trust_, calibration_, conformal_ = (
            bounded(stage, raw.n_rows)
            for stage in (split_and_featurize, find_neighbors, run_method, trust_option, calibration_split,
                          conformal_option)
        )
        ds = bounded(add_noise, raw.n_rows)(raw, noise, noise_params, seed)
        rows = make_split(ds.n_rows, seed, val_fraction=val_fraction)
        outputs, upstream = [], []
        for group in plan.groups:
            split = featurize_.submit(ds, rows, group.features, knn_backend, knn_options)
            neighbors = neighbors_.submit(split, rows, group.k, knn_backend, knn_options)
            if group.k:
                upstream.append(log_neighbors.submit(tracking_uri, run_id, group.features, neighbors))
            native = [method_.submit(m, plan.method_params[m], split, rows, neighbors, seed) for m in group.methods]
            # Every method is evaluated a second time with the trust score as its reject option.
            outputs += native + [
                trust_.submit(o, split, rows, neighbors, knn_backend=knn_backend, knn_options=knn_options)
                for o in native
            ]
            if conformal_alpha is not None:
                calibration = calibration_.submit(ds, rows, group.features, group.k, knn_backend, knn_options)
                outputs += [conformal_.submit(m, plan.method_params[m], calibration, seed, conformal_alpha)
                            for m in group.methods]
            upstream += [split, neighbors]
        outputs = _results(upstream + outputs)[len(upstream):]
        evaluation = evaluate(outputs, ds, rows)
        table = metrics_table(evaluation.metrics)
        predictions = prediction_frames(outputs, ds, rows)
        log_results(tracking_uri, run_id, ds.summary(), evaluation, predictions, table)
    except BaseException:
        end_run(tracking_uri, run_id, "FAILED")
        raise
    end_run(tracking_uri, run_id)
    return {"run_id": run_id, "experiment": experiment, "tracking_uri": tracking_uri, "metrics": table,
            "truth": evaluation.truth}

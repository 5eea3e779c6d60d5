"""The pipeline flow: ingest -> noise -> features -> neighbors -> methods -> evaluate, logged to MLflow.

One MLflow run per execution holds what the method runs share; each method
run is a child run of it (:mod:`pll_pipeline.tracking.pipeline`).  The flow run and
the MLflow run name each other (:mod:`pll_pipeline.flows.links`) and have the same name.
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.context import FlowRunContext
from prefect.futures import as_completed
from prefect.runtime import flow_run
from threadpoolctl import threadpool_limits

from pll_pipeline.flows import LOG_PRINTS, checks
from pll_pipeline.flows.cluster import FlowCluster
from pll_pipeline.flows.links import flow_run_tags, name_flow_run, publish_table, tag_flow_run
from pll_pipeline.flows.tracked import ending_on_error
from pll.experiment import catalog
from pll.evaluation import DEFAULT_LAMBDAS
from pll.experiment import (
    Protocol,
    RunResult,
    declare_protocol,
    metric_prefix,
    neighbor_metrics,
    neighbor_params,
    pipeline_run_name,
    plan_run,
    prediction_frames,
)
from pll.neighbors import DEFAULT_BACKEND
from pll.neighbors.sharded import SEND_TRIES, lost_too_often
from pll.noise import describe_noise
from pll.reporting.tables import markdown_table
from pll_pipeline.cache.policy import bounded, lineage_keys, uncached
from pll_pipeline.tasks.ingest import ingest
from pll_pipeline.tracking.pipeline import RUN_KIND, log_lost_workers, log_results
from pll_pipeline.tasks.progress import stop_stages
from pll_pipeline.tasks.stages import run_protocol, run_stage
from pll_pipeline.tracking.runs import (
    KIND_TAG,
    PARENT_TAG,
    resolve_tracking_uri,
    start_run,
    unique_run_name,
)


def submit_protocol(protocol: Protocol, raw, cluster: FlowCluster | None = None) -> RunResult:
    """The stages of ``protocol`` as Prefect tasks, each submitted once the values it reads exist.

    A feature pipeline's neighbor search, its methods and their trust scores
    run while another pipeline is still fitting its features: at scale one
    heavy stage alone leaves a core idle for part of its time.  A stage takes
    plain values, not futures, whose state Prefect would read from its API
    once for every task that takes them; the protocol's
    :class:`~pll.experiment._stages.StageValues` drops each once every stage
    that reads it has finished.  At the first stage that fails, the others
    are asked to stop at their next block of rows
    (:func:`pll_pipeline.tasks.progress.stop_stages`) and its own error is raised, not
    minutes later.  On a Dask cluster each value goes to the workers once (``cluster``: the flow run's
    :class:`FlowCluster`, by default a new one for the flow run's task runner).
    """
    cluster = cluster or FlowCluster(FlowRunContext.get().task_runner)
    stage_task = bounded(run_stage, raw.n_rows)
    # The last stage gathers values cached on their own and evaluates them in a second: an entry of it would hold
    # them all again (at 50,000 rows: 0.7 s to compute, 192 of the cache's 524 MB).
    last_task = uncached(stage_task)
    keys = lineage_keys(protocol, {"raw": raw})
    values, waiting, running, reruns = protocol.values(raw), list(protocol.stages), {}, {}

    def submit(stage):
        task = last_task if stage is protocol.stages[-1] else stage_task
        future = task.submit(stage, keys[stage.writes], cluster.send(stage.reads, values.inputs(stage)))
        cluster.name_task(future, stage.label)
        running[future] = stage

    def submit_ready():
        for stage in [s for s in waiting if values.ready(s)]:
            waiting.remove(stage)
            submit(stage)

    # Parallel work comes from the stages, side by side on the flow's threads, as on Dask's workers, which
    # start with one BLAS thread each: a BLAS thread pool of its own per product only spins between the cell
    # search's small products, burning a core that another stage needs.
    with threadpool_limits(limits=1, user_api="blas"):
        submit_ready()
        while running:
            future = next(as_completed(list(running)))
            future.wait()  # its final state, not the API's record of it, which may lag behind
            stage = running.pop(future)
            if cluster.lost(future):  # a worker died with a value it reads: sent again, run again
                reruns[stage.label] = reruns.get(stage.label, 0) + 1
                if reruns[stage.label] == SEND_TRIES:
                    raise lost_too_often(f"the inputs of stage {stage.label}")
                get_run_logger().warning("Stage %s: a Dask worker died with a value it reads; sent again, run again",
                                         stage.label)
                submit(stage)
                continue
            if not future.state.is_completed():
                stop_stages(FlowRunContext.get().flow_run.id)
            values.record(stage, future.result())
            cluster.keep(values.held)
            submit_ready()
    return values.result


def _flow_run_name() -> str:
    """The flow run's name: the MLflow run's (see :func:`pll.experiment.pipeline_run_name`)."""
    params = flow_run.parameters
    return params.get("run_name") or pipeline_run_name(
        params.get("dataset", catalog.DEFAULT_DATASET), params.get("noise", catalog.DEFAULT_NOISE),
        params.get("noise_params"), params.get("seed", 0))


@flow(name="pll-pipeline", log_prints=LOG_PRINTS, flow_run_name=_flow_run_name)
def pipeline(
    dataset: str = catalog.DEFAULT_DATASET,
    mat_variables: dict | None = None,
    protocol: str = catalog.DEFAULT_PROTOCOL,
    noisy_bags: bool = False,
    noise: str = catalog.DEFAULT_NOISE,
    noise_params: dict | None = None,
    preset: str | None = None,
    seed: int = 0,
    methods: list[str] = list(catalog.DEFAULT_METHODS),
    method_params: dict[str, dict | list[dict]] | None = None,
    features: str = catalog.DEFAULT_FEATURES,
    method_features: dict[str, str] | None = None,
    val_fraction: float = 0.2,
    knn: str = DEFAULT_BACKEND,
    knn_options: dict | None = None,
    conformal_alpha: float | None = catalog.DEFAULT_CONFORMAL_ALPHA,
    tracking_uri: str | None = None,
    experiment: str = catalog.DEFAULT_EXPERIMENT,
    dask_address: str | None = None,
    run_tags: dict | None = None,
    run_name: str | None = None,
    method_run_tags: dict[str, dict] | None = None,
    figures: bool = True,
    stage_tasks: bool | None = None,
) -> dict:
    """Run every stage on one data set and seed; log a parent MLflow run and a child run per method run.

    Returns a dict with the parent's MLflow ``run_id``, ``method_run_ids``
    (method run name -> MLflow run id), ``experiment``, ``tracking_uri``,
    the ``metrics`` table (one row per method run and reject option) and
    ``truth``, what "correct" meant there (true labels, or the partial-label loss), and ``labels``, what the
    run did to the labels (:func:`pll.noise.describe_noise`).
    ``method_params`` maps a method to its parameters or to a list of
    settings, each a method run of its own, named by the method and the
    parameters given (``pl_knn k=5``).
    ``dask_address``: the scheduler of the Dask cluster the kNN backend
    ``dask`` uses (the caller picks the task runner, see
    :func:`pll_pipeline.flows.cluster.on_dask`); ``run_tags``: extra MLflow tags of the
    parent, ``method_run_tags`` of each method run (by name); ``run_name``
    replaces the parent's name (data set, noise, seed); ``figures=False``
    draws no figures (a grid draws its own).  ``stage_tasks``: a Prefect
    task per stage (each cached, the method runs in parallel), or the whole
    protocol as one task; default: per stage from :data:`pll.experiment.catalog.STAGE_TASKS_MIN_ROWS` rows.
    ``preset`` fills the noise parameters ``noise_params`` leaves out (:func:`pll.experiment.presets.preset_noise_params`).
    ``protocol="dst-pll"`` prepares real-world data as the DST-PLL paper does;
    ``noisy_bags`` accepts empty bags and true labels outside their bags;
    ``mat_variables`` names a ``.mat`` file's variables (see :func:`pll.load_dataset`).
    ``knn`` with ``knn_options`` serves every neighbor search: the
    methods', the feature pipelines' and the trust score's.  ``conformal_alpha``:
    the miscoverage of the conformal prediction sets evaluated as a third
    reject option (None: not evaluated).  Stages of a run
    on more rows than :func:`pll_pipeline.cache.policy.cache_max_rows` are not cached.
    """
    noise_params = checks.pipeline(locals())["noise_params"]  # first: locals() are the parameters
    tracking_uri = resolve_tracking_uri(tracking_uri)
    plan = plan_run(methods, method_params, features, method_features)
    if knn == "dask" and dask_address:
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
        "knn": knn,
        "knn_options": knn_options or {},
        "conformal_alpha": conformal_alpha,
        "dask_address": dask_address,
    }
    name = run_name or pipeline_run_name(dataset, noise, noise_params, seed)
    if PARENT_TAG not in (run_tags or {}):
        name = unique_run_name(tracking_uri, experiment, name)
        name_flow_run(name)
    runs = ", ".join(run.name for run in plan.runs)
    description = f"Pipeline run {name}: method runs {runs}, sharing its data, noise, split, features and neighbors."
    links = flow_run_tags(name)
    run_id = start_run(tracking_uri, experiment, name, config, {KIND_TAG: RUN_KIND, **links, **(run_tags or {})},
                       description)
    tag_flow_run(run_id)
    logger = get_run_logger()
    flow_context = FlowRunContext.get()
    cluster = FlowCluster(flow_context.task_runner, since=flow_context.flow_run.start_time.timestamp())
    with ending_on_error(tracking_uri, run_id):
        raw = ingest(dataset, protocol, noisy_bags, mat_variables)
        declared = declare_protocol(plan, seed=seed, noise=noise, noise_params=noise_params,
                                    val_fraction=val_fraction, knn=knn, knn_options=knn_options,
                                    conformal_alpha=conformal_alpha)
        staged = stage_tasks if stage_tasks is not None else raw.n_rows >= catalog.STAGE_TASKS_MIN_ROWS
        # Submitted, not called: on a Dask task runner the protocol runs on a worker, like the stages would.
        result = (submit_protocol(declared, raw, cluster) if staged
                  else bounded(run_protocol, raw.n_rows).submit(declared, *cluster.send(["raw"], [raw])).result())
        lost = cluster.lost_workers()
        ds, rows, neighbor_sets, outputs, evaluation = (
            result.data, result.rows, result.neighbors, result.outputs, result.evaluation)
        summary = ds.summary()
        knn_metrics = {k: v for features, nb in neighbor_sets.items()
                       for k, v in neighbor_metrics(features, nb).items()}
        backends = {k: v for features, nb in neighbor_sets.items() for k, v in neighbor_params(features, nb).items()}
        context = {"dataset": ds.name, "noise": noise, "noise_params": noise_params or {}, "seed": seed,
                   "protocol": protocol, "knn": knn, "conformal_alpha": conformal_alpha,
                   "truth": evaluation.truth}
        method_runs = {"context": context, "runs": plan.runs, "predictions": prediction_frames(outputs, ds, rows),
                       "lambdas": DEFAULT_LAMBDAS, "tags": links, "run_tags": _with_fit_tags(method_run_tags, outputs),
                       "run_params": _conformal_params(outputs)}
        method_run_ids = log_results(tracking_uri, run_id, summary, evaluation, knn_metrics, backends, method_runs,
                                     figures)
        log_lost_workers(tracking_uri, run_id, lost)
    labels = describe_noise(summary.get("noise"), summary.get("noise_params"))
    _log_stages(logger, summary, labels, rows, neighbor_sets, knn_metrics, evaluation, outputs)
    for worker in lost:
        logger.warning(worker.line())
    table = evaluation.table
    publish_table(markdown_table(table), f"Metrics of {name} (MLflow run {run_id})")
    logger.info(f"MLflow: parent run {run_id} ({name}), method runs "
                + ", ".join(f"{n} {i}" for n, i in method_run_ids.items()))
    return {"run_id": run_id, "method_run_ids": method_run_ids, "experiment": experiment,
            "tracking_uri": tracking_uri, "metrics": table, "truth": evaluation.truth,
            "labels": labels}


def _with_fit_tags(method_run_tags, outputs):
    """Each method run's tags, plus ``pll.fit.<key>`` for what its fit reported (e.g. rounds, converged)."""
    tags = {name: dict(t) for name, t in (method_run_tags or {}).items()}
    for o in outputs:
        if o.fit:
            tags.setdefault(o.name, {}).update({f"pll.fit.{k}": str(v) for k, v in o.fit.items()})
    return tags


def _conformal_params(outputs):
    """Per method run, the weights its conformal sets were calibrated on, as the param ``conformal_weights``."""
    return {o.name: {"conformal_weights": o.fit["conformal_weights"]} for o in outputs
            if o.option == "conformal" and o.fit.get("conformal_weights")}


def _log_stages(logger, summary, labels, rows, neighbor_sets, knn, evaluation, outputs):
    """One log line per stage: what it read, did to the labels (``labels``), searched and predicted (a cached stage
    runs no code to log it).

    ``knn``: the searches' metrics (:func:`pll.experiment.neighbor_metrics`), whose recall and seconds it reports;
    ``outputs``: the method outputs, whose trust searches by cells and conformal calibrations it reports
    (:func:`_conformal_lines`).
    """
    logger.info(f"data: {summary['name']}, {summary['rows']} rows, {summary['features']} features, "
                f"{summary['classes']} classes, average bag {summary['average_bag_size']:.2f} labels")
    logger.info(f"labels: {labels}")
    logger.info(f"split: {rows.fit.size} fitting + {rows.val.size} validation + {rows.test.size} test rows")
    for features, nb in neighbor_sets.items():
        if nb is None:
            logger.info(f"neighbors {features}: none needed")
            continue
        prefix = metric_prefix(features)
        recall = f"recall {knn[f'{prefix}.recall']:.3f}" if f"{prefix}.recall" in knn else "exact"
        seconds = knn[f"{prefix}.build_seconds"] + knn[f"{prefix}.query_seconds"]
        logger.info(f"neighbors {features}: k={nb.train.indices.shape[1]}, backend {nb.train.backend}, {recall}, "
                    f"{seconds:.2f} s")
    for o in evaluation.options:
        m = o.metrics
        logger.info(f"method {o.name} [{o.option}]: accuracy {m['accuracy']:.3f}, rejects {m['rejection_rate']:.1%}, "
                    f"covered accuracy {m['covered_accuracy']:.3f} ({evaluation.truth})")
    for o in outputs:
        if o.option == "trust":
            for rows in ("test", "val"):
                if f"trust_search.{rows}.decision" in o.fit:
                    logger.info(f"trust search {o.name}, {rows} rows: {o.fit[f'trust_search.{rows}.decision']}")
    calibrations = {o.name: o.fit for o in outputs if o.option == "conformal"}
    for o in evaluation.options:
        if o.option == "conformal":
            for line in _conformal_lines(calibrations[o.name], o.metrics):
                logger.info(f"conformal sets {o.name}: {line}")


def _conformal_lines(fit, metrics):
    """What a run's conformal calibration chose, what its sets cost and cover, and what the bags alone say of them."""
    temperature = fit["conformal_temperature"]
    plausibility = "" if temperature is None else f", plausibility temperature {temperature:.3g}"
    if fit.get("conformal_weights"):
        plausibility += f", weights {fit['conformal_weights']}"
    coverage = f", coverage {metrics['coverage']:.3f}" if "coverage" in metrics else ""
    yield (f"procedure {fit['conformal_procedure']} (score {fit['conformal_score']}{plausibility}), "
           f"q̂ {fit['conformal_quantile']:.4g} from {fit['conformal_calibration_rows']} calibration rows at alpha "
           f"{fit['conformal_alpha']}; mean set size {metrics['mean_set_size']:.2f}{coverage}")
    yield (f"without true labels: calibration coverage {fit['conformal_coverage_if_worst']:.3f} if every bag's worst "
           f"candidate were true, {fit['conformal_coverage_if_best']:.3f} if its best; "
           f"{fit['conformal_bag_hit_rate']:.1%} of test sets meet their bag")
    yield from filter(None, fit["conformal_notes"].split("\n"))

"""The audit flow: rank a data set's training bags by how strongly the evidence of other rows contradicts them.

One MLflow run (``pll.kind = audit``) holds the ranked table (each row with the labels outside its bag
that the evidence favours, and their probabilities), its top rows, the mixture weights of the evidence,
a histogram of the suspicion and, where the data has true labels, how well
the ranking finds the bags that miss them; the table is also written to a
Parquet file, whole or not at all.
"""

from __future__ import annotations

from prefect import flow, get_run_logger

from pll_pipeline.flows import LOG_PRINTS, checks
from pll_pipeline.flows.links import flow_run_tags, name_flow_run, tag_flow_run
from pll.experiment import catalog
from pll.experiment import dataset_label
from pll.neighbors import DEFAULT_BACKEND
from pll.utils.atomic_files import write_atomically
from pll_pipeline.tasks.audit import audit as audit_task
from pll_pipeline.tracking.audit import log_audit
from pll_pipeline.tasks.ingest import ingest
from pll_pipeline.tasks.noise import add_noise
from pll_pipeline.flows.tracked import ending_on_error
from pll_pipeline.tracking.runs import end_run, resolve_tracking_uri, start_run, unique_run_name

DEFAULT_NEIGHBORS = 10


@flow(name="pll-audit", log_prints=LOG_PRINTS)
def audit(
    dataset: str = catalog.DEFAULT_DATASET,
    output: str = "audit.parquet",
    mat_variables: dict | None = None,
    protocol: str = catalog.DEFAULT_PROTOCOL,
    noisy_bags: bool = False,
    noise: str = catalog.DEFAULT_NOISE,
    noise_params: dict | None = None,
    preset: str | None = None,
    seed: int = 0,
    features: str = catalog.DEFAULT_FEATURES,
    n_neighbors: int = DEFAULT_NEIGHBORS,
    knn: str = DEFAULT_BACKEND,
    knn_options: dict | None = None,
    tracking_uri: str | None = None,
    experiment: str = catalog.DEFAULT_EXPERIMENT,
) -> dict:
    """Audit the bags of ``dataset`` after ``noise`` (as in the pipeline: ``auto`` keeps a data set's own bags).

    ``seed`` drives the noise and the audit's folds and networks.

    Returns a dict with ``output`` (the Parquet table: ``row``, ``bag``,
    ``suggested``, ``suspicion``, ``empty_bag``, ... most suspicious first),
    the MLflow ``run_id``, ``experiment``, ``tracking_uri`` and ``metrics``
    (:func:`pll.audit.audit_metrics`).
    """
    settled = checks.auditing(locals())  # first: locals() are the parameters
    noise_params, output = settled["noise_params"], settled["output"]
    tracking_uri = resolve_tracking_uri(tracking_uri)
    config = {"dataset": dataset, "mat_variables": mat_variables or {}, "protocol": protocol, "noisy_bags": noisy_bags,
              "noise": noise, "noise_params": noise_params or {}, "seed": seed, "features": features,
              "n_neighbors": n_neighbors, "knn": knn, "knn_options": knn_options or {},
              "output": str(output)}
    name = unique_run_name(tracking_uri, experiment, f"audit {dataset_label(dataset)}")
    name_flow_run(name)
    run_id = start_run(tracking_uri, experiment, name, config, {"pll.kind": "audit", **flow_run_tags(name)},
                       f"Audit of the training bags of {dataset_label(dataset)}: each ranked by the probability "
                       f"outside it, from cross-fitted PRODEN networks and its {n_neighbors} nearest other rows.")
    tag_flow_run(run_id)
    with ending_on_error(tracking_uri, run_id):
        ds = add_noise(ingest(dataset, protocol, noisy_bags, mat_variables), noise, noise_params, seed)
        table = audit_task(ds, features, n_neighbors, knn, knn_options, seed)
        write_atomically({output: lambda path: table.to_parquet(path, index=False)})
        metrics = log_audit(tracking_uri, run_id, table, ds)
    end_run(tracking_uri, run_id)
    get_run_logger().info(f"audit of {ds.name}: {len(table)} rows, {int(metrics['empty_bags'])} empty bags; "
                          f"table {output}; MLflow run {run_id}")
    return {"output": str(output), "run_id": run_id, "experiment": experiment, "tracking_uri": tracking_uri,
            "metrics": metrics, "table": table}

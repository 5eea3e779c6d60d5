"""Links into the MLflow and Prefect UIs, and what the MLflow server's REST API says about a run's tree.

MLflow 3 greets a new browser with the GenAI view of an experiment (traces, evaluation runs); the runs
table needs the model-training view, and the method runs sit below their pipeline (and grid) runs.
So a link carries both: ``workflowType=machine_learning`` and a search filter on
``tags.pll.kind = 'method'``, which lists the method runs flat, every one with the same metric columns;
a run's link opens MLflow's compare view of its method runs.  Nothing here imports MLflow: the server is
asked over its REST API, so ``pll ui`` starts in a second.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request

from pll.errors import TrackingStoreError

METHOD_FILTER = "tags.pll.kind = 'method'"
"""The runs table's search filter that lists the method runs."""
PARENT_TAG = "mlflow.parentRunId"
FLOW_RUN_ID_TAG = "prefect.flow_run_id"
FLOW_RUN_NAME_TAG = "prefect.flow_run_name"
FLOW_RUN_URL_TAG = "prefect.flow_run_url"
"""Tags a tracked run carries of the Prefect flow run that made it."""
LOST_WORKERS_TAG = "pll.dask.lost_workers"
RERUN_TASKS_TAG = "pll.dask.rerun_tasks"
"""Tags of a pipeline run during which the Dask cluster lost workers: which, and the tasks they held that ran again."""


# --- links -------------------------------------------------------------------------------------------
# As MLflow 3.17's UI reads them (its hash routes ``/experiments/:id/runs`` and ``/compare-runs``; the runs page
# takes ``workflowType`` and ``searchFilter`` from its query, the compare page JSON lists ``runs`` and ``experiments``).


def runs_table_url(base: str, experiment_id: str) -> str:
    """The experiment's runs table in the model-training view, filtered to the method runs."""
    query = urllib.parse.urlencode({"workflowType": "machine_learning", "searchFilter": METHOD_FILTER},
                                   quote_via=urllib.parse.quote)
    return f"{base}/#/experiments/{experiment_id}/runs?{query}"


def compare_url(base: str, run_ids: list[str], experiment_ids: list[str]) -> str:
    """MLflow's compare view of ``run_ids`` (its route takes both lists as JSON)."""
    def as_json(values):
        return urllib.parse.quote(json.dumps(list(values), separators=(",", ":")))

    return f"{base}/#/compare-runs?runs={as_json(run_ids)}&experiments={as_json(experiment_ids)}"


def run_url(base: str, experiment_id: str, run_id: str) -> str:
    return f"{base}/#/experiments/{experiment_id}/runs/{run_id}"


def prefect_ui_url(api_url: str) -> str:
    """Prefect's UI beside its API (``PREFECT_UI_URL`` when the two live apart)."""
    return (os.environ.get("PREFECT_UI_URL") or api_url.rstrip("/").removesuffix("/api")).rstrip("/")


def prefect_link(api_url: str, run_tags: dict | None = None) -> str:
    """The flow run that made ``run_tags``' run, else the list of flow runs."""
    tags = run_tags or {}
    if tags.get(FLOW_RUN_URL_TAG):
        return tags[FLOW_RUN_URL_TAG]
    ui = prefect_ui_url(api_url)
    if tags.get(FLOW_RUN_ID_TAG):
        return f"{ui}/runs/flow-run/{tags[FLOW_RUN_ID_TAG]}"
    return f"{ui}/runs"


# --- the server's REST API ---------------------------------------------------------------------------


def _api(base: str, path: str, payload: dict | None = None, params: dict | None = None) -> dict | None:
    """One MLflow REST call; None where the server answers 404 (no such experiment or run)."""
    url = f"{base}/api/2.0/mlflow/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise TrackingStoreError(f"MLflow at {base} answered {path} with HTTP {exc.code}: {exc.read()[:300]!r}") from None


def _tags(run: dict) -> dict:
    return {t["key"]: t["value"] for t in run.get("data", {}).get("tags", [])}


def _all_runs(base: str, experiment_id: str) -> list[dict]:
    """Every run of the experiment, page by page (the tree is built here: one query per level would be slower)."""
    runs, token = [], None
    while True:
        body = {"experiment_ids": [experiment_id], "max_results": 1000, **({"page_token": token} if token else {})}
        answer = _api(base, "runs/search", body) or {}
        runs += answer.get("runs", [])
        token = answer.get("next_page_token")
        if not token:
            return runs


def method_runs_below(base: str, experiment_id: str, run_id: str) -> list[str]:
    """Ids of the method runs at any depth below ``run_id`` (a grid's sit two levels down), oldest first."""
    children: dict[str, list[dict]] = {}
    for run in _all_runs(base, experiment_id):
        parent = _tags(run).get(PARENT_TAG)
        if parent:
            children.setdefault(parent, []).append(run)
    found, level = [], [run_id]
    while level:
        runs = [child for parent in level for child in children.get(parent, [])]
        found += [r for r in runs if _tags(r).get("pll.kind") == "method"]
        level = [r["info"]["run_id"] for r in runs]
    found.sort(key=lambda r: (int(r["info"].get("start_time", 0)), r["info"]["run_id"]))
    return [r["info"]["run_id"] for r in found]


def links(base: str, experiment: str, run_id: str | None = None) -> tuple[str, str, dict]:
    """(what the link opens, the MLflow link, the run's tags) for an experiment or a run on the server at ``base``."""
    if run_id:
        answer = _api(base, "runs/get", params={"run_id": run_id})
        if answer is None:
            raise TrackingStoreError(f"no run {run_id!r} in this tracking store")
        run = answer["run"]
        experiment_id = run["info"]["experiment_id"]
        methods = method_runs_below(base, experiment_id, run_id)
        if not methods:
            return f"run {run_id}", run_url(base, experiment_id, run_id), _tags(run)
        return (f"the {len(methods)} method runs of run {run_id}", compare_url(base, methods, [experiment_id]),
                _tags(run))
    answer = _api(base, "experiments/get-by-name", params={"experiment_name": experiment})
    if answer is None:
        return f"the experiments (none is named {experiment!r} yet)", f"{base}/#/experiments", {}
    experiment_id = answer["experiment"]["experiment_id"]
    return f"the method runs of experiment {experiment!r}", runs_table_url(base, experiment_id), {}

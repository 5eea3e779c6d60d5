"""``pll ui``: the MLflow UI of a tracking store, opened where the method runs can be compared.

MLflow 3 greets a new browser with the GenAI view of an experiment (traces, evaluation runs); the runs
table needs the model-training view, and the method runs sit below their pipeline (and grid) runs.
So ``pll ui`` prints a link that carries both: ``workflowType=machine_learning`` and a search filter on
``tags.pll.kind = 'method'``, which lists the method runs flat, every one with the same metric columns.
With ``--run`` the link opens MLflow's compare view of that run's method runs instead.

The server is ``mlflow server`` in a process group of its own, on 127.0.0.1: Ctrl-C or SIGTERM stops the
whole group, and :mod:`pll_pipeline.flows.lifeline` stops it if ``pll ui`` is killed.  Its job runner (MLflow's
background workers for GenAI judges, seven processes) is turned off: browsing runs needs none of it.
Nothing here imports MLflow: the server is asked over its REST API, so ``pll ui`` starts in a second.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import suppress

from pll.experiment import catalog
from pll.errors import PllError

METHOD_FILTER = "tags.pll.kind = 'method'"
"""The runs-table filter that leaves the method runs: the rows people compare."""

PARENT_TAG = "mlflow.parentRunId"
FLOW_RUN_ID_TAG = "prefect.flow_run_id"
FLOW_RUN_URL_TAG = "prefect.flow_run_url"
STARTUP_TIMEOUT_SECONDS = 120
"""How long the server may take to answer; it imports MLflow and migrates a new store (20 s when loaded)."""
GRACE_SECONDS = 10
"""How long the server's processes may take to stop after SIGTERM before they get SIGKILL."""


class UiError(PllError):
    """The UI could not start or the run it should open does not exist."""


class ServerError(UiError):
    """The MLflow server failed: its log, named in the message, is kept (on success it is removed)."""


def add_arguments(parser) -> None:
    parser.add_argument("--tracking-uri", default=None,
                        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db); "
                        "an http(s) server is linked to, not started")
    parser.add_argument("--experiment", default=catalog.DEFAULT_EXPERIMENT,
                        help=f"the experiment whose method runs to list (default: {catalog.DEFAULT_EXPERIMENT})")
    parser.add_argument("--run", default=None, metavar="RUN_ID",
                        help="a pipeline or grid run: link to MLflow's compare view of its method runs")
    parser.add_argument("--port", type=int, default=None, help="the port on 127.0.0.1 (default: a free one)")


def invoked_as() -> list[str]:
    """The words that started this ``pll``, so that a command it prints runs as printed.

    ``pll`` where the PATH finds this same program; else its path as typed
    (``.venv/bin/pll`` after ``make run``); ``python -m pll_pipeline.flows.cli`` when run as a module.
    """
    program = sys.argv[0] if sys.argv else ""
    if os.path.basename(program) == "pll":
        found = shutil.which("pll")
        return ["pll"] if found and os.path.realpath(found) == os.path.realpath(program) else [program]
    if program.endswith(os.path.join("flows", "cli.py")):
        return [sys.executable, "-m", "pll_pipeline.flows.cli"]
    return ["pll"]


def ui_hint(tracking_uri: str, *, run_id: str | None = None, experiment: str | None = None) -> str:
    """The ``pll ui`` command that opens what a command just logged (printed at the end of run, benchmark, audit).

    It names ``pll`` as it was invoked (:func:`invoked_as`).
    """
    words = [*invoked_as(), "ui", "--tracking-uri", tracking_uri]
    if experiment and experiment != catalog.DEFAULT_EXPERIMENT and not run_id:  # a run names its experiment
        words += ["--experiment", experiment]
    if run_id:
        words += ["--run", run_id]
    return shlex.join(words)


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
        raise UiError(f"MLflow at {base} answered {path} with HTTP {exc.code}: {exc.read()[:300]!r}") from None


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
            raise UiError(f"no run {run_id!r} in this tracking store")
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


# --- the server ----------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(tracking_uri: str, port: int) -> list[str]:
    from pll_pipeline.tracking.store import artifact_location

    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", tracking_uri,
               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    artifacts = artifact_location(tracking_uri)
    if artifacts:  # beside the database, as the runs write them, not in the working directory
        command += ["--artifacts-destination", artifacts]
    return command


def start_server(tracking_uri: str, port: int, log_path: str) -> subprocess.Popen:
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with open(log_path, "ab") as log:
        return subprocess.Popen(server_command(tracking_uri, port), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)


def wait_until_up(process: subprocess.Popen, base: str, log_path: str,
                  timeout: float = STARTUP_TIMEOUT_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerError(f"the MLflow server exited with status {process.returncode} (its log: {log_path})")
        with suppress(OSError):
            with urllib.request.urlopen(f"{base}/health", timeout=2) as response:
                if response.status == 200:
                    return
        time.sleep(0.5)
    raise ServerError(f"the MLflow server did not answer within {timeout:.0f} s (its log: {log_path})")


def stop_server(process: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL to what is left after the grace period."""
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        pass
    with suppress(ProcessLookupError):  # uvicorn may outlive the mlflow command that started it
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


class _Terminated(Exception):
    """SIGTERM, turned into an exception so that the server is stopped on the way out."""


def _raise_terminated(signum, frame):
    raise _Terminated


def print_links(tracking_uri: str, base: str, experiment: str, run_id: str | None) -> None:
    what, link, tags = links(base, experiment, run_id)
    print(f"MLflow UI of {tracking_uri}: {what}")
    print(f"  {link}")
    api_url = os.environ.get("PREFECT_API_URL")
    if api_url:
        print(f"Prefect flow runs:\n  {prefect_link(api_url, tags)}")
    sys.stdout.flush()


def main(args) -> int:
    """``pll ui``: start the server (unless the store is a server), print the links, wait for Ctrl-C."""
    from pll_pipeline.tracking.store import resolve_tracking_uri

    from . import lifeline

    tracking_uri = resolve_tracking_uri(args.tracking_uri)
    if tracking_uri.startswith(("http://", "https://")):
        print_links(tracking_uri, tracking_uri.rstrip("/"), args.experiment, args.run)
        return 0
    port = args.port or free_port()
    base = f"http://127.0.0.1:{port}"
    log_fd, log_path = tempfile.mkstemp(prefix="pll-ui-", suffix=".log")
    os.close(log_fd)
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    # Ctrl-C stops the server even where pll ui was started with SIGINT ignored, as a shell starts background jobs.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    process = watchdog = None
    keep_log = False
    try:
        process = start_server(tracking_uri, port, log_path)
        watchdog = lifeline.tie(process)
        wait_until_up(process, base, log_path)
        print_links(tracking_uri, base, args.experiment, args.run)
        print(f"Serving on {base} (its log: {log_path}); Ctrl-C stops it.", flush=True)
        process.wait()
        raise ServerError(f"the MLflow server stopped with status {process.returncode} (its log: {log_path})")
    except (KeyboardInterrupt, _Terminated):
        print("pll ui: stopped", file=sys.stderr)
        return 0
    except ServerError:
        keep_log = True
        raise
    finally:
        # A second Ctrl-C or SIGTERM must not cut the cleanup short; it ends within GRACE_SECONDS.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if process is not None:
            stop_server(process)
        if watchdog is not None:
            try:
                watchdog.wait(GRACE_SECONDS + 5)  # it exits once the server has
            except subprocess.TimeoutExpired:
                watchdog.kill()
                watchdog.wait()
        if not keep_log:
            with suppress(OSError):
                os.unlink(log_path)
        signal.signal(signal.SIGINT, previous_int)
        signal.signal(signal.SIGTERM, previous)

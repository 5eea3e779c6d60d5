"""The team setup on real servers: PostgreSQL, MLflow's and Prefect's servers on it, Dask workers logging through them.

One set of servers for the module, started in a temporary folder by ``python -m pll_pipeline.deployments.team
start`` with the real PostgreSQL binaries (the module is skipped, with the reason, where they are absent), and
stopped by its last test, which checks that nothing is left running.  The database password comes from a file of
mode 0600; no MLflow param or tag, no Prefect flow-run parameter, no server's command line may hold it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request
from importlib.util import find_spec
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

import pll
from pll_pipeline.deployments.team.services import (
    PASSWORD_FILE_ENV,
    Layout,
    TeamSetupError,
    create_databases,
    database_url,
    postgres_binaries,
)
from pll_pipeline.tracking.grid import CELL_KEY_TAG
from tests.processes import descendants, still_running

ROOT = Path(__file__).resolve().parents[2]
TEAM = [sys.executable, "-m", "pll_pipeline.deployments.team"]
CELLS = 8

try:
    postgres_binaries()
except TeamSetupError as exc:
    pytest.skip(f"no PostgreSQL here: {exc}", allow_module_level=True)
if find_spec("psycopg") is None:
    pytest.skip("no psycopg, MLflow's PostgreSQL driver: pip install 'pll-reject[pipeline,team]'", allow_module_level=True)


def _clean_env(**extra):
    """This environment without the session's Prefect server and tracking store, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API_URL", "MLFLOW_", "PLL_TEAM_"))}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


@pytest.fixture(scope="module")
def base():
    """A folder under /tmp that PostgreSQL's user may pass through when root starts it (pytest's is 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="pll-team-"))
    folder.chmod(0o711)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def team(base):
    """The running servers: the folder's layout, the users' environment, and the password."""
    password = f"pll-team-{secrets.token_hex(8)}"
    password_file = base / "password"
    fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, password.encode() + b"\n")
    os.close(fd)
    layout = Layout(base / "team")
    env = _clean_env(**{PASSWORD_FILE_ENV: str(password_file)})
    started = subprocess.run([*TEAM, "start", str(layout.folder), "--dask-workers", "2"], env=env,
                             capture_output=True, text=True, timeout=600)
    try:
        assert started.returncode == 0, started.stderr[-3000:]
        exports = dict(line.removeprefix("export ").split("=", 1) for line in started.stdout.splitlines()
                       if line.startswith("export "))
        yield {"layout": layout, "env": {**_clean_env(), **exports}, "password": password, "exports": exports,
               "password_env": env}
    finally:
        subprocess.run([*TEAM, "stop", str(layout.folder)], env=env, capture_output=True, timeout=300)


def _pll(*args, env, cwd, timeout=900):
    return subprocess.run([sys.executable, "-m", "pll_pipeline.flows.cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def _session(commands, env, cwd):
    """Several pll commands in one process (tests/cli_session.py); each command's stdout."""
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "cli_session.py"), json.dumps(commands)],
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return [part.split("\n", 1)[1] for part in done.stdout.split("$ pll ")[1:]]


def _flow_runs(api_url, flow_name):
    """The flow runs of ``flow_name`` that the Prefect server recorded, read over its REST API."""
    body = json.dumps({"flows": {"name": {"any_": [flow_name]}}, "limit": 200}).encode()
    request = urllib.request.Request(f"{api_url}/flow_runs/filter", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _all_runs(uri):
    client = MlflowClient(uri)
    experiments = client.search_experiments(view_type=ViewType.ALL)
    return client.search_runs([e.experiment_id for e in experiments], run_view_type=ViewType.ALL, max_results=50000)


def test_the_team_env_file_is_private_and_names_loopback_servers(team):
    layout, exports = team["layout"], team["exports"]
    assert layout.env_file.stat().st_mode & 0o777 == 0o600
    assert exports["MLFLOW_TRACKING_URI"].startswith("http://127.0.0.1:")
    assert exports["PREFECT_API_URL"].startswith("http://127.0.0.1:") and exports["PREFECT_API_URL"].endswith("/api")
    assert exports["PLL_TEAM_DASK_ADDRESS"].startswith("tcp://127.0.0.1:")
    shown = subprocess.run([*TEAM, "env", str(layout.folder)], env=_clean_env(), capture_output=True, text=True)
    assert shown.returncode == 0 and shown.stdout == layout.env_file.read_text()
    assert team["password"] not in shown.stdout


def test_run_train_and_score_log_to_the_team_servers(team, tmp_path):
    env, uri = team["env"], team["exports"]["MLFLOW_TRACKING_URI"]
    ds = pll.load_dataset("iris")
    pd.DataFrame(ds.X, columns=[f"x{j}" for j in range(4)]).to_csv(tmp_path / "new.csv", index=False)
    run, train = _session([["run", "--dataset", "iris", "--methods", "pl_knn,dst_pll"],
                           ["train", "--dataset", "iris", "--method", "pl_knn"]], env, tmp_path)
    model_uri = train.strip().splitlines()[-1]
    assert model_uri.startswith("models:/m-")
    (score,) = _session([["score", "--model", model_uri, "--input", "new.csv", "--output", "scored.parquet"]],
                        env, tmp_path)
    assert f"Scored {len(ds.X)} rows" in score
    assert f"Tracking store:    {uri}" in run

    runs = _all_runs(uri)  # the module's first runs
    assert sorted(r.data.tags.get("pll.kind") for r in runs) == ["method", "method", "pipeline", "scoring", "training"]
    assert all(r.info.status == "FINISHED" for r in runs)
    methods = [r for r in runs if r.data.tags.get("pll.kind") == "method"]
    assert all("native.risk_0.10" in r.data.metrics and "accuracy" in r.data.metrics for r in methods)
    # the artifacts went through the tracking server into the team folder
    assert any(team["layout"].artifacts.rglob("model.pkl")) or any(team["layout"].artifacts.rglob("*.parquet"))

    api = team["exports"]["PREFECT_API_URL"]
    for flow in ("pll-pipeline", "pll-train", "pll-score"):
        states = [r["state_type"] for r in _flow_runs(api, flow)]
        assert "COMPLETED" in states, (flow, states)


def test_eight_grid_cells_at_once_on_the_team_dask_workers_all_land(team, tmp_path):
    env, uri = team["env"], team["exports"]["MLFLOW_TRACKING_URI"]
    grid = {"name": "team-eight", "experiment": "team-grid", "max_concurrency": CELLS, "datasets": ["iris"],
            "noise": [{"model": "class_dependent", "p": 0.7, "eps": 0.7}], "seeds": list(range(CELLS)),
            "methods": {"pl_knn": {"n_neighbors": 5}}, "features": "minmax", "knn": "exact"}
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(grid))
    done = _pll("benchmark", "grid.yaml", "--dask-address", team["exports"]["PLL_TEAM_DASK_ADDRESS"], env=env,
                cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"Cells: {CELLS} of {CELLS} finished, 0 failed" in done.stdout

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("team-grid")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    by_kind = {kind: [r for r in runs if r.data.tags.get("pll.kind") == kind] for kind in ("grid", "pipeline", "method")}
    assert [len(by_kind[k]) for k in ("grid", "pipeline", "method")] == [1, CELLS, CELLS]
    assert all(r.info.status == "FINISHED" for r in runs)
    assert len({r.data.tags[CELL_KEY_TAG] for r in by_kind["method"]}) == CELLS
    assert sorted(r.data.params["seed"] for r in by_kind["pipeline"]) == [str(s) for s in range(CELLS)]
    # every cell's method run holds the same, full set of metrics
    keys = [frozenset(r.data.metrics) for r in by_kind["method"]]
    assert len(set(keys)) == 1 and {"accuracy", "native.risk_0.10", "trust.risk_0.10"} <= keys[0]
    history = client.get_metric_history(by_kind["method"][0].info.run_id, "native.risk_by_lambda")
    assert len(history) > 1
    print(f"{CELLS} cells at once: {len(runs)} runs, {len(keys[0])} metrics in each of {CELLS} method runs")

    api = team["exports"]["PREFECT_API_URL"]
    pipelines = [r for r in _flow_runs(api, "pll-pipeline") if r.get("parent_task_run_id")]
    assert sum(r["state_type"] == "COMPLETED" for r in pipelines) >= CELLS
    assert [r["state_type"] for r in _flow_runs(api, "pll-benchmark")] == ["COMPLETED"]


def test_pll_ui_links_to_the_team_tracking_server(team, tmp_path):
    uri = team["exports"]["MLFLOW_TRACKING_URI"]
    done = _pll("ui", "--experiment", "team-grid", env=team["env"], cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"MLflow UI of {uri}: ")
    link = lines[1].strip()
    assert link.startswith(f"{uri}/#/experiments/")
    with urllib.request.urlopen(link.split("#")[0], timeout=30) as page:
        assert page.status == 200


def _cmdlines(pids):
    texts = []
    for pid in pids:
        try:
            texts.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            pass
    return texts


def _server_pids(layout):
    """Every process of the team's servers: the recorded process groups and PostgreSQL's processes."""
    services = layout.load()["services"]
    pids = set()
    for recorded in services.values():
        pids.add(recorded["pid"])
        pids.update(p.pid for p in descendants(recorded["pid"]))
    postmaster = int((layout.data / "postmaster.pid").read_text().split()[0])
    pids.add(postmaster)
    pids.update(p.pid for p in descendants(postmaster))
    return pids


def test_no_password_in_runs_flow_parameters_or_command_lines(team, tmp_path):
    """Also with the store given as a database URL with the password, through MLFLOW_TRACKING_URI."""
    layout, password = team["layout"], team["password"]
    port = layout.load()["ports"]["postgres"]
    create_databases(port, password, names=("direct",))
    direct = database_url("postgresql+psycopg", password, port, "direct")
    env = {**team["env"], "MLFLOW_TRACKING_URI": direct}

    # On the command line, a URI with a password is refused in one line that does not repeat it.
    refused = _pll("run", "--dataset", "iris", "--tracking-uri", direct, env=team["env"], cwd=tmp_path)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("pll: error: ") and refused.stderr.count("\n") == 1
    assert "MLFLOW_TRACKING_URI" in refused.stderr and password not in refused.stderr

    done = _pll("run", "--dataset", "iris", "--methods", "pl_knn", "--experiment", "direct", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert password not in done.stdout + done.stderr
    assert "Tracking store:    postgresql+psycopg://pll:***@" in done.stdout

    # pll ui on that store: its MLflow server gets the URI through its environment, not its command line
    ui = subprocess.Popen([sys.executable, "-m", "pll_pipeline.flows.cli", "ui", "--experiment", "direct"], env=env,
                          cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        while not (lines and lines[-1].startswith("Serving on ")):
            line = ui.stdout.readline()
            assert line, f"pll ui ended early: {ui.wait()} {ui.stderr.read()}"
            lines.append(line)
        assert password not in "".join(lines)
        ui_processes = descendants(ui.pid)
        assert ui_processes
        assert not [c for c in _cmdlines(p.pid for p in ui_processes) if password in c]
    finally:
        ui.send_signal(signal.SIGTERM)
        ui.wait(60)
    assert not still_running(ui_processes, 30)

    by_store = {"team": _all_runs(team["exports"]["MLFLOW_TRACKING_URI"]), "direct": _all_runs(direct)}
    assert len(by_store["team"]) >= 2 + 2 * CELLS + 1 and len(by_store["direct"]) == 2
    for store, runs in by_store.items():
        for run in runs:
            recorded = {**run.data.params, **run.data.tags}
            leaks = [k for k, v in recorded.items() if password in k or password in str(v)]
            assert not leaks, (store, run.info.run_name, leaks)

    api = team["exports"]["PREFECT_API_URL"]
    flow_runs = [r for flow in ("pll-pipeline", "pll-benchmark", "pll-train", "pll-score")
                 for r in _flow_runs(api, flow)]
    assert len(flow_runs) >= CELLS + 4
    assert not [r["name"] for r in flow_runs if password in json.dumps(r)]

    cmdlines = _cmdlines(_server_pids(layout))
    assert any("mlflow" in c and "server" in c for c in cmdlines) and any("postgres" in c for c in cmdlines)
    assert not [c for c in cmdlines if password in c]


def test_a_password_file_others_can_read_is_refused(team, base):
    loose = base / "loose-password"
    loose.write_text("secret\n")
    loose.chmod(0o644)
    done = subprocess.run([*TEAM, "start", str(base / "other")], env=_clean_env(**{PASSWORD_FILE_ENV: str(loose)}),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == f"team: error: the password file ({PASSWORD_FILE_ENV}) {loose} may be read by others " \
                          f"(mode 0644); chmod 600 {loose}\n"
    assert not (base / "other" / "postgres").exists()


def test_stop_leaves_nothing_running(team):
    layout = team["layout"]
    processes = [psutil.Process(pid) for pid in _server_pids(layout) if psutil.pid_exists(pid)]
    assert len(processes) >= 6  # PostgreSQL's, MLflow's, Prefect's, the Dask scheduler's and workers'
    done = subprocess.run([*TEAM, "stop", str(layout.folder)], env=team["password_env"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "stopped: dask-workers, dask-scheduler, prefect, mlflow, postgres\n"
    assert not still_running(processes, 30)
    assert not (layout.data / "postmaster.pid").exists()
    assert layout.load()["services"] == {}
    again = subprocess.run([*TEAM, "stop", str(layout.folder)], env=team["password_env"], capture_output=True,
                           text=True, timeout=120)
    assert again.stdout == "stopped: nothing was running\n"

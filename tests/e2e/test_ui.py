"""`pll ui` starts MLflow's UI on the store, prints links that open the method runs, and leaves nothing running.

No browser here (Chromium is not installed on the test machines): the links' parameters are checked against
what the UI's routes read, and the server is asked the link's own search filter over its REST API.
"""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from mlflow import MlflowClient

from tests.processes import descendants, still_running

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store shaped like `pll run`'s: a pipeline run with two method runs below it, and a grid above another.

    One for the module (creating a store's tables takes seconds): the tests only read it.
    """
    uri = f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("pll")
    pipeline = client.create_run(exp, run_name="digits / seed 0",
                                 tags={"pll.kind": "pipeline", "prefect.flow_run_id": "f-123"}).info.run_id
    methods = [client.create_run(exp, run_name=name, tags={"pll.kind": "method", "mlflow.parentRunId": pipeline})
               .info.run_id for name in ("dst_pll", "pl_knn")]
    grid = client.create_run(exp, run_name="grid smoke", tags={"pll.kind": "grid"}).info.run_id
    inner = client.create_run(exp, run_name="iris / seed 1",
                              tags={"pll.kind": "pipeline", "mlflow.parentRunId": grid}).info.run_id
    nested = client.create_run(exp, run_name="pl_knn", tags={"pll.kind": "method", "mlflow.parentRunId": inner})
    return uri, exp, pipeline, methods, grid, nested.info.run_id


def _start(*args, env=None):
    proc = subprocess.Popen([sys.executable, "-m", "pll_pipeline.flows.cli", "ui", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    lines = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line, f"pll ui ended early: {proc.wait()} {proc.stderr.read()}"
        lines.append(line.rstrip("\n"))
        if line.startswith("Serving on "):
            return proc, lines
    proc.kill()
    raise AssertionError(f"pll ui printed no 'Serving on' line: {lines}")


def _link(lines, after):
    return lines[next(i for i, line in enumerate(lines) if line.startswith(after)) + 1].strip()


def _hash_route(url):
    parts = urllib.parse.urlsplit(url)
    path, _, query = parts.fragment.partition("?")
    return f"{parts.scheme}://{parts.netloc}", path, urllib.parse.parse_qs(query)


def _stop_and_check(proc, sig, lines):
    tree = descendants(proc.pid)
    assert any("mlflow" in " ".join(p.cmdline()) for p in tree), [p.cmdline() for p in tree]
    proc.send_signal(sig)
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    assert not still_running(tree, timeout=30), [p.cmdline() for p in tree]
    log = lines[-1].split("(its log: ", 1)[1].split(")", 1)[0]
    assert not Path(log).exists()  # kept only when the server fails


def test_pll_ui_links_the_method_runs_and_ctrl_c_stops_everything(store):
    uri, exp, pipeline, methods, grid, nested = store
    proc, lines = _start("--tracking-uri", uri, env={"PREFECT_API_URL": ""})  # no Prefect server: no Prefect link
    try:
        link = _link(lines, "MLflow UI of ")
        base, path, query = _hash_route(link)
        assert base.startswith("http://127.0.0.1:")
        assert path == f"/experiments/{exp}/runs"
        assert query == {"workflowType": ["machine_learning"], "searchFilter": ["tags.pll.kind = 'method'"]}
        with urllib.request.urlopen(f"{base}/health", timeout=10) as answer:
            assert answer.status == 200
        with urllib.request.urlopen(f"{base}/", timeout=10) as answer:  # the UI's page itself
            assert b"<html" in answer.read().lower()
        # The server, asked the link's own filter, lists exactly the method runs.
        request = urllib.request.Request(
            f"{base}/api/2.0/mlflow/runs/search", headers={"Content-Type": "application/json"},
            data=json.dumps({"experiment_ids": [exp], "filter": query["searchFilter"][0]}).encode())
        with urllib.request.urlopen(request, timeout=30) as answer:
            found = {r["info"]["run_id"] for r in json.loads(answer.read())["runs"]}
        assert found == {*methods, nested}
        assert not any("Prefect" in line for line in lines)
        # A tracking server is linked to, not started: the same link, and pll ui exits at once.
        remote = subprocess.run([sys.executable, "-m", "pll_pipeline.flows.cli", "ui", "--tracking-uri", base], cwd=ROOT,
                                capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert remote.returncode == 0, remote.stderr
        assert _link(remote.stdout.splitlines(), "MLflow UI of ") == link
    finally:
        _stop_and_check(proc, signal.SIGINT, lines)


def test_pll_ui_run_links_the_compare_view_and_sigterm_stops_everything(store):
    uri, exp, pipeline, methods, grid, nested = store
    env = {"PREFECT_API_URL": "http://127.0.0.1:4299/api"}
    proc, lines = _start("--tracking-uri", uri, "--run", grid, env=env)
    try:
        base, path, query = _hash_route(_link(lines, "MLflow UI of "))
        assert path == "/compare-runs"
        assert json.loads(query["runs"][0]) == [nested]  # two levels below the grid run
        assert json.loads(query["experiments"][0]) == [exp]
        assert _link(lines, "Prefect flow runs") == "http://127.0.0.1:4299/runs"
    finally:
        _stop_and_check(proc, signal.SIGTERM, lines)
    proc, lines = _start("--tracking-uri", uri, "--run", pipeline, env=env)
    try:
        _, path, query = _hash_route(_link(lines, "MLflow UI of "))
        assert path == "/compare-runs" and json.loads(query["runs"][0]) == methods
        assert _link(lines, "Prefect flow runs") == "http://127.0.0.1:4299/runs/flow-run/f-123"
    finally:
        _stop_and_check(proc, signal.SIGINT, lines)


def test_pll_ui_refuses_an_unknown_run_and_leaves_nothing(store):
    uri = store[0]
    proc = subprocess.run([sys.executable, "-m", "pll_pipeline.flows.cli", "ui", "--tracking-uri", uri, "--run", "nosuchrun"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("pll: error: no run 'nosuchrun'"), proc.stderr
    assert "Traceback" not in proc.stderr

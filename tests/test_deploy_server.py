"""The README's deployment commands against a real local Prefect server and a process worker on loopback.

Also what ``pll serve`` serves: every deployment of the file, with its
schedules (cron and timezone).
"""

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.processes import free_port, stop
from flows.serve import load_deployment_specs, to_runner_deployments

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_serve_keeps_every_deployment_with_its_schedules():
    specs = load_deployment_specs()
    deployments = {d.name: d for d in to_runner_deployments(specs)}
    assert set(deployments) == {s["name"] for s in specs}
    assert "benchmark-nightly" in deployments
    for spec in specs:
        want = [(s["cron"], s.get("timezone")) for s in spec.get("schedules") or []]
        got = [(s.schedule.cron, s.schedule.timezone) for s in deployments[spec["name"]].schedules or []]
        assert got == want, spec["name"]
    assert deployments["benchmark-nightly"].parameters == {"grid": "benchmarks/grids/smoke.yaml"}


def wait_healthy(url, process, timeout=240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the Prefect server exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(1)
    raise TimeoutError(f"no answer from {url} within {timeout} s")


@pytest.mark.slow
def test_deploy_start_a_worker_and_trigger_a_run(tmp_path):
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_API_URL": api,
        "PLL_PROJECT_DIR": str(ROOT),
        # Flow runs work in PLL_PROJECT_DIR: keep their MLflow store and stage cache out of the repository.
        "MLFLOW_TRACKING_URI": uri,
        "PLL_CACHE_DIR": str(tmp_path / "cache"),
    }
    prefect = str(BIN / "prefect")

    def run(*args):
        done = subprocess.run([prefect, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    processes = []
    try:
        server_log = open(tmp_path / "server.log", "w")
        processes.append(subprocess.Popen([prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                                          cwd=tmp_path, env=env, stdout=server_log, stderr=subprocess.STDOUT))
        wait_healthy(f"{api}/health", processes[0])
        run("work-pool", "create", "pll-process", "--type", "process")
        # Only the ad-hoc pipeline: --all would also schedule score-incoming every ten minutes.
        out = run("--no-prompt", "deploy", "--prefect-file", "deployments/prefect.yaml", "--name", "pipeline")
        assert "pll-pipeline/pipeline" in out
        worker_log = open(tmp_path / "worker.log", "w")
        processes.append(subprocess.Popen([prefect, "worker", "start", "--pool", "pll-process"],
                                          cwd=tmp_path, env=env, stdout=worker_log, stderr=subprocess.STDOUT))
        out = run("deployment", "run", "pll-pipeline/pipeline", "--param", "dataset=iris", "--param", "seed=1",
                  "--param", 'methods=["pl_knn"]', "--watch", "--watch-timeout", "540")
        assert "Completed" in out, out
    finally:
        stop(processes)

    client = MlflowClient(uri)
    (run_,) = client.search_runs([client.get_experiment_by_name("pll").experiment_id])
    assert run_.info.status == "FINISHED"
    assert (run_.data.params["dataset"], run_.data.params["seed"]) == ("iris", "1")
    assert run_.data.metrics["pl_knn.native.accuracy"] > 0.8

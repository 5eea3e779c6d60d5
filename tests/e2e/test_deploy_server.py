"""The documented deployment commands, run as written against a real Prefect server on loopback.

The Deployments section of docs/operations.md has three shell blocks: start the server, deploy to the work pool
and start a worker, and ``pll serve``.  Each test runs them line by line in a fresh environment (no
``PREFECT_*`` variables but an empty Prefect home), on a free port instead of 4200 and with the
server's scheduler off, so that the nightly and ten-minute schedules never start a run here; the worker
and ``pll serve`` look for runs to start every second instead of every ten (Prefect's settings
``PREFECT_WORKER_QUERY_SECONDS`` and ``PREFECT_RUNNER_POLL_FREQUENCY``), so that no run waits idle.  Lines
ending in ``&`` become background processes, each in a session of its own that is ended afterwards;
every ``--watch`` line must end in Completed.  Both orders of registration are covered by one pass:
the deploy block, then the serve block (serving after ``prefect deploy`` once crashed every served
run: "Downloading flow code from storage at None"), then the deploy block's ``prefect deploy`` line
again, after which each way must still hold its own deployments.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from pll_pipeline.flows.serve import load_deployment_specs, served_name
from tests.processes import descendants, free_port, still_running

ROOT = Path(__file__).resolve().parents[2]
SPECS = load_deployment_specs()
STEP_TIMEOUT = 900  # seconds: a grid of the README on a loaded two-core machine


def readme_blocks():
    """The shell blocks of the Deployments section of docs/operations.md by role: server, deploy, serve."""
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("\n## Deployments\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    roles = {"server": "prefect server start", "deploy": "prefect deploy ", "serve": "pll serve"}
    found = {role: [b for b in blocks if key in b] for role, key in roles.items()}
    assert all(len(b) == 1 for b in found.values()) and len(blocks) == 3, blocks
    return {role: b[0] for role, b in found.items()}


def commands(block, port):
    """The block's command lines without comments, on ``port`` instead of the README's 4200."""
    lines = (re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines())
    return [line.replace("4200", str(port)) for line in lines if line]


def get_json(url, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


class Shell:
    """Runs README lines as a user's terminal would, from the repository root."""

    def __init__(self, env, logs, port):
        self.env, self.logs, self.port = env, logs, port
        self.background = []

    @property
    def api(self):
        return f"http://127.0.0.1:{self.port}/api"

    def run(self, line):
        if line.startswith("export "):
            name, value = line.removeprefix("export ").split("=", 1)
            self.env[name] = value
        elif line.endswith("&"):
            self.start(line.removesuffix("&").strip())
        else:
            done = subprocess.run(["bash", "-c", line], cwd=ROOT, env=self.env, capture_output=True, text=True,
                                  timeout=STEP_TIMEOUT)
            report = f"{line}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}{self.log_tails()}"
            assert done.returncode == 0, report
            if "--watch" in line:
                assert "Completed" in done.stdout, report

    def start(self, line):
        with open(self.logs / f"background-{len(self.background)}.log", "w") as log:
            process = subprocess.Popen(["bash", "-c", line], cwd=ROOT, env=self.env, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        self.background.append(process)
        if "server start" in line:
            self.wait(process, lambda: get_json(f"{self.api}/health"))
        elif "pll serve" in line:
            self.wait(process, lambda: len(self.deployments(served_name(s["name"]) for s in SPECS)) == len(SPECS))

    def wait(self, process, ready, timeout=300):
        """Until ``ready()`` is true: what a user sees happen before typing the next line."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert process.poll() is None, f"{process.args} exited with {process.returncode}{self.log_tails()}"
            try:
                if ready():
                    return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(1)
        raise TimeoutError(f"{process.args} not ready within {timeout} s{self.log_tails()}")

    def deployments(self, names):
        """The server's deployments of these names, with their flow's name as ``flow``."""
        flows = {f["id"]: f["name"] for f in get_json(f"{self.api}/flows/filter", {})}
        found = get_json(f"{self.api}/deployments/filter", {"deployments": {"name": {"any_": list(names)}}})
        return {f"{flows[d['flow_id']]}/{d['name']}": d for d in found}

    def log_tails(self):
        return "".join(f"\n--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.logs.glob("*.log")))

    def stop(self):
        """End every background process and what it started (its session), last started first."""
        for process in reversed(self.background):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    process.wait(timeout=60)
                    break
                except subprocess.TimeoutExpired:
                    continue


def test_readme_deployment_commands_run_as_written(tmp_path):
    port = free_port()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_")}
    env.update({
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false",
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_RUNNER_POLL_FREQUENCY": "1",
        # Flow runs work in the checkout: keep their MLflow store and stage cache out of it.
        "MLFLOW_TRACKING_URI": uri,
        "PLL_CACHE_DIR": str(tmp_path / "cache"),
    })
    blocks = readme_blocks()
    shell = Shell(env, tmp_path, port)
    try:
        for line in commands(blocks["server"], port):
            shell.run(line)
        # The UI asks the server where the API is: the README's port, not Prefect's default.
        ui = get_json(f"http://127.0.0.1:{port}/ui-settings")
        assert ui["api_url"] == f"http://127.0.0.1:{port}/api"
        for role in ("deploy", "serve"):
            for line in commands(blocks[role], port):
                shell.run(line)
        # Registering the work pool's deployments after pll serve's leaves the served ones alone.
        (redeploy,) = [line for line in commands(blocks["deploy"], port) if "prefect deploy " in line]
        shell.run(redeploy)

        # Each way keeps its own deployments, whichever registered last.
        names = [s["name"] for s in SPECS]
        deployed = shell.deployments(names)
        served = shell.deployments(served_name(n) for n in names)
        pull = [{"prefect.deployments.steps.set_working_directory": {"directory": str(ROOT)}}]
        assert sorted(d["name"] for d in deployed.values()) == sorted(names)
        assert all(d["work_pool_name"] == "pll-process" and d["pull_steps"] == pull for d in deployed.values())
        assert sorted(d["name"] for d in served.values()) == sorted(served_name(n) for n in names)
        assert all(d["work_pool_name"] is None for d in served.values())
    finally:
        shell.stop()

    client = MlflowClient(uri)
    runs = [r for r in client.search_runs([client.get_experiment_by_name("pll").experiment_id])
            if "mlflow.parentRunId" not in r.data.tags]
    # One pipeline run through the worker, one through pll serve.
    assert [(r.data.params["dataset"], r.data.params["seed"], r.info.status) for r in runs] == [
        ("iris", "1", "FINISHED")] * 2


def test_pll_serve_stops_on_sigterm_within_ten_seconds_while_its_server_is_down(tmp_path):
    """A drill: the Prefect server dies under ``pll serve``; SIGTERM still stops it at once, leaving no process."""
    port = free_port()
    env = {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_")}
    env.update({"PREFECT_HOME": str(tmp_path / "prefect-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false", "PREFECT_API_URL": f"http://127.0.0.1:{port}/api"})
    shell = Shell(env, tmp_path, port)
    names = [served_name(s["name"]) for s in SPECS]

    def serve():
        with open(tmp_path / "serve.log", "a") as log:
            process = subprocess.Popen([str(Path(sys.executable).parent / "pll"), "serve"], cwd=tmp_path, env=env,
                                       stdout=log, stderr=subprocess.STDOUT)
        shell.wait(process, lambda: sorted(d["name"] for d in shell.deployments(names).values()
                                            if not d["paused"]) == sorted(names))
        return process

    try:
        shell.start(f"{Path(sys.executable).parent / 'prefect'} server start --host 127.0.0.1 --port {port}")
        first = serve()
        first.send_signal(signal.SIGTERM)  # with the server up, stopping pauses the schedules
        assert first.wait(timeout=60) == 0
        assert all(d["paused"] for d in shell.deployments(names).values())
        serving = serve()
        shell.stop()  # the server dies
        tree = descendants(serving.pid)
        started = time.monotonic()
        serving.send_signal(signal.SIGTERM)
        status = serving.wait(timeout=60)
        took = time.monotonic() - started
    finally:
        shell.stop()
    log = (tmp_path / "serve.log").read_text()
    assert status == 0 and took < 10, (status, took, log[-3000:])
    assert "the served deployments' schedules were not paused" in log
    assert not still_running(tree, timeout=10)

"""Nothing that pll starts outlives it, even when pll is killed with SIGKILL (issue 14).

SIGKILL runs no cleanup in pll, so what it started has to notice by itself: Prefect's temporary
server through its watchdog (flows/processes.py), Dask's worker processes on their own.  pll runs as
a real command in its own session.  Once the processes in question are up, pll is frozen (SIGSTOP),
so that it neither finishes nor stops anything before the SIGKILL, and the processes it started
are listed (they lose pll as their parent when it dies).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import psutil
import pytest

from pll_pipeline.flows import processes
from tests.processes import descendants, still_running


ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
GONE_WITHIN = 10  # seconds after the SIGKILL
STARTUP = 300  # seconds pll may take to get its processes up on a loaded machine
SEEDS = 6


def _cmdline(process):
    with suppress(psutil.Error):
        return " ".join(process.cmdline())
    return ""


def _servers(processes):
    return [p for p in processes if "uvicorn" in _cmdline(p) and "prefect.server" in _cmdline(p)]


def _dask_workers(processes):
    return [p for p in processes if "multiprocessing.spawn" in _cmdline(p)]


@pytest.fixture
def session(tmp_path):
    """Start a command in its own session and environment; whatever is left of its process group is killed after."""
    started = []
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}", "PLL_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PREFECT_API_URL", None)

    def start(*command):
        with open(tmp_path / "output.log", "w") as log:
            process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        started.append(process)
        return process

    yield start
    for process in started:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _kill_once_up(process, output, up):
    """Wait until ``up(processes started, output so far)``; freeze the process, list what it started, SIGKILL it."""
    deadline = time.monotonic() + STARTUP
    while not up(descendants(process.pid), output.read_text()):
        assert process.poll() is None, f"exited with {process.returncode} too early:\n{output.read_text()}"
        assert time.monotonic() < deadline, f"not up within {STARTUP} s:\n{output.read_text()}"
        time.sleep(0.2)
    os.kill(process.pid, signal.SIGSTOP)
    started = descendants(process.pid)
    assert up(started, output.read_text())
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    return started


def _assert_all_gone(started):
    left = still_running(started, GONE_WITHIN)
    assert not left, f"still running {GONE_WITHIN} s after pll died: {[_cmdline(p) for p in left]}"


def test_nothing_outlives_a_benchmark_killed_mid_grid(session, tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"name: killed\ndatasets: [iris]\nseeds: {list(range(SEEDS))}\nmethods: {{pl_knn: {{}}}}\n"
                    "knn: exact\nmax_concurrency: 1\n")
    pll = session(str(BIN / "pll"), "benchmark", str(grid))

    def mid_grid(processes, output):
        done = re.findall(rf"progress: (\d+)/{SEEDS} cells done", output)
        return _servers(processes) and done and 0 < int(done[-1]) < SEEDS

    started = _kill_once_up(pll, tmp_path / "output.log", mid_grid)
    _assert_all_gone(started)


def test_nothing_outlives_a_run_on_a_local_dask_cluster(session, tmp_path):
    pll = session(str(BIN / "pll"), "run", "--dataset", "iris", "--methods", "pl_knn", "--dask-address", "local")

    def running_on_dask(processes, output):
        flow = "for flow 'pll-pipeline'" in output and not re.search(r"Flow run '[^']*' - Finished in state", output)
        return _servers(processes) and _dask_workers(processes) and flow

    started = _kill_once_up(pll, tmp_path / "output.log", running_on_dask)
    _assert_all_gone(started)


_TIE_A_SLEEPER = """
import subprocess, sys, time
from pll_pipeline.flows import processes
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
processes.tie(child)
print(child.pid, flush=True)
time.sleep(600)
"""


def test_a_tied_child_stops_when_its_parent_is_killed(session, tmp_path):
    parent = session(sys.executable, "-c", _TIE_A_SLEEPER)
    # killed once the child has said its pid and its watchdog is up (on a loaded machine it can lag the child)
    started = _kill_once_up(parent, tmp_path / "output.log", lambda processes, output: output.strip() and any(
        "pll_pipeline.flows.processes" in _cmdline(p) for p in processes))
    child = int((tmp_path / "output.log").read_text())
    # the watchdog was among them while the parent was frozen (_kill_once_up checks); its command line cannot be
    # read again here, since once the parent is dead it stops the child and exits, which is what this test wants
    assert child in {p.pid for p in started}
    _assert_all_gone(started)


def test_the_watchdog_leaves_a_living_parents_child_alone_and_exits_with_it():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    watchdog = processes.tie(child)
    try:
        child.stdin.close()  # the child exits by itself, with status 0 unless the watchdog signalled it
        assert child.wait(timeout=60) == 0
        assert watchdog.wait(timeout=GONE_WITHIN) == 0
    finally:
        for process in (child, watchdog):
            process.kill()
            process.wait()

"""Runs on a Dask cluster: a LocalCluster, and one started by hand as the README shows.

The hand-started cluster is real processes on loopback: ``dask scheduler``
and two ``dask worker`` processes, torn down whatever happens.
"""

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from distributed import Client, get_task_stream
from mlflow.tracking import MlflowClient

from tests.processes import descendants, free_port, stop
from pll_pipeline.flows.cli import main
from pll_pipeline.flows.cluster import LOCAL, dask_cluster


BIN = Path(sys.executable).parent


@pytest.fixture
def hand_started_cluster(tmp_path):
    """The README's three commands (scheduler and two workers), on free ports."""
    port, dashboard = free_port(), free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    commands = [[str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                 "--dashboard-address", f"127.0.0.1:{dashboard}"]]
    commands += [[str(BIN / "dask"), "worker", address, "--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0",
                  "--nworkers", "1", "--nthreads", "1"]] * 2
    processes = []
    try:
        for i, command in enumerate(commands):
            log = open(tmp_path / f"dask-{i}.log", "w")
            processes.append(subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT))
        with Client(address, timeout="120s") as client:
            client.wait_for_workers(2, timeout=180)
            yield address, client, processes
    finally:
        stop(processes)


def test_pll_run_on_a_hand_started_cluster(prefect_harness, hand_started_cluster, tmp_path, monkeypatch, capsys):
    address, client, processes = hand_started_cluster
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    workers = set(client.scheduler_info()["workers"])
    assert len(workers) == 2
    with get_task_stream(client) as stream:
        code = main(["run", "--dataset", "iris", "--methods", "pl_knn", "--knn", "dask",
                     "--dask-address", address, "--tracking-uri", uri, "--experiment", "by-hand"])
    assert code == 0
    assert "pl_knn" in capsys.readouterr().out

    # The protocol of this small run ran as one task of the hand-started workers, its kNN search sharded over them.
    ran = Counter(t["key"].rsplit("-", 1)[0] for t in stream.data)
    assert ran["run_protocol"] == 1
    assert any(key.startswith("pll-knn-shard") for key in ran)
    assert {t["worker"] for t in stream.data} <= workers

    client_ = MlflowClient(uri)
    (run,) = client_.search_runs([client_.get_experiment_by_name("by-hand").experiment_id],
                                 "tags.`pll.kind` = 'pipeline'")
    assert run.info.status == "FINISHED"
    assert run.data.params["knn"] == "dask" and run.data.params["dask_address"] == address
    (method_run,) = client_.search_runs([client_.get_experiment_by_name("by-hand").experiment_id],
                                        "tags.`pll.kind` = 'method'")
    assert method_run.data.metrics["accuracy"] > 0.8
    # The README's commands open no port beyond loopback.
    opened = set().union(*(_listeners(p.pid) for p in processes))
    assert opened and {ip for ip, _ in opened} == {"127.0.0.1"}, opened


def test_local_means_a_local_cluster_for_the_duration():
    with dask_cluster(LOCAL) as address:
        assert address.startswith("tcp://127.0.0.1:")
        with Client(address, timeout="60s") as client:
            client.wait_for_workers(1, timeout=120)
            assert client.submit(sum, [1, 2, 3]).result() == 6
    with pytest.raises(OSError):
        Client(address, timeout="2s")


def test_a_local_cluster_serves_its_dashboard():
    with dask_cluster(LOCAL) as address, Client(address, timeout="60s") as client:
        port = client.scheduler_info()["services"]["dashboard"]
        assert client.dashboard_link == f"http://127.0.0.1:{port}/status"  # the link distributed advertises
        no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with no_proxy.open(client.dashboard_link, timeout=60) as response:
            status, page = response.status, response.read().decode()
    assert status == 200
    assert "needs bokeh" not in page, page
    assert "<title>Dask Diagnostic UI</title>" in page and "bokeh.min.js" in page, page[:500]


def test_a_lost_connection_is_one_line_on_a_local_cluster_and_other_tracebacks_stay():
    """distributed logs a worker's closed stream with its traceback (seen when a drill killed a worker that a value
    was being sent to); the run's own message says what happened, so the line stays and the traceback goes."""
    import logging

    from distributed.comm.core import CommClosedError

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    log = logging.getLogger("distributed.core")
    log.addHandler(handler)
    try:
        with dask_cluster(LOCAL):
            for message in ("Lost connection to %r", "Exception while handling op %s"):
                try:
                    raise CommClosedError("in <TCP (closed)>: Stream is closed")
                except CommClosedError:
                    log.warning(message, "tcp://127.0.0.1:1", exc_info=True)
        try:
            raise CommClosedError("after the run")
        except CommClosedError:
            log.warning("Lost connection to %r", "tcp://127.0.0.1:1", exc_info=True)
    finally:
        log.removeHandler(handler)
    ours = [r for r in records if "tcp://127.0.0.1:1" in r.getMessage()]
    assert [r.getMessage() for r in ours] == ["Lost connection to 'tcp://127.0.0.1:1'",
                                              "Exception while handling op tcp://127.0.0.1:1",
                                              "Lost connection to 'tcp://127.0.0.1:1'"]
    assert [r.exc_info is not None for r in ours] == [False, True, True]  # only inside the run, only that line


def test_no_address_or_a_given_address_starts_nothing():
    with dask_cluster(None) as address:
        assert address is None
    given = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there: the flushes find no cluster and say nothing
    with dask_cluster(given) as address:
        assert address == given


def _listeners(pid=None):
    """Listening (address, port) pairs of process ``pid`` (default: this one) and its descendants."""
    import psutil

    found = set()
    for proc in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
        try:
            found |= {(c.laddr.ip, c.laddr.port) for c in proc.net_connections("inet") if c.status == "LISTEN"}
        except psutil.Error:
            pass
    return found


@pytest.mark.parametrize("start", ["pipeline cluster", "kNN shards"])
def test_local_clusters_listen_on_loopback_only(start):
    from pll.neighbors.sharded import local_client

    before = _listeners()
    if start == "pipeline cluster":
        with dask_cluster(LOCAL) as address, Client(address, timeout="60s") as client:
            client.wait_for_workers(1, timeout=120)
            opened = _listeners() - before
    else:
        local_client(n_workers=1).wait_for_workers(1, timeout=120)
        opened = _listeners() - before
    assert opened, "the cluster opened no listening socket"
    assert {ip for ip, _ in opened} == {"127.0.0.1"}, opened


def _prefect_server_ports(pid):
    """The ports that Prefect servers among ``pid``'s descendants were started on (their ``--port`` argument)."""
    import psutil

    ports = set()
    for proc in descendants(pid):
        with contextlib.suppress(psutil.Error):
            command = proc.cmdline()
            if "prefect.server.api.server:create_app" in command:
                ports.add(int(command[command.index("--port") + 1]))
    return ports


def test_pll_run_on_a_local_cluster_listens_on_loopback_only(tmp_path):
    """Everything a real ``pll run`` starts (Prefect's temporary server, the LocalCluster) binds loopback.

    The listeners of its whole process tree are sampled until the run ends, so each process is seen while
    it serves.
    """
    import psutil

    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"), "PLL_CACHE_DIR": str(tmp_path / "cache"),
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    env.pop("PREFECT_API_URL", None)  # pll starts its temporary server
    with open(tmp_path / "console.log", "w") as console:
        run = subprocess.Popen([str(BIN / "pll"), "run", "--dataset", "iris", "--methods", "pl_knn",
                                "--dask-address", "local"], cwd=tmp_path, env=env, stdout=console,
                               stderr=subprocess.STDOUT)
    opened, server_ports = set(), set()
    try:
        while run.poll() is None:
            server_ports |= _prefect_server_ports(run.pid)
            with contextlib.suppress(psutil.NoSuchProcess):  # the run ended between poll() and here
                opened |= _listeners(run.pid)
            time.sleep(0.2)
    finally:
        stop([run])
    output = (tmp_path / "console.log").read_text()
    assert run.returncode == 0, output[-6000:]
    assert "| pl_knn" in output
    assert server_ports and server_ports <= {port for _, port in opened}, (server_ports, opened)
    assert {port for _, port in opened} - server_ports, "no listener of the Dask cluster was seen"
    assert {ip for ip, _ in opened} <= {"127.0.0.1", "::1"}, opened


def test_two_runs_in_a_row_on_a_long_lived_cluster_record_every_task_run(hand_started_cluster, tmp_path):
    """Each ``pll run`` starts its own temporary Prefect server; the workers, started without one, outlive both.

    A worker must send the task runs of the second run to the second run's server, not to the first one's,
    which has stopped by then (distributed keeps a worker's Prefect event client between runs): Prefect's
    database holds as many task runs for the second run as for the first, and no worker logs lost events.
    """
    import sqlite3

    address, _, _ = hand_started_cluster
    home = tmp_path / "prefect-home"
    env = {**os.environ, "PREFECT_HOME": str(home), "PLL_CACHE_DIR": str(tmp_path / "cache"),
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    env.pop("PREFECT_API_URL", None)  # each run starts its own temporary server
    for seed in ("0", "1"):
        run = subprocess.run([str(BIN / "pll"), "run", "--dataset", "iris", "--methods", "pl_knn,dst_pll",
                              "--knn", "exact", "--stage-tasks", "yes", "--seed", seed, "--dask-address", address],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert "never awaited" not in run.stdout + run.stderr  # the flush waited for what it sent
    with sqlite3.connect(home / "prefect.db") as db:
        counts = dict(db.execute("SELECT flow_run.name, COUNT(task_run.id) FROM flow_run LEFT JOIN task_run "
                                 "ON task_run.flow_run_id = flow_run.id WHERE flow_run.parent_task_run_id IS NULL "
                                 "GROUP BY flow_run.id ORDER BY flow_run.created").fetchall())
    first, second = counts.values()
    assert first > 5 and second == first, counts
    logs = "".join((tmp_path / f"dask-{i}.log").read_text() for i in range(3))
    assert "EventsWorker" not in logs and "may be lost" not in logs and "never awaited" not in logs, logs[-3000:]


def _method_metrics(uri):
    """{method run name: its metrics without timings} of the method runs in store ``uri``."""
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()], "tags.`pll.kind` = 'method'")
    return {r.info.run_name: {k: v for k, v in r.data.metrics.items() if "seconds" not in k} for r in runs}


@pytest.mark.parametrize("every", [False, True], ids=["the-busy-worker", "every-worker"])
def test_a_worker_killed_mid_run_on_a_hand_started_cluster_is_said_and_changes_nothing(hand_started_cluster,
                                                                                      tmp_path, every):
    """The drill of a killed worker, on the README's cluster: the run finishes with the metrics of an undisturbed
    run, and a console line and the pipeline run's tags name each worker and the tasks that ran again.

    Killing every worker loses every value on the cluster: the flow sends the values of the stage that was running
    again, and says so.
    """
    from pll.data.synthetic import make_partial_label_table
    from pll_pipeline.tracking.urls import LOST_WORKERS_TAG, RERUN_TASKS_TAG

    address, client, _ = hand_started_cluster
    make_partial_label_table(20_000, random_state=3).to_parquet(tmp_path / "table.parquet")
    command = [str(BIN / "pll"), "run", "--dataset", "table.parquet", "--methods", "pl_knn,dst_pll", "--knn", "exact",
               "--stage-tasks", "yes", "--dask-address", address]

    def env(name):
        environment = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"),
                       "PLL_CACHE_DIR": str(tmp_path / f"cache-{name}"),
                       "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / name}.db"}
        environment.pop("PREFECT_API_URL", None)
        return environment

    undisturbed = subprocess.run(command, cwd=tmp_path, env=env("undisturbed"), capture_output=True, text=True,
                                 timeout=900)
    assert undisturbed.returncode == 0, undisturbed.stdout[-3000:] + undisturbed.stderr[-3000:]
    assert "lost during the run" not in undisturbed.stdout + undisturbed.stderr

    with open(tmp_path / "killed.log", "w") as log:
        run = subprocess.Popen(command, cwd=tmp_path, env=env("killed"), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 600
        busy = {}
        while not busy:  # a worker in the middle of one of the run's stages
            assert run.poll() is None and time.monotonic() < deadline, (tmp_path / "killed.log").read_text()[-3000:]
            busy = {w: keys for w, keys in client.processing().items() if any(k.startswith("run_stage") for k in keys)}
            time.sleep(0.05)
        victims = list(client.scheduler_info()["workers"]) if every else [next(iter(busy))]
        for pid in client.run(os.getpid, workers=victims).values():
            os.kill(pid, 9)
        assert run.wait(timeout=900) == 0, (tmp_path / "killed.log").read_text()[-3000:]
    finally:
        with contextlib.suppress(ProcessLookupError):
            run.kill()
    output = (tmp_path / "killed.log").read_text()
    lines = [line for line in output.splitlines() if "lost during the run" in line]
    assert len(lines) == len(victims) and all(any(victim in line for line in lines) for victim in victims), lines
    assert not any("stage " in line.split("elsewhere:")[0] for line in lines), lines
    assert "Traceback" not in output, output[-3000:]
    assert ("sent again, run again" in output) or not every, output[-3000:]

    uri = f"sqlite:///{tmp_path / 'killed'}.db"
    store = MlflowClient(uri)
    (pipeline_run,) = store.search_runs([e.experiment_id for e in store.search_experiments()],
                                        "tags.`pll.kind` = 'pipeline'")
    assert all(victim in pipeline_run.data.tags[LOST_WORKERS_TAG] for victim in victims)
    rerun = pipeline_run.data.tags[RERUN_TASKS_TAG]
    assert any(tasks != "none" for tasks in rerun.split("; "))
    assert all(tasks in " ".join(lines) for tasks in rerun.split("; "))
    assert _method_metrics(uri) == _method_metrics(f"sqlite:///{tmp_path / 'undisturbed'}.db")


def test_workers_started_elsewhere_cache_in_the_commands_folder_and_get_no_data_in_task_graphs(
        hand_started_cluster, tmp_path):
    """The README's workers run in another folder than the command; the command's stage cache is where they write,
    and the next run's stages come from it.  Arrays reach them by scatter: with Dask's warning threshold for a large
    task graph at 256 kB, below one block of query rows and a tenth of the table, no graph is large."""
    from pll.data.synthetic import make_partial_label_table
    from pll_pipeline.cache.store import entries

    address, _, _ = hand_started_cluster  # the workers' folder: tmp_path
    project = tmp_path / "project"
    project.mkdir()
    make_partial_label_table(10_000, random_state=4).to_parquet(project / "table.parquet")
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"),
           "MLFLOW_TRACKING_URI": f"sqlite:///{project / 'mlflow.db'}",
           "DASK_DISTRIBUTED__ADMIN__LARGE_GRAPH_WARNING_THRESHOLD": "256kB"}
    env.pop("PREFECT_API_URL", None)
    env.pop("PLL_CACHE_DIR", None)
    command = [str(BIN / "pll"), "run", "--dataset", "table.parquet", "--methods", "pl_knn", "--knn", "dask",
               "--stage-tasks", "yes", "--dask-address", address]
    logs = [tmp_path / f"dask-{i}.log" for i in (1, 2)]

    first = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "large graph" not in first.stdout + first.stderr
    written = entries(project / ".pll-cache")
    assert len(written) >= 8 and not (tmp_path / ".pll-cache").exists()
    cached_before = sum(log.read_text().count("Cached(type=COMPLETED)") for log in logs)

    second = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    cached = sum(log.read_text().count("Cached(type=COMPLETED)") for log in logs) - cached_before
    assert cached == len(written), cached  # every stage of the second run came from the first one's entries

"""The whole pipeline at scale: ``pll run`` on synthetic tables of 100k to 1M rows.

For each N the script writes a Parquet table (:func:`pll.data.synthetic.make_partial_label_table`:
N rows x 32 features, 20 overlapping classes, bags of the true label plus 0-3 random extra
candidates, a ``label`` column), then runs the real command line in a fresh process, as a user would:

    pll run --dataset scale-N.parquet --methods pl_knn,dst_pll,pl_aknn \\
            --method-params '{"pl_aknn": {"max_neighbors": 50}}'

with no kNN backend given (the default, ``auto``), an 80/20 split, native, trust and calibrated
reject options and MLflow logging to a SQLite store in the work folder.  A Prefect server started
by the script records the task runs, whose wall times give the per-stage table; the peak resident
memory is the sum over the ``pll`` process tree and the Prefect server, sampled every 0.2 s; the CPU
seconds are the ``pll`` process tree's (not the server's), and their ratio to the wall time says how busy
the cores were.
Each run starts with an empty stage cache.

``--dask-workers 1 2`` also runs the first N (``--no-local``: only these) on a Dask LocalCluster (loopback, single-threaded
workers) with the ``dask`` kNN backend (``--dask-knn auto``: each stage's own search), once per worker count: the
cluster's throughput.  Besides times and memory it reports the peak memory of the ``pll`` command alone (the Dask
client), the bytes sent over loopback during the run (Dask's, Prefect's and MLflow's traffic: everything here is
local) and the "large graph" warnings Dask printed.

Run: ``.venv/bin/python benchmarks/scale.py --rows 100000 300000 1000000``
(``--rows 20000``: a quick check; ``--spread 0.2``: class means close together, data without cluster
structure, on which approximate search needs more effort for the same recall).  The growth column is the exponent ``b`` of ``t ~ N^b``
between successive sizes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
METHOD_ARGS = ["--methods", "pl_knn,dst_pll,pl_aknn", "--method-params", json.dumps({"pl_aknn": {"max_neighbors": 50}})]


class PeakMemory:
    """Samples the summed RSS of process trees in a thread: ``peak`` in bytes, ``peak_at`` seconds after the start
    (``peak_clock``: the same moment as a Unix time, to find the stages that were running)."""

    def __init__(self, *pids, interval=0.2):
        self.roots = [psutil.Process(pid) for pid in pids]
        self.peak, self.peak_at, self.peak_clock, self.interval = 0, 0.0, 0.0, interval
        self.first_peak = 0  # of the first tree alone: the ``pll`` command, the Dask client on a cluster
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def add(self, pid):
        self.roots.append(psutil.Process(pid))

    def _run(self):
        while not self._stop.is_set():
            total = 0
            for i, root in enumerate(list(self.roots)):
                try:
                    tree = sum(proc.memory_info().rss for proc in [root, *root.children(recursive=True)])
                except psutil.Error:
                    continue
                total += tree
                if i == 0:
                    self.first_peak = max(self.first_peak, tree)
            if total > self.peak:
                self.peak, self.peak_at, self.peak_clock = total, time.perf_counter() - self._start, time.time()
            self._stop.wait(self.interval)

    def __enter__(self):
        self._start = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def write_table(n_rows, folder, spread=1.5):
    from pll.data.synthetic import make_partial_label_table

    path = folder / (f"scale-{n_rows}.parquet" if spread == 1.5 else f"scale-{n_rows}-spread-{spread:g}.parquet")
    if not path.exists():
        t0 = time.perf_counter()
        make_partial_label_table(n_rows, spread=spread, random_state=0).to_parquet(path, index=False)
        print(f"wrote {path} in {time.perf_counter() - t0:.1f} s", flush=True)
    return path


def start_prefect_server(folder, env):
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    log = open(folder / "prefect-server.log", "w")
    proc = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            env={**env, "PREFECT_UI_ENABLED": "false"}, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{api}/health", timeout=5):
                return proc, api
        except OSError:
            time.sleep(1)
    proc.kill()
    raise TimeoutError("the Prefect server did not start within 180 s")


def _free_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stage_seconds(api, at):
    """Wall seconds of each task run of the newest flow run, summed by task name, and the names of those that
    were running at ``at`` (a Unix time)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import FlowRunSort
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        (flow_run,) = client.read_flow_runs(sort=FlowRunSort.START_TIME_DESC, limit=1)
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run.id])))
    stages, running = {}, []
    for run in runs:
        if run.start_time and run.end_time:
            name = re.sub(r"-[0-9a-f]{3}$", "", run.name)
            stages[name] = stages.get(name, 0.0) + (run.end_time - run.start_time).total_seconds()
            if run.start_time.timestamp() <= at <= run.end_time.timestamp():
                running.append(name)
    return stages, running


def run_once(path, folder, label, watched, api, extra=()):
    """One ``pll run``; ``watched``: other processes (server, Dask workers) whose memory counts too."""
    env = {**os.environ, "PREFECT_API_URL": api, "MLFLOW_TRACKING_URI": f"sqlite:///{folder / 'mlflow.db'}",
           "PLL_CACHE_DIR": str(folder / f"cache-{label}")}
    command = [str(BIN / "pll"), "run", "--dataset", str(path), *METHOD_ARGS, *extra]
    t0, cpu0, sent0 = time.perf_counter(), _children_cpu(), _loopback_bytes()
    with open(folder / f"run-{label}.log", "w") as log:
        proc = subprocess.Popen(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)
        with PeakMemory(proc.pid, *watched) as memory:
            code = proc.wait()
    wall, cpu, sent = time.perf_counter() - t0, _children_cpu() - cpu0, _loopback_bytes() - sent0
    out = (folder / f"run-{label}.log").read_text()
    if code != 0:
        raise RuntimeError(f"{label}: pll run exited with {code}; see {folder / f'run-{label}.log'}:\n{out[-3000:]}")
    run_id = re.search(r"run: ([0-9a-f]{32})", out).group(1)
    from mlflow.tracking import MlflowClient

    metrics = MlflowClient(env["MLFLOW_TRACKING_URI"]).get_run(run_id).data.metrics
    recalls = {k: v for k, v in metrics.items() if k.startswith("knn.") and k.endswith(".recall") and k.count(".") == 2}
    stages, at_peak = stage_seconds(api, memory.peak_clock)
    return {"label": label, "wall": wall, "cpu": cpu, "peak_gib": memory.peak / 2**30,
            "client_peak_gib": memory.first_peak / 2**30, "loopback_gib": sent / 2**30,
            "large_graphs": out.count("Sending large graph"),
            "peak_at": memory.peak_at, "stages": stages, "at_peak": at_peak,
            "recall": recalls, "backends": re.findall(r"knn\.\S+\.backend", out)}


def _loopback_bytes():
    """Bytes sent over loopback so far: a run's Dask, Prefect and MLflow traffic (everything here is local)."""
    return int(Path("/sys/class/net/lo/statistics/tx_bytes").read_text())


def _children_cpu():
    """User and system seconds of this process's ended children, theirs included (the run and its Dask workers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def print_table(results, sizes):
    stages = sorted({s for r in results for s in r["stages"]}, key=lambda s: -max(r["stages"].get(s, 0) for r in results))
    head = ["stage"] + [r["label"] for r in results] + (["growth"] if len(sizes) > 1 else [])
    rows = []
    for stage in ["wall (whole command)"] + stages:
        values = [r["wall"] if stage.startswith("wall") else r["stages"].get(stage, 0.0) for r in results]
        row = [stage] + [f"{v:.1f} s" for v in values]
        if len(sizes) > 1 and len(values) >= len(sizes):
            b = [math.log(max(values[i + 1], 1e-3) / max(values[i], 1e-3)) / math.log(sizes[i + 1] / sizes[i])
                 for i in range(len(sizes) - 1)]
            row.append(" / ".join(f"{x:.2f}" for x in b))
        rows.append(row)
    rows.append(["CPU of the run (process tree)"] + [f"{r['cpu']:.0f} s, {r['cpu'] / r['wall']:.2f} cores" for r in results])
    rows.append(["peak RSS (tree + server)"] + [f"{r['peak_gib']:.2f} GiB at {r['peak_at']:.0f} s" for r in results])
    rows.append(["peak RSS of the pll command"] + [f"{r['client_peak_gib']:.2f} GiB" for r in results])
    rows.append(["bytes over loopback (Dask, Prefect, MLflow)"] + [f"{r['loopback_gib']:.2f} GiB" for r in results])
    rows.append(['"large graph" warnings'] + [str(r["large_graphs"]) for r in results])
    rows.append(["stages running at the peak"] + [", ".join(r["at_peak"]) or "none" for r in results])
    rows.append(["kNN recall (lowest)"] + [", ".join(f"{k.split('.')[1]} {v:.4f}" for k, v in r["recall"].items())
                                          or "exact" for r in results])
    widths = [max(len(str(r[i])) if i < len(r) else 0 for r in [head] + rows) for i in range(len(head))]
    for r in [head, ["-" * w for w in widths]] + rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    parser.add_argument("--dask-workers", type=int, nargs="*", default=[])
    parser.add_argument("--no-local", action="store_true", help="only the Dask runs")
    parser.add_argument("--dask-knn", default="dask",
                        help="the kNN backend of the Dask runs (default: dask, sharded over the workers; auto: each "
                        "stage searches on the worker it runs on)")
    parser.add_argument("--spread", type=float, default=1.5,
                        help="class means' standard deviation; 0.2: classes without cluster structure (issue 37)")
    parser.add_argument("--folder", default="/tmp/pll-scale", help="where tables, stores and logs go")
    args = parser.parse_args()
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PREFECT_HOME": str(folder / "prefect-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    os.environ.update(PREFECT_HOME=env["PREFECT_HOME"])
    server, api = start_prefect_server(folder, env)
    results = []
    try:
        for n in [] if args.no_local else args.rows:
            path = write_table(n, folder, args.spread)
            results.append(run_once(path, folder, f"N={n:,}", [server.pid], api))
            print(json.dumps(results[-1]), flush=True)
        sizes = list(args.rows)
        for workers in args.dask_workers:
            results.append(dask_run(write_table(args.rows[0], folder, args.spread), folder, workers, server.pid, api,
                                    args.dask_knn))
            print(json.dumps(results[-1]), flush=True)
    finally:
        server.terminate()
        server.wait()
    print()
    print_table(results, sizes)


def dask_run(path, folder, workers, server_pid, api, knn="dask"):
    from distributed import LocalCluster

    with LocalCluster(n_workers=workers, threads_per_worker=1, host="127.0.0.1", dashboard_address=None) as cluster:
        extra = ["--knn", knn, "--dask-address", cluster.scheduler_address]
        nannies = [nanny.process.pid for nanny in cluster.workers.values()]
        return run_once(path, folder, f"dask {workers}w, knn {knn}", [server_pid, *nannies], api, extra)


if __name__ == "__main__":
    main()

"""Every kNN backend through the command line: ``pll run``, ``pll train``, ``pll score`` and ``pll benchmark``.

pynndescent compiles its kernels on first use in a process, and the failure these tests guard
against (numba cannot compile them while Prefect has replaced ``print``) shows only when that
first use happens inside a flow.  The library tests compile it earlier in the pytest process, so
every backend runs its commands in one fresh process (``tests/cli_session.py``), one backend after the
other, each with its own store and cache: pynndescent compiles there once, inside the nndescent backend's
first flow.  The Dask backends come last and run theirs on one LocalCluster started for the module, whose
fresh worker process first compiles it inside the flow's tasks.  That cluster has one worker (a worker
compiles for most of a minute of a core, and every worker that builds an nndescent shard compiles), and
the commands ask for two shards, as a two-worker cluster would give by default: each shard's rows and seed
depend on the shard count alone, not on the workers.  Clusters of several workers are tested elsewhere
(``tests/e2e/test_drills.py``, ``test_benchmark_flow.py``, ``test_process_lifetime.py``).
The data set is msrc-v2 with seed 3: its smallest class sets are smaller than the Dask shard count.

Every query's recall is measured (``recall_sample`` above the number of rows), so a logged recall
of 1 means every neighbor list equals exact search's, and then every prediction of the methods on
those neighbors must equal exact search's too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

import pll
from pll.serving import feature_names


ROOT = Path(__file__).resolve().parents[2]
ALL_QUERIES = {"recall_sample": 100_000}
CLUSTER = "<the module's LocalCluster>"  # stands for its scheduler's address in the arguments below
SHARDS = 2  # the Dask backends' shard count (on the module's one-worker cluster)
# backend -> (extra arguments of run, train and benchmark; the backend the minmax neighbors must report)
BACKENDS = {
    "exact": ([], "exact"),
    "nndescent": (["--knn", "nndescent", "--knn-options", json.dumps(ALL_QUERIES)], "nndescent"),
    "auto": (["--knn", "auto", "--knn-options", json.dumps({"exact_max_rows": 100, **ALL_QUERIES})],
             "nndescent"),
    "dask-exact": (["--knn", "dask", "--dask-address", CLUSTER, "--knn-options", json.dumps({"n_shards": SHARDS})],
                   "dask"),
    "dask-nndescent": (["--knn", "dask", "--dask-address", CLUSTER, "--knn-options",
                        json.dumps({"shard_backend": "nndescent", "n_shards": SHARDS, **ALL_QUERIES})], "dask"),
}
METHODS = ("pl_knn", "dst_pll", "pl_aknn")


def _train_arguments(args):
    """``pll train`` takes no --dask-address: its dask backend gets the scheduler as a kNN option."""
    if "--dask-address" not in args:
        return list(args)
    i = args.index("--dask-address")
    address, out = args[i + 1], args[:i] + args[i + 2 :]
    if "--knn-options" not in out:
        return [*out, "--knn-options", json.dumps({"address": address})]
    j = out.index("--knn-options") + 1
    out[j] = json.dumps({**json.loads(out[j]), "address": address})
    return out


def session_commands(name, args, shared_data, folder, address=None):
    """``pll run``, ``train``, ``score`` and ``benchmark`` with ``args``, after the variables of ``folder``'s session.

    ``address``: the scheduler of the Dask cluster that :data:`CLUSTER` in ``args`` stands for.
    """
    args = [address if a == CLUSTER else a for a in args]
    msrc = str(shared_data / "realworld" / "msrc-v2.mat")
    ds = pll.load_dataset(msrc)
    incoming = folder / "incoming.csv"
    pd.DataFrame(ds.X[:40], columns=feature_names(ds)).to_csv(incoming, index=False)
    grid = folder / "grid.yaml"
    options = {}
    if "--knn-options" in args:
        options = json.loads(args[args.index("--knn-options") + 1])
    backend = args[args.index("--knn") + 1] if "--knn" in args else "auto"
    grid.write_text(json.dumps({"name": f"e2e-{name}", "datasets": [msrc], "seeds": [3], "methods": {"pl_knn": {}},
                                "knn": backend, "knn_options": options, "experiment": "e2e-grid"}))
    dask = ["--dask-address", address] if "--dask-address" in args else []
    return [
        session_variables(folder),
        # A task per stage, as on large data; the grid below takes the one-task path of small data.
        ["run", "--dataset", msrc, "--seed", "3", "--experiment", "e2e", "--stage-tasks", "yes", *args],
        ["train", "--dataset", msrc, "--seed", "3", "--method", "dst_pll", "--register", f"e2e-{name}",
         *_train_arguments(args)],
        ["score", "--model", f"models:/e2e-{name}/latest", "--input", str(incoming), "--output",
         str(folder / "scored.parquet")],
        ["benchmark", str(grid), *dask],
    ]


def session_variables(folder):
    """The MLflow store and stage cache of one backend's session, in ``folder``."""
    return {"MLFLOW_TRACKING_URI": f"sqlite:///{folder / 'mlflow.db'}", "PLL_CACHE_DIR": str(folder / "cache")}


def run_sessions(sessions, shared_data, address=None):
    """The sessions ``{name: (args, folder)}`` one after the other in one fresh process: ``{name: (client, output, folder)}``.

    ``output`` is the whole process's.
    """
    commands = [c for name, (args, folder) in sessions.items()
                for c in session_commands(name, args, shared_data, folder, address)]
    home = next(iter(sessions.values()))[1]
    env = {**os.environ, "PREFECT_HOME": str(home / "prefect-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "cli_session.py"), json.dumps(commands)],
                          cwd=home, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, f"{list(sessions)}:\n{done.stdout[-4000:]}\n{done.stderr[-6000:]}"
    output = done.stdout + done.stderr
    return {name: (MlflowClient(session_variables(folder)["MLFLOW_TRACKING_URI"]), output, folder)
            for name, (args, folder) in sessions.items()}


def pipeline_run(client):
    (run,) = client.search_runs([client.get_experiment_by_name("e2e").experiment_id], "tags.`pll.kind` = 'pipeline'")
    return run


def predictions(client, run, method):
    (method_run,) = client.search_runs([run.info.experiment_id],
                                       f"tags.`mlflow.parentRunId` = '{run.info.run_id}' and attributes.run_name = '{method}'")
    path = client.download_artifacts(method_run.info.run_id, "predictions/test.parquet")
    return pd.read_parquet(path).sort_values("row").reset_index(drop=True)


@pytest.fixture(scope="module")
def cluster_address():
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="module")
def sessions(shared_data, tmp_path_factory, cluster_address):
    """Every backend's commands, the local backends' first, in one fresh process."""
    return run_sessions({name: (args, tmp_path_factory.mktemp(name)) for name, (args, _) in BACKENDS.items()},
                        shared_data, cluster_address)


@pytest.fixture(scope="module")
def exact_session(sessions):
    return sessions["exact"]


@pytest.mark.parametrize("name", list(BACKENDS))
def test_every_command_runs_on_the_backend(name, sessions, exact_session):
    expected = BACKENDS[name][1]
    client, output, folder = sessions[name]
    # The commands report to the session's Prefect server: no Dask worker starts a server of its own.
    assert "Starting temporary server" not in output
    run = pipeline_run(client)
    assert run.info.status == "FINISHED"
    assert run.data.params["knn.minmax.backend"] == expected
    approximate = name in ("nndescent", "auto", "dask-nndescent")
    recalls = {k: v for k, v in run.data.metrics.items() if k.endswith(".recall")}
    if approximate:
        assert recalls and min(recalls.values()) >= 0.98, recalls
    else:
        assert not recalls
    # pll train, score and benchmark finished on the same backend.
    (trained,) = [r for r in client.search_runs([client.get_experiment_by_name("pll").experiment_id])
                  if r.data.tags.get("pll.kind") == "training"]
    assert trained.data.params["knn"] == run.data.params["knn"]
    assert len(pd.read_parquet(folder / "scored.parquet")) == 40
    grid_runs = client.search_runs([client.get_experiment_by_name("e2e-grid").experiment_id])
    assert grid_runs and all(r.info.status == "FINISHED" for r in grid_runs)

    # Predictions equal exact search's wherever the neighbor lists are equal: always for exact shards;
    # for approximate search when every list is exact (recall 1 on every query), except the trust score,
    # whose remaining class-set searches are approximate too, and the conformal sets, whose hold-out model
    # searches its own rows' neighbors without logging their recall.  PL A-kNN's features come from a
    # neighbor search of their own, whose recall is not logged: there, most labels agree.
    exact_run = pipeline_run(exact_session[0])
    for method in METHODS:
        features = "pl_aknn_real" if method == "pl_aknn" else "minmax"
        ours, theirs = predictions(client, run, method), predictions(exact_session[0], exact_run, method)
        same_lists = all(v == 1.0 for k, v in recalls.items() if k.startswith(f"knn.{features}."))
        if not approximate:
            pd.testing.assert_frame_equal(ours, theirs)
        elif same_lists and features == "minmax":
            unchecked = [c for c in ours.columns if c == "trust_score" or c.startswith("conformal")]
            pd.testing.assert_frame_equal(ours.drop(columns=unchecked), theirs.drop(columns=unchecked))
        else:
            agree = np.mean(ours["label"].to_numpy() == theirs["label"].to_numpy())
            assert agree >= 0.95, f"{method}: {agree:.3f} of the labels agree with exact search"

    # auto beyond its exact threshold searches the trust scores' class sets by cells: each method run says how
    # its trust searches ended, held to the target agreement with exact search (or searched exactly).
    if name == "auto":
        method_runs = client.search_runs([run.info.experiment_id], f"tags.`mlflow.parentRunId` = '{run.info.run_id}'")
        searched = [(r.data.tags, rows) for r in method_runs for rows in ("test", "val")
                    if f"pll.fit.trust_search.{rows}.decision" in r.data.tags]  # none where the lists settled all
        assert searched
        for tags, rows in searched:
            decision = tags[f"pll.fit.trust_search.{rows}.decision"]
            assert decision.startswith(("cells: agreement", "exact search:")), tags
            if decision.startswith("cells"):
                assert float(tags[f"pll.fit.trust_search.{rows}.agreement"]) >= 0.95

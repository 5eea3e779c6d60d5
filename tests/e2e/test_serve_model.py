"""A logged model served by ``mlflow models serve --env-manager local`` answers real HTTP requests.

Bad input is answered as ``pll score`` answers it: HTTP 400 whose JSON ``message`` is pll's one line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pll.data import PartialLabelDataset
from pll.errors import PllError
from pll.serving import fit_model
from pll_pipeline.tracking.models import input_example, log_model
from pll_pipeline.tracking.runs import end_run, start_run
from tests.processes import free_port


ROOT = Path(__file__).resolve().parents[2]
CLASSES = np.array(["north", "east", "south", "west"])
STARTUP_SECONDS = 300


def _request(url, payload=None):
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A pl_knn model on four clusters, logged to a fresh store and served on a free loopback port."""
    tmp = tmp_path_factory.mktemp("serve")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 80)
    X = np.array([[0, 0], [10, 0], [0, 10], [10, 10]], dtype=float)[y] + rng.normal(size=(80, 2))
    S = np.zeros((80, 4), dtype=bool)
    S[np.arange(80), y] = True
    S[np.arange(0, 80, 2), (y[::2] + 1) % 4] = True
    ds = PartialLabelDataset(X, S, y, CLASSES, "compass", info={"feature_names": ["lon", "lat"]})
    fitted = fit_model(ds, "pl_knn", {"n_neighbors": 5}, random_state=0)
    run_id = start_run.fn(uri, "serve", "train", {})
    model_uri = log_model.fn(uri, run_id, fitted, input_example(ds), ds.summary())["model_uri"]
    end_run.fn(uri, run_id)

    port = free_port()
    log = open(tmp / "server.log", "w")
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": uri,
        "PYTHONPATH": str(ROOT),
        # The server runs `uvicorn` from PATH: that of this virtual environment.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "models", "serve", "-m", model_uri,
         "--env-manager", "local", "-p", str(port), "-h", "127.0.0.1"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the model server exited ({proc.returncode}):\n{(tmp / 'server.log').read_text()[-3000:]}")
            try:
                if _request(f"{base}/ping")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"no answer on {base}/ping:\n{(tmp / 'server.log').read_text()[-3000:]}")
            time.sleep(1)
        yield base, fitted, model_uri, uri
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        log.close()


def test_served_model_answers_like_the_fitted_model(served):
    base, fitted, _, _ = served
    query = pd.DataFrame({"lat": [0.5, 9.0, 5.0, 10.2], "lon": [0.2, 1.0, 5.0, 9.9],
                          "candidates": ["north|east", None, "", "west"]})
    status, body = _request(f"{base}/invocations", {"dataframe_split": query.to_dict(orient="split", index=False)})
    assert status == 200, body
    got = pd.DataFrame(json.loads(body)["predictions"])
    expected = fitted.predict_frame(query)
    assert list(got["label"]) == list(expected["label"])
    assert list(got["accept"]) == list(expected["accept"])
    np.testing.assert_allclose(got["score"], expected["score"], rtol=1e-12)
    assert got.loc[0, "label"] in ("north", "east") and got.loc[3, "label"] == "west"
    assert {f"share_{c}" for c in CLASSES} <= set(got.columns)


def _pll_line(fitted, table, source):
    """The one line pll answers ``table`` with, naming ``source``."""
    with pytest.raises(PllError) as info:
        fitted.predict_frame(table, source=source)
    return str(info.value)


BAD_TABLES = {
    "extra column": pd.DataFrame({"lon": [1.0, 9.5], "lat": [0.5, 9.0], "colour": [3.0, 4.0]}),
    "missing column": pd.DataFrame({"lon": [1.0]}),
}


@pytest.mark.parametrize("case", sorted(BAD_TABLES))
def test_served_model_answers_bad_input_with_pll_s_one_line(served, case):
    base, fitted, _, _ = served
    table = BAD_TABLES[case]
    status, body = _request(f"{base}/invocations", {"dataframe_split": table.to_dict(orient="split", index=False)})
    assert status == 400, body
    answer = json.loads(body)
    assert answer["message"] == _pll_line(fitted, table, "model input")
    assert answer["error_code"] == "INVALID_PARAMETER_VALUE" and "stack_trace" not in answer


@pytest.mark.usefixtures("prefect_harness")
def test_pll_score_refuses_the_extra_column_with_the_server_s_line(served, tmp_path):
    from prefect.settings import PREFECT_API_URL

    base, _, model_uri, uri = served
    table = BAD_TABLES["extra column"]
    status, body = _request(f"{base}/invocations", {"dataframe_split": table.to_dict(orient="split", index=False)})
    served_line = json.loads(body)["message"]
    assert status == 400 and served_line.startswith("model input: ") and "colour" in served_line

    table.to_csv(tmp_path / "new.csv", index=False)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MLFLOW_TRACKING_URI": uri, "PREFECT_API_URL": PREFECT_API_URL.value()}
    proc = subprocess.run([sys.executable, "-m", "pll_pipeline.flows.cli", "score", "--model", model_uri, "--input", "new.csv",
                           "--output", "scored.parquet"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "pll: error: new.csv: " + served_line.removeprefix("model input: ") in proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.csv"]

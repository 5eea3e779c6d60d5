"""The ``pll`` command line: a real run, a different tracking store, and bad input."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[1]


def _pll(*args, cwd, env=None):
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_run_logs_to_the_store_named_by_environment(tmp_path):
    uri = f"sqlite:///{tmp_path / 'somewhere.db'}"
    out = _pll("run", "--methods", "pl_knn", cwd=tmp_path, env={"MLFLOW_TRACKING_URI": uri})
    assert out.returncode == 0, out.stderr
    assert "| pl_knn" in out.stdout
    assert f"mlflow ui --backend-store-uri {uri}" in out.stdout
    assert "Traceback" not in out.stdout + out.stderr
    assert not (tmp_path / "mlflow.db").exists()
    runs = MlflowClient(uri).search_runs([MlflowClient(uri).get_experiment_by_name("pll").experiment_id])
    assert len(runs) == 1


def test_unknown_dataset_is_one_line_without_traceback(tmp_path):
    out = _pll("run", "--dataset", "no-such-set", cwd=tmp_path)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert "unknown data set 'no-such-set'" in out.stderr
    assert "digits" in out.stderr


def test_a_temporary_server_that_does_not_start_is_one_line_naming_its_log_and_the_way_out(tmp_path):
    home = tmp_path / "prefect-home"
    out = _pll("run", "--methods", "pl_knn", cwd=tmp_path, env={
        "PREFECT_HOME": str(home), "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "0", "PREFECT_API_URL": ""})
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    (line,) = [line for line in out.stderr.splitlines() if line.startswith("pll: error:")]
    assert "temporary server did not start within 0 s" in line
    assert str(home / "temporary-server.log") in line and "PREFECT_API_URL" in line
    assert not (tmp_path / "mlflow.db").exists()

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


@pytest.mark.parametrize("argv, message", [
    (["run", "--seed", "4294967296"], "--seed: must lie in 0..4294967295"),
    (["run", "--seed", "99999999999999999999"], "--seed: must lie in 0..4294967295"),
    (["run", "--seed", "1.5"], "--seed: not a whole number"),
    (["train", "--seed", "-1"], "--seed: must lie in 0..4294967295"),
    (["run", "--methods", "pl_knn,knn"], "unknown method 'knn': choose from pl_knn, dst_pll, pl_aknn"),
    (["run", "--knn-backend", "faiss"], "invalid choice: 'faiss'"),
])
def test_bad_arguments_are_refused_before_anything_starts(argv, message, capsys):
    from flows.cli import build_parser

    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_seed_range_and_method_lists_parse():
    from flows.cli import build_parser

    args = build_parser().parse_args(["run", "--seed", "4294967295", "--methods", "dst_pll, pl_knn"])
    assert args.seed == 2**32 - 1 and args.methods == ["dst_pll", "pl_knn"]

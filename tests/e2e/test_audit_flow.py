"""``pll audit`` end to end: the ranked table on disk and in MLflow, equal to the library's."""

import time

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

import pll
from pll_pipeline.flows.cli import main
from pll.audit import audit_dataset, audit_metrics



def test_audit_command_writes_the_ranking_and_logs_how_well_it_finds_wrong_bags(
    prefect_harness, shared_data, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLL_PROGRESS_MIN_ROWS", "1")  # the cross-fitting reports however short it is
    bird_song = str(shared_data / "realworld" / "bird-song.mat")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["audit", "--dataset", bird_song, "--noise", "remove_true_label", "--noise-params", '{"nu": 0.1}',
            "--noisy-bags", "--seed", "2", "--output", str(tmp_path / "audit.parquet"), "--tracking-uri", uri]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "The most suspicious non-empty bags:" in out and "AUC" in out

    table = pd.read_parquet(tmp_path / "audit.parquet")
    ds = pll.noise.apply_noise(pll.load_dataset(bird_song, allow_empty_bags=True, allow_true_label_outside=True),
                               "remove_true_label", {"nu": 0.1}, random_state=2)
    expected = audit_dataset(ds, random_state=2)  # the seed drives the noise and the audit's folds
    pd.testing.assert_frame_equal(table, expected)
    assert len(table) == ds.n_rows and table["row"].is_unique
    assert table["empty_bag"].iloc[: int(table["empty_bag"].sum())].all()  # empty bags first
    kept = table[~table["empty_bag"]]
    assert kept["suspicion"].is_monotonic_decreasing

    client = MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("pll").experiment_id])
    assert run.info.run_name == "audit bird-song" and run.data.tags["pll.kind"] == "audit"
    metrics = run.data.metrics
    assert metrics == pytest.approx(audit_metrics(expected, ds))
    assert metrics["auc"] > 0.8 > metrics["base_rate"]  # far better than a random ranking
    assert metrics["precision_top_0.05"] > 2 * metrics["base_rate"]
    names = {a.path for a in client.list_artifacts(run.info.run_id)} | {
        a.path for a in client.list_artifacts(run.info.run_id, "figures")}
    assert {"audit.parquet", "audit_top.md", "figures/suspicion.png"} <= names
    # Each flagged row carries its reason in the logged table: the labels outside its bag, and how strongly.
    top = (tmp_path / "artifacts").mkdir() or client.download_artifacts(run.info.run_id, "audit_top.md",
                                                                          str(tmp_path / "artifacts"))
    header = open(top).readline()
    assert "favoured" in header and "reason" in header
    assert metrics["weight_neighbors"] + metrics["weight_learner_1"] + metrics["weight_learner_2"] == pytest.approx(1)
    first = table[~table["empty_bag"]].iloc[0]
    assert first["favoured"].split("|")[0] == first["reason"].split(" ")[0] and first["best_out"] > 0
    # The cross-fitting's progress, as the task run logged it (read from Prefect: which console the lines reach
    # depends on the logging set-up that earlier tests in this process left).
    line = "learners cross-fitted on 5 folds (rows x learners): 9,996 / 9,996 rows (100%)"
    assert any(line in message for message in _logs(run.data.tags["prefect.flow_run_id"], line)), line


def _logs(flow_run_id, awaited, wait=60.0):
    """The flow run's log messages, read again until ``awaited`` is among them (logs reach the server in batches)."""
    from prefect import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    deadline = time.monotonic() + wait
    with get_client(sync_client=True) as prefect:
        while True:
            logs = prefect.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
            messages = [log.message for log in logs]
            if any(awaited in m for m in messages) or time.monotonic() > deadline:
                return messages
            time.sleep(1.0)


def test_audit_refuses_a_bad_output_before_anything_runs(tmp_path, capsys):
    assert main(["audit", "--dataset", "iris", "--output", str(tmp_path / "audit.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pll: error:") and "audit.csv: the output must be a .parquet file" in err
    assert not (tmp_path / "mlflow.db").exists()

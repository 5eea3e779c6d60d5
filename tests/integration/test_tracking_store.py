"""The tracking store: processes that start at once on a new SQLite store all get it."""

import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from prefect.exceptions import TerminationSignal

ROOT = Path(__file__).resolve().parents[2]

# Each process imports what a scheduled run imports, says it is ready and waits for the word to go (a line on
# stdin, sent to all four at once), then opens the store and logs one run, as a scheduled run does.
FIRST_RUN = """
import sys
import pytest
from mlflow.tracking import MlflowClient
from prefect.exceptions import TerminationSignal
from tracking.runs import experiment_id, resolve_tracking_uri
print("ready", flush=True)
sys.stdin.readline()
uri = resolve_tracking_uri(sys.argv[1])
client = MlflowClient(uri)
client.create_run(experiment_id(client, "first", uri))
"""


def test_concurrent_first_runs_on_a_new_store_all_finish(tmp_path):
    """MLflow's schema migration raced on a new file (alembic CommandError): three of four such processes died."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    processes = [
        subprocess.Popen([sys.executable, "-c", FIRST_RUN, uri], cwd=ROOT, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(4)
    ]
    try:
        # The imports take seconds; once all four are ready, they open the store within a millisecond of each other.
        for p in processes:
            assert p.stdout.readline() == "ready\n", p.communicate(timeout=300)[0]
        for p in processes:
            p.stdin.write("go\n")
        for p in processes:
            p.stdin.flush()
        outputs = [p.communicate(timeout=300)[0] for p in processes]
    finally:
        for p in processes:
            p.kill()
            p.wait()
    assert [p.returncode for p in processes] == [0] * 4, outputs
    client = MlflowClient(uri)
    assert len(client.search_runs([client.get_experiment_by_name("first").experiment_id])) == 4
    assert not list(tmp_path.glob("*.lock"))  # the lock is the folder's: nothing is left beside the store
    assert not list(tmp_path.glob(".*.tmp"))  # built beside the store (pll.utils.atomic_files), renamed into place


@pytest.mark.parametrize("error, status", [(KeyboardInterrupt, "KILLED"), (TerminationSignal(15), "KILLED"),
                                           (ValueError("a bug"), "FAILED")])
def test_a_tracked_run_ends_killed_when_interrupted_and_failed_on_an_error(prefect_harness, tracking_uri, error,
                                                                          status):
    from pll_pipeline.flows.tracked import ending_on_error
    from pll_pipeline.tracking.runs import experiment_id, resolve_tracking_uri

    uri = resolve_tracking_uri(tracking_uri)
    client = MlflowClient(uri)
    run_id = client.create_run(experiment_id(client, "ends", uri)).info.run_id
    with pytest.raises(type(error) if isinstance(error, BaseException) else error):
        with ending_on_error(uri, run_id):
            raise error
    assert client.get_run(run_id).info.status == status

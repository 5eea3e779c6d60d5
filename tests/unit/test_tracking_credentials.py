"""A tracking URI's password is never printed, handed to a flow, or taken from a command line."""

import pytest

from pll.errors import TrackingStoreError
from pll_pipeline.flows import ui
from pll_pipeline.tracking.store import handed_on, holds_password, redacted, resolve_tracking_uri

SECRET = "postgresql+psycopg://pll:s3cr%40t@127.0.0.1:5432/mlflow"


def test_a_password_is_found_and_redacted_and_nothing_else_is_changed():
    assert holds_password(SECRET) and redacted(SECRET) == "postgresql+psycopg://pll:***@127.0.0.1:5432/mlflow"
    for uri in ("sqlite:///mlflow.db", "http://127.0.0.1:5000", "http://user@host:1", "databricks://profile",
                "http://user:@host:1"):
        assert not holds_password(uri) and redacted(uri) == uri and handed_on(uri) == uri


def test_a_uri_with_a_password_is_refused_as_an_argument_and_taken_from_the_environment(monkeypatch):
    with pytest.raises(TrackingStoreError, match=r"pll:\*\*\*@.*export MLFLOW_TRACKING_URI") as caught:
        resolve_tracking_uri(SECRET)
    assert "s3cr" not in str(caught.value)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", SECRET)
    assert resolve_tracking_uri(None) == SECRET  # a database store: left to MLflow, which connects later
    assert handed_on(SECRET) is None  # what a flow records as its parameter: the flow reads the environment


def test_the_ui_hint_and_server_command_hold_no_password():
    assert ui.ui_hint(SECRET, run_id="abc") == "pll ui --run abc"
    assert SECRET not in " ".join(ui.server_command(SECRET, 5000))
    assert ui.shown(SECRET) == redacted(SECRET)

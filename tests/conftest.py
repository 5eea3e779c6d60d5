"""Shared fixtures: an isolated Prefect home and a temporary MLflow store per test session."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("MPLBACKEND", "Agg")


# Each test session gets its own Prefect home, so that parallel sessions never share a database.
os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="pll-prefect-home-")


@pytest.fixture(scope="session")
def prefect_harness():
    """A real, temporary Prefect server for the whole session."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture
def tracking_uri(tmp_path):
    """A fresh SQLite MLflow store with its artifacts under ``tmp_path``."""
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


@pytest.fixture(scope="session")
def shared_data():
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA

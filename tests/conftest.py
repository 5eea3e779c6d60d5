"""Shared fixtures (an isolated Prefect home, a temporary MLflow store) and the markers each folder sets.

The folders say what a test needs: ``unit`` the library alone, ``integration``
real Prefect, MLflow or Dask in the test's process, ``e2e`` the command line
in processes of its own.  Tests in the last two are ``slow``: ``pytest -m "not slow"``
(``make test-fast``) runs the unit tests alone.
"""

from __future__ import annotations

import os
import tempfile
from importlib.util import find_spec
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
FOLDER_MARKS = {"unit": (), "integration": ("slow",), "e2e": ("slow",)}
SHARED_DATA = ROOT.parent / "shared" / "data"

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Each worker has a core: thread pools of their own (OpenMP's spin-waiting above all, as in histogram
    # boosting) would fight the other workers for it.  Set before numpy loads; the processes tests start inherit it.
    for _threads in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_threads, "1")
os.environ.setdefault("MPLBACKEND", "Agg")


# Each test session gets its own Prefect home, so that parallel sessions never share a database.
os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="pll-prefect-home-")


@pytest.fixture(scope="session")
def prefect_harness():
    """A real, temporary Prefect server for the whole session."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def prefect_api_url(prefect_harness):
    """The session server's address, for the ``pll`` commands tests start in processes of their own.

    A command without ``PREFECT_API_URL`` starts a temporary server, some 15 s of a core each time;
    the tests about that server (its start, its log, that it dies with the command) unset the address.
    """
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value()


@pytest.fixture
def tracking_uri(tmp_path):
    """A fresh SQLite MLflow store with its artifacts under ``tmp_path``."""
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


@pytest.fixture(scope="session")
def shared_data():
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


def pytest_collection_modifyitems(items):
    """Mark each test with its folder's kind and, in ``integration`` and ``e2e``, as ``slow``.

    A test marked ``deep`` (a deep learner, the audit's default learners) skips where the ``deep`` extra is not
    installed, as on the Python 3.13 check (``make test-py313``).
    """
    no_torch = pytest.mark.skip(reason="needs the deep extra (PyTorch), not installed here")
    for item in items:
        if find_spec("torch") is None and item.get_closest_marker("deep"):
            item.add_marker(no_torch)
        path = Path(item.fspath).resolve().relative_to(TESTS)
        folder = path.parts[0]
        if folder not in FOLDER_MARKS:
            raise pytest.UsageError(f"{item.nodeid}: a test belongs in one of tests/{{{','.join(FOLDER_MARKS)}}}/")
        for name in (folder, *FOLDER_MARKS[folder]):
            item.add_marker(name)

"""Which MLflow tracking store a run writes to, checked before anything is logged.

MLflow retries an unreachable server for minutes and creates a SQLite file's
missing folders as it goes; a run should instead stop at once with one line
that names the store.  Nothing here imports MLflow, so the command line can
check a store before it starts Prefect.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pll.errors import TrackingStoreError
from pll_pipeline.tracking.health import health_problem

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
SQLITE_PREFIX = "sqlite:///"


def resolve_tracking_uri(uri: str | None) -> str:
    """The flag's URI, else ``MLFLOW_TRACKING_URI``, else a SQLite store in the working directory; checked."""
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI
    check_tracking_uri(uri)
    return uri


def artifact_location(tracking_uri: str) -> str | None:
    """Artifacts of a local SQLite store live beside its database file; other stores decide themselves."""
    if not tracking_uri.startswith(SQLITE_PREFIX):
        return None
    return (Path(tracking_uri[len(SQLITE_PREFIX):]).resolve().parent / "mlartifacts").as_uri()


def check_tracking_uri(uri: str) -> None:
    """Raise :class:`TrackingStoreError` unless the store at ``uri`` can be used; create nothing.

    A SQLite store must be an existing database file that can be written, or
    a new file in an existing folder where files can be created (probed
    with an unnamed temporary file); a tracking server must answer its
    ``/health`` check within :data:`~pll_pipeline.tracking.health.HEALTH_TIMEOUT_SECONDS`.  Other stores
    (databases, Databricks) are left to MLflow.
    """
    if uri.startswith(SQLITE_PREFIX):
        _check_sqlite(uri, Path(uri[len(SQLITE_PREFIX):]))
    elif uri.startswith(("http://", "https://")):
        _check_server(uri)


def _check_sqlite(uri, path):
    if str(path) == ":memory:":
        return
    if path.is_dir():
        raise TrackingStoreError(f"tracking store {uri}: {path} is a folder, not a database file")
    if path.exists():
        try:
            with open(path, "rb+"):
                pass
        except OSError as exc:
            raise TrackingStoreError(f"tracking store {uri}: cannot write {path} ({exc.strerror})") from None
        return
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise TrackingStoreError(f"tracking store {uri}: the folder {folder} does not exist; create it first")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise TrackingStoreError(
            f"tracking store {uri}: cannot create files in {folder} ({exc.strerror})"
        ) from None


def _check_server(uri):
    problem = health_problem(uri.rstrip("/") + "/health")
    if problem:
        raise TrackingStoreError(f"tracking server {uri} {problem}")

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
from urllib.parse import urlsplit, urlunsplit

from pll.errors import TrackingStoreError
from pll_pipeline.tracking.health import health_problem

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
SQLITE_PREFIX = "sqlite:///"


def resolve_tracking_uri(uri: str | None) -> str:
    """The flag's URI, else ``MLFLOW_TRACKING_URI``, else a SQLite store in the working directory; checked.

    A URI given here that holds a password is refused (:func:`refuse_password`): only the environment may
    give one.
    """
    if uri:
        refuse_password(uri)
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI
    check_tracking_uri(uri)
    return uri


def holds_password(uri: str) -> bool:
    """True when ``uri`` holds a password (``scheme://user:password@host/...``)."""
    try:
        return bool(urlsplit(uri).password)
    except ValueError:  # not a URL that has a password's place (a bad port, say): MLflow says what is wrong
        return False


def redacted(uri: str) -> str:
    """``uri`` with its password, if any, as ``***``: what may be printed."""
    if not holds_password(uri):
        return uri
    parts = urlsplit(uri)
    user, _, host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{user.split(':', 1)[0]}:***@{host}"))


def refuse_password(uri: str) -> None:
    """Raise :class:`TrackingStoreError` if ``uri``, given as an argument, holds a password.

    Every user sees a command line (``ps``), and a flow's arguments are recorded as its Prefect
    parameters: a password is read from ``MLFLOW_TRACKING_URI`` only.
    """
    if holds_password(uri):
        raise TrackingStoreError(
            f"the tracking URI {redacted(uri)} holds a password: never pass one as an argument (every user sees "
            "a command line in ps, and a flow's arguments are recorded); export MLFLOW_TRACKING_URI instead, "
            "e.g. from a file only you can read (mode 0600)")


def handed_on(uri: str) -> str | None:
    """``uri`` as a command hands it to a flow, or a flow to its subflows: None when it holds a password.

    Such a URI came from ``MLFLOW_TRACKING_URI`` (:func:`resolve_tracking_uri` refuses it elsewhere);
    the receiver, in the same process, resolves None from the same environment, and its recorded
    parameters hold no password.
    """
    return None if holds_password(uri) else uri


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

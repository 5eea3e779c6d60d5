"""Prefect's temporary server, started with its own output in a log file.

Without ``PREFECT_API_URL`` Prefect starts a temporary API server in a
subprocess that writes to the terminal it inherits; when it is stopped while
a request is still in flight, its database layer can print a shutdown
traceback that has nothing to do with the run.  Starting it here, with its
standard output and error pointed at a log file while it is spawned, keeps
the command's own output clean and the server's messages on record.

Each server process is tied to this one (:mod:`pll_pipeline.flows.processes`): it stops when ``pll`` dies,
even by SIGKILL, which runs none of the cleanup that stops it at a normal exit.
"""

from __future__ import annotations

import logging
import os
import sys
from contextlib import contextmanager
from pathlib import Path

from pll.errors import PllError
from pll_pipeline.tracking.health import health_problem

from . import processes


@contextmanager
def _descriptors_to(path):
    """Point file descriptors 1 and 2 at ``path`` (appending) for the duration."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


TEMPORARY_SERVER_ENV = "PLL_TEMPORARY_PREFECT_SERVER"
"""Set (to its address) while the API is this process's temporary server, whose UI is gone when the command ends."""

STARTUP_TIMEOUT_SECONDS = 180
"""How long the temporary server may take to start, unless ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``
is set: Prefect's own default of 20 s is missed on a loaded two-core machine (6-15 s when idle)."""


def startup_timeout(settings=None):
    """Seconds the temporary server may take to start: the user's setting, else :data:`STARTUP_TIMEOUT_SECONDS`.

    The user's setting is ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` from wherever Prefect reads it
    (environment, profile, ``.env``); only Prefect's own default of 20 s is replaced.  ``settings`` defaults to
    Prefect's current settings (tests pass their own).
    """
    from prefect.settings import get_current_settings

    ephemeral = (get_current_settings() if settings is None else settings).server.ephemeral
    if "startup_timeout_seconds" in ephemeral.model_fields_set:
        return ephemeral.startup_timeout_seconds
    return STARTUP_TIMEOUT_SECONDS


class TemporaryServerError(RuntimeError):
    """Prefect's temporary server did not start."""


class ServerUnreachableError(PllError):
    """The Prefect server named by ``PREFECT_API_URL`` does not answer."""


def check_configured_server(api_url, temporary=True):
    """Raise :class:`ServerUnreachableError` unless the server at ``api_url`` answers its health check.

    ``temporary``: whether the command could do with a temporary server instead (not ``pll serve``,
    whose deployments must outlive it), so that the hint offers that only where it works.
    """
    problem = health_problem(api_url.rstrip("/") + "/health")
    if problem:
        instead = " or unset PREFECT_API_URL to let pll start a temporary one" if temporary else (
            "; pll serve needs a server that outlives it, so a temporary one will not do")
        raise ServerUnreachableError(
            f"the Prefect server PREFECT_API_URL={api_url} {problem}; start it (prefect server start){instead}"
        )


def _tied_server():
    """Prefect's temporary server, each of whose processes is stopped by a watchdog once this process dies.

    ``_run_uvicorn_command`` is where Prefect 3 spawns the server (again on another port if the
    first one was taken); Prefect keeps one instance per port, so its own calls reuse this one.
    """
    from prefect.server.api.server import SubprocessASGIServer

    class TiedServer(SubprocessASGIServer):
        def _run_uvicorn_command(self):
            process = super()._run_uvicorn_command()
            self.watchdog = processes.tie(process)
            return process

    return TiedServer()


class _QuietStop(logging.Filter):
    """Leave out Prefect's line about stopping the temporary server at exit: the command's own last line (the
    UI command to type next) stays the last line of its output."""

    def filter(self, record):
        return not record.getMessage().startswith("Stopping temporary server")


_QUIET_STOP = _QuietStop()


@contextmanager
def temporary_server():
    """Start the temporary server unless a server is configured; yield its log file (or None).

    Prefect reuses the running instance for the rest of the process and stops
    it at exit.  Inside the block its address is this process's
    ``PREFECT_API_URL`` (in Prefect's settings and in the environment), so that
    Dask workers, which receive the settings with each task or inherit the
    environment, report to this server instead of starting their own.
    """
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_HOME,
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
        temporary_settings,
    )

    if PREFECT_API_URL.value():
        check_configured_server(PREFECT_API_URL.value())
        yield None
        return
    home = Path(PREFECT_HOME.value())
    home.mkdir(parents=True, exist_ok=True)
    log = home / "temporary-server.log"
    server = _tied_server()
    timeout = startup_timeout()
    try:
        with _descriptors_to(log):
            server.start(timeout=timeout)
    except RuntimeError:
        server.stop()
        raise TemporaryServerError(
            f"Prefect's temporary server did not start within {timeout} s "
            f"(its log: {log}); set {PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.name} to wait longer, "
            "or start a server (prefect server start) and point PREFECT_API_URL at it"
        ) from None
    os.environ[PREFECT_API_URL.name] = os.environ[TEMPORARY_SERVER_ENV] = server.api_url
    logging.getLogger("prefect").addFilter(_QUIET_STOP)  # added once: a filter is kept in a set-like list
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            yield log
    finally:
        del os.environ[PREFECT_API_URL.name], os.environ[TEMPORARY_SERVER_ENV]

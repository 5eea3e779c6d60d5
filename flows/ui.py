"""``pll ui``: the MLflow UI of a tracking store, opened where the method runs can be compared.

The links are built by :mod:`pll_pipeline.tracking.urls`.  The server is ``mlflow server`` in a process group of its
own, on 127.0.0.1 (:mod:`pll_pipeline.flows.processes`): Ctrl-C or SIGTERM stops the whole group, and its
watchdog stops it if ``pll ui`` is killed.  Its job runner (MLflow's background workers for GenAI judges,
seven processes) is turned off: browsing runs needs none of it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from contextlib import suppress

from pll.experiment import catalog
from pll_pipeline.tracking.urls import links, prefect_link

from .processes import GROUP_GRACE_SECONDS, ServerError, free_port, start_group, stop_group, tie, wait_until_healthy

STARTUP_TIMEOUT_SECONDS = 120
"""How long the server may take to answer; it imports MLflow and migrates a new store (20 s when loaded)."""


def add_arguments(parser) -> None:
    parser.add_argument("--tracking-uri", default=None,
                        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db); "
                        "an http(s) server is linked to, not started")
    parser.add_argument("--experiment", default=catalog.DEFAULT_EXPERIMENT,
                        help=f"the experiment whose method runs to list (default: {catalog.DEFAULT_EXPERIMENT})")
    parser.add_argument("--run", default=None, metavar="RUN_ID",
                        help="a pipeline or grid run: link to MLflow's compare view of its method runs")
    parser.add_argument("--port", type=int, default=None, help="the port on 127.0.0.1 (default: a free one)")


def invoked_as() -> list[str]:
    """The words that started this ``pll``, so that a command it prints runs as printed.

    ``pll`` where the PATH finds this same program; else its path as typed
    (``.venv/bin/pll`` after ``make run``); ``python -m pll_pipeline.flows.cli`` when run as a module.
    """
    program = sys.argv[0] if sys.argv else ""
    if os.path.basename(program) == "pll":
        found = shutil.which("pll")
        return ["pll"] if found and os.path.realpath(found) == os.path.realpath(program) else [program]
    if program.endswith(os.path.join("flows", "cli.py")):
        return [sys.executable, "-m", "pll_pipeline.flows.cli"]
    return ["pll"]


def ui_hint(tracking_uri: str, *, run_id: str | None = None, experiment: str | None = None) -> str:
    """The ``pll ui`` command that opens what a command just logged (printed at the end of run, benchmark, audit).

    It names ``pll`` as it was invoked (:func:`invoked_as`).
    """
    from pll_pipeline.tracking.store import holds_password

    # A URI with a password came from MLFLOW_TRACKING_URI, where pll ui finds it too.
    words = [*invoked_as(), "ui", *([] if holds_password(tracking_uri) else ["--tracking-uri", tracking_uri])]
    if experiment and experiment != catalog.DEFAULT_EXPERIMENT and not run_id:  # a run names its experiment
        words += ["--experiment", experiment]
    if run_id:
        words += ["--run", run_id]
    return shlex.join(words)


# --- the server ----------------------------------------------------------------------------------------


def shown(tracking_uri: str) -> str:
    """The URI as printed: without its password (:func:`pll_pipeline.tracking.store.redacted`)."""
    from pll_pipeline.tracking.store import redacted

    return redacted(tracking_uri)


def server_command(tracking_uri: str, port: int) -> list[str]:
    """The MLflow server's command line; its store comes through the environment (:func:`start_server`), as a
    password in it must not show in ``ps``."""
    from pll_pipeline.tracking.store import artifact_location

    command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    artifacts = artifact_location(tracking_uri)
    if artifacts:  # beside the database, as the runs write them, not in the working directory
        command += ["--artifacts-destination", artifacts]
    return command


def start_server(tracking_uri: str, port: int, log_path: str) -> subprocess.Popen:
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_BACKEND_STORE_URI": tracking_uri}
    return start_group(server_command(tracking_uri, port), log_path, env)


class _Terminated(Exception):
    """SIGTERM, turned into an exception so that the server is stopped on the way out."""


def _raise_terminated(signum, frame):
    raise _Terminated


def print_links(tracking_uri: str, base: str, experiment: str, run_id: str | None) -> None:
    what, link, tags = links(base, experiment, run_id)
    print(f"MLflow UI of {shown(tracking_uri)}: {what}")
    print(f"  {link}")
    api_url = os.environ.get("PREFECT_API_URL")
    if api_url:
        print(f"Prefect flow runs:\n  {prefect_link(api_url, tags)}")
    sys.stdout.flush()


def main(args) -> int:
    """``pll ui``: start the server (unless the store is a server), print the links, wait for Ctrl-C."""
    from pll_pipeline.tracking.store import resolve_tracking_uri

    tracking_uri = resolve_tracking_uri(args.tracking_uri)
    if tracking_uri.startswith(("http://", "https://")):
        print_links(tracking_uri, tracking_uri.rstrip("/"), args.experiment, args.run)
        return 0
    port = args.port or free_port()
    base = f"http://127.0.0.1:{port}"
    log_fd, log_path = tempfile.mkstemp(prefix="pll-ui-", suffix=".log")
    os.close(log_fd)
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    # Ctrl-C stops the server even where pll ui was started with SIGINT ignored, as a shell starts background jobs.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    process = watchdog = None
    keep_log = False
    try:
        process = start_server(tracking_uri, port, log_path)
        watchdog = tie(process)
        wait_until_healthy(process, f"{base}/health", "the MLflow server", log_path, STARTUP_TIMEOUT_SECONDS)
        print_links(tracking_uri, base, args.experiment, args.run)
        print(f"Serving on {base} (its log: {log_path}); Ctrl-C stops it.", flush=True)
        process.wait()
        raise ServerError(f"the MLflow server stopped with status {process.returncode} (its log: {log_path})")
    except (KeyboardInterrupt, _Terminated):
        print("pll ui: stopped", file=sys.stderr)
        return 0
    except ServerError:
        keep_log = True
        raise
    finally:
        # A second Ctrl-C or SIGTERM must not cut the cleanup short; it ends within GROUP_GRACE_SECONDS.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if process is not None:
            stop_group(process)
        if watchdog is not None:
            try:
                watchdog.wait(GROUP_GRACE_SECONDS + 5)  # it exits once the server has
            except subprocess.TimeoutExpired:
                watchdog.kill()
                watchdog.wait()
        if not keep_log:
            with suppress(OSError):
                os.unlink(log_path)
        signal.signal(signal.SIGINT, previous_int)
        signal.signal(signal.SIGTERM, previous)

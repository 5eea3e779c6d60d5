"""Serve the deployments of ``deployments/prefect.yaml`` with their schedules from one process.

``pll serve`` registers each deployment under a name of its own, ``<name>-served``.  With the file's
names, serving and ``prefect deploy`` would write the same server-side deployment: the serve runner
drops the pull step that ``prefect deploy`` set (a run then crashed with "Downloading flow code from
storage at None"), and stopping ``pll serve`` pauses the schedules that a work-pool worker runs.  Own
names keep each deployment with the one process that registered it, in either order.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

import yaml
from prefect import serve
from prefect.deployments.runner import RunnerDeployment
from prefect.exceptions import TerminationSignal
from prefect.runner.storage import LocalStorage
from prefect.schedules import Cron
from prefect.settings import PREFECT_API_URL

from pll.errors import InvalidParameterError, PllError

from .server import check_configured_server

# Beside flows/ in a checkout, inside pll_pipeline/ in an installed wheel: the same relative place.
DEPLOYMENTS_FILE = Path(__file__).resolve().parents[1] / "deployments" / "prefect.yaml"
SERVED_SUFFIX = "-served"
PAUSE_TIMEOUT_SECONDS = 5
"""How long stopping ``pll serve`` waits for the server to pause its schedules: SIGTERM stops it within 10 s."""


class ServerNotConfiguredError(PllError):
    """``pll serve`` was started without a Prefect server to register its deployments with."""


def load_deployment_specs(path=DEPLOYMENTS_FILE) -> list[dict]:
    """The ``deployments`` entries of a prefect.yaml file."""
    if not Path(path).is_file():
        raise InvalidParameterError(f"{path}: no such deployments file")
    try:
        specs = yaml.safe_load(Path(path).read_text())["deployments"]
    except (OSError, KeyError, TypeError, yaml.YAMLError) as exc:
        raise InvalidParameterError(f"{path}: not a prefect.yaml with a 'deployments' list ({exc})") from None
    return specs


def served_name(name: str) -> str:
    """The name ``pll serve`` gives the file's deployment ``name``: never one that ``prefect deploy`` uses."""
    return f"{name}{SERVED_SUFFIX}"


def to_runner_deployments(specs, working_dir=None):
    """Runner deployments (flow, parameters, schedules) for :func:`prefect.serve`.

    The entrypoints are module paths of the installed package; runs start in ``working_dir``
    (default: the directory ``pll serve`` was started from), where relative paths such as
    ``incoming/`` resolve, as the work-pool deployments' pull step makes them start in ``$PLL_PROJECT_DIR``.
    """
    storage = LocalStorage(str(Path(working_dir or Path.cwd()).resolve()))
    deployments = []
    for spec in specs:
        crons = [Cron(s["cron"], timezone=s.get("timezone")) for s in spec.get("schedules") or [] if "cron" in s]
        deployments.append(
            RunnerDeployment.from_storage(
                storage=storage,
                entrypoint=spec["entrypoint"],
                name=served_name(spec["name"]),
                description=spec.get("description"),
                parameters=spec.get("parameters") or {},
                schedules=crons or None,
                concurrency_limit=spec.get("concurrency_limit"),
            )
        )
    return deployments


def serve_all(path=DEPLOYMENTS_FILE):
    """Serve every deployment in ``path`` until interrupted.

    Without ``PREFECT_API_URL`` Prefect would register them with a temporary server of this process
    that nothing else can reach; refuse that in one line instead.
    """
    if not PREFECT_API_URL.value():
        raise ServerNotConfiguredError(
            "pll serve needs a running Prefect server: start one (prefect server start) and set PREFECT_API_URL, "
            "e.g. export PREFECT_API_URL=http://127.0.0.1:4200/api"
        )
    check_configured_server(PREFECT_API_URL.value(), temporary=False)
    deployments = to_runner_deployments(load_deployment_specs(path))
    # SIGTERM before Prefect's runner installs its own handler (while it registers the deployments) ends the
    # serving as the runner's would, instead of killing the process before the schedules are paused.
    signal.signal(signal.SIGTERM, _terminated)
    try:
        serve(*deployments, pause_on_shutdown=False)
    finally:
        pause_schedules(deployments)


def _terminated(signum, frame):
    raise TerminationSignal(signal=signum)


def pause_schedules(deployments, timeout=PAUSE_TIMEOUT_SECONDS):
    """Pause the served deployments' schedules, as Prefect's serve would on stopping, but for ``timeout`` s at most.

    Prefect's own pause retries for a minute against a server that is down, and ``pll serve`` would not stop
    on SIGTERM until then; here a server that does not answer in time leaves the schedules as they are, and a
    line says so (nothing runs them while no ``pll serve`` serves them).
    """
    from prefect import get_client

    def pause():
        with get_client(sync_client=True) as client:
            for deployment in deployments:
                found = client.read_deployment_by_name(f"{deployment.flow_name}/{deployment.name}")
                client.pause_deployment(found.id)

    failure = []
    worker = threading.Thread(target=lambda: _catching(pause, failure), name="pll-serve-pause", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive() or failure:
        why = f"did not answer within {timeout} s" if worker.is_alive() else f"failed ({failure[0]})"
        print(f"pll serve: the Prefect server {why}: the served deployments' schedules were not paused",
              file=sys.stderr, flush=True)


def _catching(function, failure):
    try:
        function()
    except Exception as exc:  # noqa: BLE001 - reported in one line by the caller, whatever the client raised
        failure.append(f"{type(exc).__name__}: {exc}")

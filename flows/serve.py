"""Serve the deployments of ``deployments/prefect.yaml`` with their schedules from one process."""

from __future__ import annotations

from pathlib import Path

import yaml
from prefect import serve
from prefect.flows import load_flow_from_entrypoint
from prefect.schedules import Cron

from pll.errors import InvalidParameterError

PROJECT_DIR = Path(__file__).resolve().parents[1]
DEPLOYMENTS_FILE = PROJECT_DIR / "deployments" / "prefect.yaml"


def load_deployment_specs(path=DEPLOYMENTS_FILE) -> list[dict]:
    """The ``deployments`` entries of a prefect.yaml file."""
    try:
        specs = yaml.safe_load(Path(path).read_text())["deployments"]
    except (OSError, KeyError, TypeError, yaml.YAMLError) as exc:
        raise InvalidParameterError(f"{path}: not a prefect.yaml with a 'deployments' list ({exc})") from None
    return specs


def to_runner_deployments(specs, project_dir=PROJECT_DIR):
    """Runner deployments (flow, parameters, schedules) for :func:`prefect.serve`."""
    deployments = []
    for spec in specs:
        flow = load_flow_from_entrypoint(str(project_dir / spec["entrypoint"]))
        crons = [Cron(s["cron"], timezone=s.get("timezone")) for s in spec.get("schedules") or [] if "cron" in s]
        deployments.append(
            flow.to_deployment(
                name=spec["name"],
                description=spec.get("description"),
                parameters=spec.get("parameters") or {},
                schedules=crons or None,
                concurrency_limit=spec.get("concurrency_limit"),
            )
        )
    return deployments


def serve_all(path=DEPLOYMENTS_FILE):
    """Serve every deployment in ``path`` until interrupted."""
    serve(*to_runner_deployments(load_deployment_specs(path)))

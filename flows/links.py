"""Prefect and MLflow name each other: a flow run knows its MLflow run, an MLflow run its flow run.

Someone looking at a failed flow run in Prefect finds the run to open in
MLflow, and someone comparing runs in MLflow finds the flow run whose logs
say what each stage did.  The flow run's URL is recorded only for a server
that outlives the command: the temporary server of a ``pll`` command (see
:mod:`pll_pipeline.flows.server`) is gone with it.
"""

from __future__ import annotations

import os

from prefect import get_client, runtime
from prefect.artifacts import create_markdown_artifact

from pll_pipeline.flows.server import TEMPORARY_SERVER_ENV
from pll_pipeline.tracking.urls import FLOW_RUN_ID_TAG, FLOW_RUN_NAME_TAG, FLOW_RUN_URL_TAG
MLFLOW_TAG_PREFIX = "mlflow-run:"


def flow_run_tags(name: str | None = None) -> dict:
    """MLflow tags naming the current flow run: its id and name, and its URL when its server outlives the command.

    ``name``: the name the flow run is being given (:func:`name_flow_run`), if not the one it started with.
    """
    flow_run_id = runtime.flow_run.id
    if flow_run_id is None:
        return {}
    tags = {FLOW_RUN_ID_TAG: str(flow_run_id), FLOW_RUN_NAME_TAG: name or runtime.flow_run.name}
    if not os.environ.get(TEMPORARY_SERVER_ENV):
        tags[FLOW_RUN_URL_TAG] = runtime.flow_run.ui_url
    return tags


def tag_flow_run(mlflow_run_id: str) -> None:
    """Add the tag ``mlflow-run:<id>`` to the current flow run (Prefect tags are plain strings)."""
    flow_run_id = runtime.flow_run.id
    if flow_run_id is None:
        return
    with get_client(sync_client=True) as client:
        tags = client.read_flow_run(flow_run_id).tags
        client.update_flow_run(flow_run_id, tags=[*tags, f"{MLFLOW_TAG_PREFIX}{mlflow_run_id}"])


def name_flow_run(name: str) -> None:
    """Rename the current flow run (to its MLflow run's name, known only once the flow has read its input)."""
    flow_run_id = runtime.flow_run.id
    if flow_run_id is not None and runtime.flow_run.name != name:
        with get_client(sync_client=True) as client:
            client.update_flow_run(flow_run_id, name=name)


def publish_table(markdown: str, description: str) -> None:
    """The metrics table as a Markdown artifact of the current flow run (its Artifacts tab)."""
    if runtime.flow_run.id is not None:
        create_markdown_artifact(markdown=markdown, description=description)

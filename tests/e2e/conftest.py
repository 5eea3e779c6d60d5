"""The ``pll`` commands of these tests report to the session's Prefect server, unless a test unsets the address."""

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _session_server(prefect_api_url):
    before = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = prefect_api_url
    yield
    if before is None:
        del os.environ["PREFECT_API_URL"]
    else:
        os.environ["PREFECT_API_URL"] = before

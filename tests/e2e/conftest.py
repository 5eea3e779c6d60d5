"""The ``pll`` commands of these tests report to the session's Prefect server, unless a test unsets the address."""

import pytest


@pytest.fixture(scope="session", autouse=True)
def _session_server(prefect_api_url):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PREFECT_API_URL", prefect_api_url)
        yield

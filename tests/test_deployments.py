"""The deployment file: its entrypoints import and its parameters validate against the flows."""

import pytest
from prefect.flows import load_flow_from_entrypoint

from flows.serve import DEPLOYMENTS_FILE, PROJECT_DIR, load_deployment_specs

SPECS = load_deployment_specs()


def test_file_has_an_adhoc_and_a_scheduled_deployment():
    assert any(not s.get("schedules") for s in SPECS)
    assert any(sch.get("cron") for s in SPECS for sch in s.get("schedules") or [])


@pytest.mark.parametrize("spec", SPECS, ids=[s["name"] for s in SPECS])
def test_entrypoint_imports_and_parameters_validate(spec):
    flow = load_flow_from_entrypoint(str(PROJECT_DIR / spec["entrypoint"]))
    params = spec.get("parameters") or {}
    validated = flow.validate_parameters(params)
    assert set(params) <= set(validated)


def test_bad_parameters_are_rejected():
    flow = load_flow_from_entrypoint(str(PROJECT_DIR / SPECS[0]["entrypoint"]))
    with pytest.raises(Exception, match="seed"):
        flow.validate_parameters({"seed": "not a number"})


def test_missing_file_is_a_clear_error(tmp_path):
    from pll.errors import PllError

    with pytest.raises(PllError, match="prefect.yaml"):
        load_deployment_specs(tmp_path / "prefect.yaml")
    assert DEPLOYMENTS_FILE.is_file()

"""The deployment file and what ``pll serve`` registers from it.

The file's entrypoints import and their parameters validate; ``pll serve`` keeps every deployment's
parameters and schedules under a name of its own, with the checkout as its code's location, and
refuses in one line to start without a server.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from prefect.flows import load_flow_from_entrypoint

from pll_pipeline.flows.serve import DEPLOYMENTS_FILE, load_deployment_specs, served_name, to_runner_deployments

SPECS = load_deployment_specs()


def test_file_has_an_adhoc_and_a_scheduled_deployment():
    assert any(not s.get("schedules") for s in SPECS)
    assert any(sch.get("cron") for s in SPECS for sch in s.get("schedules") or [])


@pytest.mark.parametrize("spec", SPECS, ids=[s["name"] for s in SPECS])
def test_entrypoint_imports_and_parameters_validate(spec):
    flow = load_flow_from_entrypoint(spec["entrypoint"])
    params = spec.get("parameters") or {}
    validated = flow.validate_parameters(params)
    assert set(params) <= set(validated)


def test_bad_parameters_are_rejected():
    flow = load_flow_from_entrypoint(SPECS[0]["entrypoint"])
    with pytest.raises(Exception, match="seed"):
        flow.validate_parameters({"seed": "not a number"})


def test_missing_file_is_a_clear_error(tmp_path):
    from pll.errors import PllError

    with pytest.raises(PllError, match="prefect.yaml: no such deployments file"):
        load_deployment_specs(tmp_path / "prefect.yaml")
    (tmp_path / "prefect.yaml").write_text("name: pll\n")
    with pytest.raises(PllError, match="not a prefect.yaml"):
        load_deployment_specs(tmp_path / "prefect.yaml")
    assert DEPLOYMENTS_FILE.is_file()


def test_serve_keeps_every_deployment_under_a_name_of_its_own(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs start where pll serve started; the code is the installed package's
    deployments = {d.name: d for d in to_runner_deployments(SPECS)}
    assert set(deployments) == {served_name(s["name"]) for s in SPECS}
    assert not set(deployments) & {s["name"] for s in SPECS}  # prefect deploy's names stay its own
    for spec in SPECS:
        served = deployments[served_name(spec["name"])]
        assert served.entrypoint == spec["entrypoint"]
        assert served.storage.destination == tmp_path.resolve()
        assert served.parameters == (spec.get("parameters") or {})
        assert served.concurrency_limit == spec.get("concurrency_limit")
        want = [(s["cron"], s.get("timezone")) for s in spec.get("schedules") or []]
        got = [(s.schedule.cron, s.schedule.timezone) for s in served.schedules or []]
        assert got == want, spec["name"]
    assert deployments["benchmark-nightly-served"].parameters == {"grid": "benchmarks/grids/smoke.yaml"}


def test_serve_without_a_server_says_so_in_one_line(tmp_path):
    env = {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    pll = Path(sys.executable).parent / "pll"
    done = subprocess.run([str(pll), "serve"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "PREFECT_API_URL" in done.stderr, done.stderr
    assert not list((tmp_path / "prefect-home").rglob("*"))  # no temporary server, no database

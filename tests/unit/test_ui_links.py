"""The links `pll ui` prints carry what MLflow 3's UI reads: the model-training view, the method filter, the runs."""

import json
import sys
import urllib.parse

import pytest

from pll_pipeline.flows import ui
from pll_pipeline.tracking import urls


def _hash_query(url):
    """The path and the query of a hash-routed link (MLflow's UI routes after '#')."""
    route = urllib.parse.urlsplit(url).fragment
    path, _, query = route.partition("?")
    return path, urllib.parse.parse_qs(query)


def test_runs_table_link_opens_the_model_training_view_filtered_to_method_runs():
    url = urls.runs_table_url("http://127.0.0.1:5000", "7")
    assert url.startswith("http://127.0.0.1:5000/#/experiments/7/runs?")
    path, query = _hash_query(url)
    assert path == "/experiments/7/runs"
    assert query == {"workflowType": ["machine_learning"], "searchFilter": ["tags.pll.kind = 'method'"]}


def test_compare_link_names_every_run_as_json():
    url = urls.compare_url("http://127.0.0.1:5000", ["a1", "b2"], ["3"])
    path, query = _hash_query(url)
    assert path == "/compare-runs"
    assert json.loads(query["runs"][0]) == ["a1", "b2"]
    assert json.loads(query["experiments"][0]) == ["3"]


def test_hint_names_the_store_and_the_run(monkeypatch):
    monkeypatch.setattr(ui, "invoked_as", lambda: ["pll"])
    assert ui.ui_hint("sqlite:///mlflow.db") == "pll ui --tracking-uri sqlite:///mlflow.db"
    assert ui.ui_hint("sqlite:///a b.db", run_id="abc") == "pll ui --tracking-uri 'sqlite:///a b.db' --run abc"
    assert ui.ui_hint("sqlite:///m.db", experiment="pll-benchmark").endswith("--experiment pll-benchmark")
    assert "--experiment" not in ui.ui_hint("sqlite:///m.db", experiment="pll")  # the default


def test_prefect_link_prefers_the_flow_run(monkeypatch):
    monkeypatch.delenv("PREFECT_UI_URL", raising=False)
    api = "http://127.0.0.1:4200/api"
    assert urls.prefect_link(api) == "http://127.0.0.1:4200/runs"
    assert urls.prefect_link(api, {"prefect.flow_run_id": "f1"}) == "http://127.0.0.1:4200/runs/flow-run/f1"
    assert urls.prefect_link(api, {"prefect.flow_run_url": "http://x/runs/flow-run/f2"}) == "http://x/runs/flow-run/f2"
    monkeypatch.setenv("PREFECT_UI_URL", "http://ui.example/")
    assert urls.prefect_link(api) == "http://ui.example/runs"


def test_pll_ui_is_a_command():
    from pll_pipeline.flows.cli import build_parser

    args = build_parser().parse_args(["ui", "--tracking-uri", "sqlite:///x.db", "--run", "r1", "--port", "5001"])
    assert (args.command, args.tracking_uri, args.run, args.port) == ("ui", "sqlite:///x.db", "r1", 5001)


@pytest.mark.parametrize(
    ("argv0", "on_path", "expected"),
    [
        (".venv/bin/pll", False, [".venv/bin/pll"]),  # after make run: not on the PATH, named as typed
        ("/opt/env/bin/pll", True, ["pll"]),  # the PATH finds this very program
        ("/somewhere/flows/cli.py", False, [sys.executable, "-m", "pll_pipeline.flows.cli"]),
    ],
)
def test_printed_commands_name_pll_as_it_was_invoked(monkeypatch, tmp_path, argv0, on_path, expected):
    program = tmp_path / "bin" / "pll"
    program.parent.mkdir()
    program.write_text("")
    program.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(program) if on_path else argv0])
    monkeypatch.setenv("PATH", str(program.parent) if on_path else str(tmp_path))
    assert ui.invoked_as() == expected

"""The ``pll`` command line: a real run, a different tracking store, and bad input."""

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.processes import free_port

ROOT = Path(__file__).resolve().parents[2]


def _pll(*args, cwd, env=None):
    return _python("-m", "pll_pipeline.flows.cli", *args, cwd=cwd, env=env)


def _python(*args, cwd, env=None):
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_run_logs_to_the_store_named_by_environment(tmp_path):
    """With nothing configured, as a user's first run: a temporary Prefect server, and the store the environment names."""
    uri = f"sqlite:///{tmp_path / 'somewhere.db'}"
    out = _pll("run", "--methods", "pl_knn", cwd=tmp_path, env={"MLFLOW_TRACKING_URI": uri, "PREFECT_API_URL": "",
                                                                "PREFECT_HOME": str(tmp_path / "prefect-home")})
    assert out.returncode == 0, out.stderr
    assert f"Prefect: temporary local server (its log: {tmp_path / 'prefect-home' / 'temporary-server.log'})" in out.stdout
    assert "| pl_knn" in out.stdout
    assert "A prediction counts as correct when it is the row's true label (test rows):" in out.stdout
    assert "Labels: class_dependent noise (p=0.7, eps=0.7, r=1) added to the true labels" in out.stdout
    run_id = MlflowClient(uri).search_runs([MlflowClient(uri).get_experiment_by_name("pll").experiment_id],
                                           "tags.`pll.kind` = 'pipeline'")[0].info.run_id
    printed = shlex.join([sys.executable, "-m", "pll_pipeline.flows.cli", "ui", "--tracking-uri", uri, "--run", run_id])
    assert out.stdout.splitlines()[-1] == f"Open the UI with:  {printed}"  # as invoked, and the very last line
    assert "Stopping temporary server" not in out.stdout + out.stderr  # nothing follows it on stderr either
    assert "Traceback" not in out.stdout + out.stderr
    assert not (tmp_path / "mlflow.db").exists()
    runs = MlflowClient(uri).search_runs([MlflowClient(uri).get_experiment_by_name("pll").experiment_id])
    assert sorted(r.data.tags["pll.kind"] for r in runs) == ["method", "pipeline"]
    pipeline_run = next(r for r in runs if r.data.tags["pll.kind"] == "pipeline")
    method_run = next(r for r in runs if r.data.tags["pll.kind"] == "method")
    assert method_run.data.params["conformal_weights"] == method_run.data.tags["pll.fit.conformal_weights"]
    assert method_run.data.params["conformal_weights"] in ("method", "crossfit")
    assert pipeline_run.data.params["noise_applied"] == "class_dependent"
    assert json.loads(pipeline_run.data.params["noise_applied_params"]) == {"eps": 0.7, "p": 0.7, "r": 1}
    _runs_as_printed(printed, cwd=tmp_path, env={"PYTHONPATH": str(ROOT)})


def _runs_as_printed(command, cwd, env):
    """Run a printed ``pll ui`` command as a user would paste it: it serves the run's links; SIGTERM stops it."""
    ui = subprocess.Popen(shlex.split(command), cwd=cwd, env={**os.environ, **env}, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        lines = []
        for line in ui.stdout:
            lines.append(line)
            if line.startswith("Serving on "):
                break
        assert lines and lines[0].startswith("MLflow UI of "), lines + [ui.stderr.read()]
    finally:
        ui.send_signal(signal.SIGTERM)
    assert ui.wait(timeout=60) == 0


def test_run_with_the_strong_learners_and_every_reject_option(tmp_path):
    """IPAL on the shared kNN graph, and a meta-estimator that needs no neighbors, through the command line."""
    uri = f"sqlite:///{tmp_path / 'strong.db'}"
    out = _pll("run", "--dataset", "wine", "--methods", "ipal,pl_classifier", "--method-params",
               '{"pl_classifier": {"estimator": "hist_gradient_boosting", "max_rounds": 3}}',
               "--method-features", '{"pl_classifier": "standard"}', "--conformal-alpha", "0.2",
               cwd=tmp_path, env={"MLFLOW_TRACKING_URI": uri})
    assert out.returncode == 0, out.stderr[-3000:]
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("pll").experiment_id
    (run,) = client.search_runs([experiment], "tags.`pll.kind` = 'pipeline'")
    metrics, params = run.data.metrics, run.data.params
    for method in ("ipal", "pl_classifier"):
        (method_run,) = client.search_runs([experiment], f"params.method = '{method}'")
        method_metrics = method_run.data.metrics
        assert {f"{option}.risk_0.10" for option in ("native", "trust", "conformal")} <= set(method_metrics)
        assert 0.0 <= method_metrics["conformal.mean_set_size"] <= 3.0
    assert params["methods.pl_classifier.estimator"] == "hist_gradient_boosting"
    # how the disambiguation ended is on the method run
    (method_run,) = client.search_runs([experiment], "params.method = 'pl_classifier'")
    tags = method_run.data.tags
    assert 1 <= int(tags["pll.fit.rounds"]) <= 3 and tags["pll.fit.converged"] in {"True", "False"}
    assert 0.0 <= float(tags["pll.fit.weight_change"]) <= 1.0
    # PL-kNN's features searched neighbors for IPAL; the meta-estimator's own features searched none.
    assert "knn.minmax.recall" not in metrics and "knn.minmax.query_seconds" in metrics
    assert not any(name.startswith("knn.standard.") for name in metrics)
    assert "| ipal" in out.stdout and "| pl_classifier" in out.stdout


def test_unknown_dataset_is_one_line_without_traceback(tmp_path):
    out = _pll("run", "--dataset", "no-such-set", cwd=tmp_path)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert "unknown data set 'no-such-set'" in out.stderr
    assert "digits" in out.stderr


def test_a_temporary_server_that_does_not_start_is_one_line_naming_its_log_and_the_way_out(tmp_path):
    home = tmp_path / "prefect-home"
    out = _pll("run", "--methods", "pl_knn", cwd=tmp_path, env={
        "PREFECT_HOME": str(home), "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "0", "PREFECT_API_URL": ""})
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    (line,) = [line for line in out.stderr.splitlines() if line.startswith("pll: error:")]
    assert "temporary server did not start within 0 s" in line
    assert str(home / "temporary-server.log") in line and "PREFECT_API_URL" in line
    assert not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize("argv, message", [
    (["run", "--seed", "1.5"], "--seed: invalid int value: '1.5'"),
    (["run", "--conformal-alpha", "often"], "--conformal-alpha: not a number or 'none'"),
    (["run", "--knn", "faiss"], "invalid choice: 'faiss'"),
])
def test_unparsable_arguments_are_refused_by_the_parser(argv, message, capsys):
    from pll_pipeline.flows.cli import build_parser

    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["run", "--seed", "4294967296"], "seed must be a whole number in 0..4294967295, got 4294967296"),
    (["run", "--seed", "99999999999999999999"], "seed must be a whole number in 0..4294967295"),
    (["train", "--seed", "-1"], "seed must be a whole number in 0..4294967295, got -1"),
    (["audit", "--seed", "-1"], "seed must be a whole number in 0..4294967295, got -1"),
    (["run", "--methods", "pl_knn,knn"], "unknown method 'knn': choose from pl_knn, dst_pll, pl_aknn"),
    (["run", "--methods", ","], "no method to run"),
    (["run", "--features", "fancy"], "unknown feature pipeline 'fancy'"),
    (["run", "--conformal-alpha", "1.5"], "conformal_alpha must be a number in (0, 1) or None, got 1.5"),
    (["audit", "--n-neighbors", "0"], "n_neighbors"),
    (["benchmark", "benchmarks/grids/smoke.yaml", "--max-concurrency", "0"], "max_concurrency"),
])
def test_bad_arguments_are_refused_by_the_librarys_checks_before_anything_starts(argv, message, tmp_path, monkeypatch,
                                                                                 capsys):
    """The parser only parses; the values are checked where a flow or a notebook checks them, in one line."""
    from pll_pipeline.flows.cli import main

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pll: error:") and message in err, err
    assert not (tmp_path / "mlflow.db").exists()


def test_seed_range_and_method_lists_parse():
    from pll_pipeline.flows.cli import build_parser

    args = build_parser().parse_args(["run", "--seed", "4294967295", "--methods", "dst_pll, pl_knn"])
    assert args.seed == 2**32 - 1 and args.methods == ["dst_pll", "pl_knn"]


HEAVY_MODULES = ("prefect", "mlflow", "sklearn", "scipy", "numba", "dask", "pandas")
COMMANDS = ("run", "benchmark", "serve", "datasets", "train", "score", "audit", "report", "ui", "cache")


def test_help_imports_no_orchestration_tracking_or_numerics():
    """``pll --help`` and every subcommand's help answer without importing Prefect, MLflow or the numerics."""
    script = (
        "import sys\n"
        "from pll_pipeline.flows.cli import main\n"
        f"for argv in ([], *([c] for c in {COMMANDS!r})):\n"
        "    try:\n"
        "        main([*argv, '--help'])\n"
        "    except SystemExit as exit_:\n"
        "        assert exit_.code == 0, argv\n"
        f"print(sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_every_option_has_help_and_lists_its_choices():
    from pll_pipeline.flows.cli import build_parser

    parser = build_parser()
    (commands,) = [a for a in parser._actions if a.choices and a.dest == "command"]
    assert set(commands.choices) == set(COMMANDS)
    for name, sub in commands.choices.items():
        assert sub.description, name
        text = " ".join(sub.format_help().split())
        for action in sub._actions:
            assert action.help, f"pll {name} {action.option_strings or action.dest} has no help"
            for choice in action.choices or ():
                assert f"{choice}" in text, f"pll {name} --help does not list {choice!r}"


def test_the_catalog_names_what_the_registries_hold():
    from pll.experiment import catalog
    from pll.data import PROTOCOLS
    from pll.preprocessing import FEATURE_PIPELINES
    from pll.methods import METHODS
    from pll.noise import NOISE_MODELS

    assert list(catalog.METHODS) == list(METHODS)
    assert list(catalog.FEATURE_PIPELINES) == list(FEATURE_PIPELINES)
    assert list(catalog.NOISE_MODELS) == list(NOISE_MODELS)
    assert list(catalog.PROTOCOLS) == list(PROTOCOLS)


BAD_GRID = "name: typo\ndatasets: iris\nseeds: [0]\nnoise: {model: uniform, pp: 0.7}\nmethods: {pl_knn: {}}\n"


BAD_INPUTS = [
    (["run", "--dataset", "nosuch.csv"], "nosuch.csv: no such file"),
    (["run", "--noise", "uniform", "--noise-params", '{"pp": 0.7}'], "noise model 'uniform' has no parameter 'pp'"),
    (["run", "--method-params", '{"pl_knn": {"k": 3}}'], "method 'pl_knn' has no parameter(s) k"),
    (["run", "--knn", "exact", "--knn-options", '{"n_trees": 8}'], "kNN backend 'exact' has no option 'n_trees'"),
    (["train", "--dataset", "nosuch.mat"], "nosuch.mat: no such file"),
    (["run", "--tracking-uri", "sqlite:////proc/pll-test.db"], "cannot create files in /proc"),
    (["run", "--tracking-uri", "sqlite:////pll-no-such-dir/sub/x.db"], "the folder /pll-no-such-dir/sub does not exist"),
    (["train", "--tracking-uri", "{server}"], "cannot be reached"),
    (["benchmark", "{grid}"], "noise: noise model 'uniform' has no parameter 'pp'"),
    (["score", "--model", "models:/m/1", "--input", "nosuch.csv", "--output", "out.parquet"], "nosuch.csv"),
    (["score", "--model", "models:/m/1", "--input", "{csv}", "--output", "/proc/nope/out.parquet"], "/proc/nope"),
    # The content of a file, read before the server starts:
    (["run", "--dataset", "{text_feature}"], "feature column 'a': 'abc'"),
    (["run", "--dataset", "{empty_bag}"], "empty candidate bag (first at line 3, row 1); to accept them as noisy "
                                          "partial labels, pass --noisy-bags"),
    (["train", "--dataset", "{no_candidates}"], "no column 'candidates'"),
    (["audit", "--dataset", "{comma_bag}"], "reads as labels separated by ',', but candidate labels are separated by "
                                            "'|' (write 'x|y')"),
    (["run", "--dataset", "{comma_bag_labelled}"], "reads as labels separated by ','"),
    (["run", "--dataset", "{unlabelled}", "--noise", "uniform"], "noise model 'uniform' needs true labels"),
    (["score", "--model", "models:/m/1", "--input", "{comma_bag}", "--output", "out.parquet"],
     "reads as labels separated by ','"),
]
CONTENTS = {
    "text_feature": "a,candidates\n1,x|y\nabc,y\n4,z\n",
    "empty_bag": "a,candidates\n1,x|y\n2,\n4,z\n",
    "no_candidates": "a,bag\n1,x\n2,y\n3,z\n",
    "comma_bag": 'a,candidates\n1,"x,y"\n2,y\n3,z\n',
    "comma_bag_labelled": 'a,candidates,label\n1,"x,y",x\n2,y,y\n3,z,z\n',
    "unlabelled": "a,candidates\n1,x|y\n2,y\n3,z\n",
}

# Each command in its own working folder, its file descriptors 1 and 2 sent to files of its own (whatever
# writes to them, Python or not), its exit status printed as a JSON line.
_COMMANDS_ONE_BY_ONE = """
import json, os, sys, time, traceback
from pll_pipeline.flows.cli import main

for case in json.loads(sys.argv[1]):
    os.chdir(case["cwd"])
    saved = os.dup(1), os.dup(2)
    with open(case["stdout"], "w") as out, open(case["stderr"], "w") as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        started = time.monotonic()
        try:
            code = main(case["argv"])
        except SystemExit as exit_:
            code = exit_.code
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
    print(json.dumps([code, time.monotonic() - started]), flush=True)
"""


def _pll_one_by_one(commands, outputs, env=None):
    """``pll argv`` for each ``(argv, working folder)`` of ``commands``, one after the other in one fresh process.

    As a user's shell runs one command after another, except that Python and the command line are imported
    once.  [(exit status, stdout, stderr)], each command's output kept in ``outputs`` (a folder).
    """
    cases = [{"argv": argv, "cwd": str(cwd), "stdout": str(outputs / f"{i}.stdout"), "stderr": str(outputs / f"{i}.stderr")}
             for i, (argv, cwd) in enumerate(commands)]
    out = _python("-c", _COMMANDS_ONE_BY_ONE, json.dumps(cases), cwd=outputs, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    codes = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(codes) == len(cases), out.stdout
    for (_, seconds), case in zip(codes, cases):  # how long each command took to answer, imports aside
        print(f"{seconds:6.2f} s  pll {' '.join(case['argv'])}")
    return [(code, Path(case["stdout"]).read_text(), Path(case["stderr"]).read_text())
            for (code, _), case in zip(codes, cases)]


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    """Each of :data:`BAD_INPUTS` in an empty folder of its own, all in one process: {index: (status, stderr, folder)}."""
    root = tmp_path_factory.mktemp("bad-input")
    grid = root / "grid.yaml"
    grid.write_text(BAD_GRID)
    csv = root / "rows.csv"
    csv.write_text("x1,x2\n0.5,1.0\n")
    places = {"{server}": f"http://127.0.0.1:{free_port()}", "{grid}": str(grid), "{csv}": str(csv)}
    for name, text in CONTENTS.items():
        (root / f"{name}.csv").write_text(text)
        places[f"{{{name}}}"] = str(root / f"{name}.csv")
    commands = []
    for i, (argv, _) in enumerate(BAD_INPUTS):
        work = root / f"work-{i}"
        work.mkdir()
        commands.append(([places.get(a, a) for a in argv], work))
    outputs = root / "outputs"
    outputs.mkdir()
    home = root / "prefect-home"
    done = _pll_one_by_one(commands, outputs,
                           env={"PREFECT_HOME": str(home), "PREFECT_API_URL": "", "MLFLOW_TRACKING_URI": ""})
    return home, {i: (code, stderr, work) for i, ((code, _, stderr), (_, work)) in enumerate(zip(done, commands))}


@pytest.mark.parametrize("case", range(len(BAD_INPUTS)), ids=[" ".join(argv) for argv, _ in BAD_INPUTS])
def test_bad_input_is_one_line_before_any_server_or_store_starts(case, refused):
    """Refused by the pre-flight check: one line, exit 2, no Prefect server started, nothing written anywhere."""
    home, results = refused
    status, stderr, work = results[case]
    assert status == 2, stderr
    assert stderr.splitlines() == [stderr.strip()] and stderr.startswith("pll: error: "), stderr
    assert BAD_INPUTS[case][1] in stderr
    assert list(work.iterdir()) == []  # no mlflow.db, no mlartifacts, no cache
    assert not (home / "temporary-server.log").exists()  # the server never started
    assert not Path("/pll-no-such-dir").exists()


def test_a_stage_that_fails_on_its_input_is_reported_once(tmp_path):
    """Not as the task's failure, the flow's failure and the command's error: once, without a traceback."""
    out = _pll("run", "--dataset", "iris", "--methods", "pl_knn,dst_pll", "--method-params",
               '{"pl_knn": {"n_neighbors": 500}}', cwd=tmp_path)
    assert out.returncode == 2
    text = out.stdout + out.stderr
    # The first search is the hold-out split's, over iris's 96 fitting rows (of 120 training rows).
    assert text.count("k=500 exceeds the 96 training rows") == 1, text
    assert "pll: error: k=500 exceeds the 96 training rows" in out.stderr
    assert "Traceback" not in text and "NotReady" not in text


def test_a_mat_file_with_other_variable_names_runs_when_they_are_named(tmp_path):
    import numpy as np
    import scipy.io

    from pll import load_dataset, noise

    iris = load_dataset("iris")
    S = noise.class_dependent(iris.y, n_classes=3, random_state=0)
    path = tmp_path / "renamed.mat"
    scipy.io.savemat(path, {"features": iris.X, "p_labels": S.T.astype(float), "logitlabels": np.eye(3)[iris.y].T})

    outputs = tmp_path / "outputs"
    outputs.mkdir()
    run = ["run", "--dataset", str(path), "--methods", "pl_knn"]
    refused, out = _pll_one_by_one(
        [(run, tmp_path), ([*run, "--mat-variables", "features=features,partial_labels=p_labels,labels=logitlabels"],
                           tmp_path)], outputs)
    status, _, stderr = refused
    assert status == 2 and "Traceback" not in stderr
    (line,) = [line for line in stderr.splitlines() if line.startswith("pll: error: ")]
    assert "--mat-variables" in line and "p_labels" in line and "logitlabels" in line

    status, stdout, stderr = out
    assert status == 0, stderr
    assert "counts as correct when it is the row's true label" in stdout and "| pl_knn" in stdout


@pytest.mark.parametrize("argv", [["serve"], ["run", "--methods", "pl_knn"]])
def test_a_prefect_server_that_does_not_answer_is_one_line(argv, tmp_path):
    url = f"http://127.0.0.1:{free_port()}/api"
    out = _pll(*argv, cwd=tmp_path, env={"PREFECT_API_URL": url, "MLFLOW_TRACKING_URI": ""})
    assert out.returncode == 2
    # pll serve's deployments must outlive it: its hint, unlike a run's, offers no temporary server
    way_out = ("; pll serve needs a server that outlives it, so a temporary one will not do" if argv == ["serve"]
               else " or unset PREFECT_API_URL to let pll start a temporary one")
    assert out.stderr.splitlines() == [f"pll: error: the Prefect server PREFECT_API_URL={url} cannot be reached: "
                                       f"[Errno 111] Connection refused; start it (prefect server start){way_out}"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("env, timeout", [(None, 180), ("7", 7)])
def test_the_temporary_server_gets_a_generous_start_up_timeout_unless_the_user_sets_one(env, timeout, monkeypatch,
                                                                                         tmp_path):
    """Prefect's own 20 s is missed on a loaded machine, so pll waits 180 s; a limit the user set wins.

    Prefect's server is replaced by one that records the timeout it is started with and does not start,
    so the test starts no process.
    """
    from prefect.context import SettingsContext, get_settings_context
    from prefect.settings import Settings

    from pll_pipeline.flows import server

    name = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    if env is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, env)
    started = []

    class Unstartable:
        def start(self, timeout):
            started.append(timeout)
            raise RuntimeError("did not start")

        def stop(self):
            pass

    monkeypatch.setattr(server, "_tied_server", Unstartable)
    # The settings a pll process started with this environment reads (Prefect's are read once, at import).
    with SettingsContext(profile=get_settings_context().profile, settings=Settings()):
        assert server.startup_timeout() == timeout
        with pytest.raises(server.TemporaryServerError, match=f"did not start within {timeout} s"):
            with server.temporary_server():
                pass
    assert started == [timeout]


@pytest.mark.parametrize("command", ["run", "train", "benchmark", "score"])
def test_help_of_commands_that_start_a_server_says_how_to_wait_longer_or_use_a_running_one(command, monkeypatch):
    from pll_pipeline.flows.cli import build_parser

    monkeypatch.setenv("COLUMNS", "200")  # argparse wraps to the terminal and may split a long name on a narrow one
    (commands,) = [a for a in build_parser()._actions if a.dest == "command"]
    text = " ".join(commands.choices[command].format_help().split())
    assert "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS" in text
    assert "PREFECT_API_URL" in text


@pytest.mark.parametrize("command, flow", [("run", "pll_pipeline.flows.pipeline:pipeline"), ("train", "pll_pipeline.flows.train:train"),
                                           ("audit", "pll_pipeline.flows.audit:audit")])
def test_preset_fills_in_the_noise_parameters_the_command_line_leaves_out(command, flow, tmp_path, monkeypatch):
    """The flow applies the preset (a deployment gets it too), in the checks the command line runs first."""
    import importlib
    import inspect

    from pll_pipeline.flows.checks import COMMANDS as CHECKS
    from pll_pipeline.flows.cli import build_parser, preflight

    module, name = flow.split(":")
    assert "preset" in inspect.signature(getattr(importlib.import_module(module), name).fn).parameters
    monkeypatch.chdir(tmp_path)

    def settled(*argv):
        args = build_parser().parse_args([command, *argv])
        preflight(args)  # refuses nothing here, and leaves the preset to the flow
        return CHECKS[command](vars(args))["noise_params"]

    assert settled("--noise", "uniform", "--noise-params", '{"p": 0.3}', "--preset", "authors_code") == {"p": 0.3, "r": 2}
    assert settled("--noise", "instance_dependent", "--preset", "authors_code") == {"classifier": "authors_sgd"}
    assert settled("--noise", "auto", "--preset", "paper_text") is None  # auto is no model a preset could fill in

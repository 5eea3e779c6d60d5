"""The project as a user installs it: a wheel built from the source tree, in a fresh virtual environment,
used from a folder outside the repository.

The fresh environment gets its dependencies from this one's site-packages (a ``.pth`` line), so that the
test needs no download; the project itself comes from the wheel alone (``pip install --no-deps``).
"""

import os
import shutil
import signal
import site
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOT_SOURCE = shutil.ignore_patterns(".venv*", ".git", "mlruns", "mlartifacts", "*.db", ".pll-cache", "site", "build",
                                    "*.egg-info", "__pycache__", ".hypothesis", ".pytest_cache", "dist")
GENERIC = {"flows", "tasks", "tracking", "cache", "deployments", "tests", "benchmarks", "docs"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel of the source tree, built in a copy of it (nothing is written into the checkout)."""
    tmp = tmp_path_factory.mktemp("wheel")
    shutil.copytree(ROOT, tmp / "src", ignore=NOT_SOURCE)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp / "dist"),
                    str(tmp / "src")], check=True, capture_output=True, timeout=600)
    (built,) = (tmp / "dist").glob("pll_reject-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A fresh virtual environment holding the wheel; its ``bin`` folder."""
    env = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=300)
    purelib = subprocess.run([str(env / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)],
                   check=True, capture_output=True, timeout=300)
    return env / "bin"


def test_the_wheel_installs_only_names_the_project_owns(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert top == {"pll", "pll_pipeline", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    assert not top & GENERIC
    layers = {name.split("/")[1] for name in names if name.startswith("pll_pipeline/")}
    assert {"flows", "tasks", "tracking", "cache", "deployments"} <= layers
    assert "pll_pipeline/deployments/prefect.yaml" in names
    # every package of the checkout is in the wheel: none forgotten in pyproject.toml's list
    for init in (ROOT / "pll").rglob("__init__.py"):
        assert init.relative_to(ROOT).as_posix() in names
    for layer in ("flows", "tasks", "tracking", "cache"):
        for module in (ROOT / layer).glob("*.py"):
            assert f"pll_pipeline/{layer}/{module.name}" in names


def _run(bin_dir, *argv, cwd, timeout=600, **env):
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    environment.update(env)
    return subprocess.run([str(bin_dir / argv[0]), *argv[1:]], cwd=cwd, env=environment, capture_output=True,
                          text=True, timeout=timeout)


def test_the_installed_package_is_the_wheels_not_the_checkouts(venv, tmp_path):
    out = _run(venv, "python", "-c", "import pll, pll_pipeline.flows.cli as cli; print(pll.__file__); print(cli.__file__)",
               cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    for line in out.stdout.split():
        assert str(ROOT) not in line and "site-packages" in line


def test_run_train_and_score_from_the_wheel(venv, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run = _run(venv, "pll", "run", "--dataset", "iris", "--methods", "pl_knn", "--tracking-uri", uri, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "| pl_knn" in run.stdout
    train = _run(venv, "pll", "train", "--dataset", "iris", "--method", "pl_knn", "--tracking-uri", uri, cwd=tmp_path)
    assert train.returncode == 0, train.stderr[-3000:]
    model = train.stdout.strip().splitlines()[-1]
    assert model.startswith("models:/")
    table = tmp_path / "new.csv"
    table.write_text("x0,x1,x2,x3\n5.1,3.5,1.4,0.2\n6.7,3.0,5.2,2.3\n")
    score = _run(venv, "pll", "score", "--model", model, "--input", str(table), "--output", str(tmp_path / "scored.parquet"),
                 "--tracking-uri", uri, cwd=tmp_path)
    assert score.returncode == 0, score.stderr[-3000:]
    assert "Scored 2 rows" in score.stdout and (tmp_path / "scored.parquet").is_file()


def test_serve_finds_its_deployments_file_in_the_wheel(venv, tmp_path):
    """The packaged deployments file loads and every entrypoint imports from the installed package."""
    script = ("from pll_pipeline.flows.serve import DEPLOYMENTS_FILE, load_deployment_specs, to_runner_deployments\n"
              "specs = load_deployment_specs()\n"
              "deployments = to_runner_deployments(specs)\n"
              "print(DEPLOYMENTS_FILE)\n"
              "print(sorted(d.name for d in deployments))\n")
    out = _run(venv, "python", "-c", script, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    path, names = out.stdout.strip().splitlines()
    assert "site-packages/pll_pipeline/deployments/prefect.yaml" in path
    assert "pipeline-served" in names and "score-incoming-served" in names
    refused = _run(venv, "pll", "serve", cwd=tmp_path, PREFECT_API_URL="")
    assert refused.returncode == 2 and "PREFECT_API_URL" in refused.stderr


def test_ui_from_the_wheel_serves_the_store(venv, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.Popen([str(venv / "pll"), "ui", "--tracking-uri", uri], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline, lines = time.monotonic() + 240, []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("Serving on"):
                break
        assert any(line.startswith("Serving on http://127.0.0.1:") for line in lines), "".join(lines) + proc.stderr.read()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    assert proc.returncode == 0


def test_the_pipeline_without_its_extra_fails_in_one_line_naming_it():
    """Without Prefect and MLflow (no site-packages at all here) the pipeline's import names the extra to install."""
    out = subprocess.run([sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
                          "import pll_pipeline.flows.cli"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("pll.errors.MissingExtraError: pll_pipeline needs the 'pipeline' extra: "
                           "pip install 'pll-reject[pipeline]' (missing: prefect"), last

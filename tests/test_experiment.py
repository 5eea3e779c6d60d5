"""The run protocol in the library alone reproduces what the pipeline logs."""

import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

import pll
from pll.errors import InvalidParameterError
from pll.experiment import run_protocol
from pll.methods import METHODS

ROOT = Path(__file__).resolve().parents[1]
TIMINGS = ("build_seconds", "query_seconds")  # how long a search took: the one thing two runs do not share


def same_value(a, b):
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.mark.slow
def test_library_run_gives_exactly_the_metrics_and_predictions_the_pipeline_logged(
    prefect_harness, tracking_uri, tmp_path
):
    from flows.pipeline import pipeline

    options = {"seed": 3, "methods": sorted(METHODS), "val_fraction": 0.25,
               "noise": "uniform", "noise_params": {"p": 0.6, "r": 2}}
    logged_run = pipeline(dataset="wine", tracking_uri=tracking_uri, experiment="protocol", **options)
    result = run_protocol(pll.load_dataset("wine"), **options)

    client = MlflowClient(tracking_uri)
    run = client.get_run(logged_run["run_id"])
    logged = run.data.metrics
    assert set(logged) == set(result.metrics)
    assert {name.split(".")[0] for name in logged} == {"knn", *METHODS}
    compared = {name: value for name, value in result.metrics.items() if not name.endswith(TIMINGS)}
    assert len(compared) > 50 * len(METHODS)
    different = {name: (logged[name], value) for name, value in compared.items() if not same_value(logged[name], value)}
    assert not different
    assert run.data.params["truth"] == result.evaluation.truth

    frames = result.prediction_frames()
    assert len(frames) == 2 * len(METHODS)
    for path, frame in frames.items():
        pd.testing.assert_frame_equal(pd.read_parquet(client.download_artifacts(run.info.run_id, path, str(tmp_path))),
                                      frame, check_exact=True)


def test_each_method_and_reject_option_is_evaluated_on_its_own():
    result = run_protocol(pll.load_dataset("iris"), seed=1, methods=["dst_pll", "pl_knn"], knn_backend="exact")
    evaluated = [(o.method, o.option) for o in result.evaluation.options]
    assert sorted(evaluated) == [("dst_pll", "native"), ("dst_pll", "trust"), ("pl_knn", "native"), ("pl_knn", "trust")]
    for o in result.evaluation.options:
        assert {f"{o.method}.{o.option}.{name}": v for name, v in o.metrics.items()}.items() <= result.metrics.items()
        assert o.sweep["accepted"].iat[0] == result.rows.test.size
    assert set(result.neighbors) == {"minmax"}  # the two methods share one neighbor computation


def test_a_bad_parameter_is_refused_before_anything_is_computed():
    with pytest.raises(InvalidParameterError, match="features of 'pl_knn': unknown feature pipeline 'nosuch'"):
        run_protocol(pll.load_dataset("iris"), methods=["pl_knn"], method_features={"pl_knn": "nosuch"})


def test_the_protocol_runs_without_prefect_or_mlflow():
    code = (
        "import sys, pll\n"
        "from pll.experiment import run_protocol\n"
        "r = run_protocol(pll.load_dataset('iris'), methods=['pl_knn'])\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'prefect', 'mlflow', 'tasks', 'flows'}))\n"
        "print(r.metrics['pl_knn.native.accuracy'] > 0.9)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "True"]

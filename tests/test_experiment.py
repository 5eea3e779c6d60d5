"""The run protocol in the library alone reproduces what the pipeline logs."""

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
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
    assert sorted(evaluated) == [(m, o) for m in ("dst_pll", "pl_knn") for o in ("conformal", "native", "trust")]
    for o in result.evaluation.options:
        assert {f"{o.method}.{o.option}.{name}": v for name, v in o.metrics.items()}.items() <= result.metrics.items()
        assert o.sweep["accepted"].iat[0] == result.rows.test.size
    assert set(result.neighbors) == {"minmax"}  # the two methods share one neighbor computation


def test_conformal_sets_come_from_a_model_that_never_saw_its_calibration_rows():
    ds = pll.load_dataset("wine")
    result = run_protocol(ds, seed=2, methods=["pl_knn"], noise="uniform", noise_params={"p": 0.5, "r": 1},
                          conformal_alpha=0.2)
    out = next(o for o in result.outputs if o.option == "conformal")
    rows, data = result.rows, result.data
    split = pll.features.featurize(data, rows.train, rows.test, "minmax")
    fit, val = rows.train[rows.fit], rows.train[rows.val]
    holdout = pll.PlKnn(random_state=2).fit(split.X_train[rows.fit], data.S[fit])
    sets = pll.ConformalSets(holdout, alpha=0.2).fit(split.X_train[rows.val], data.S[val])
    np.testing.assert_array_equal(out.test.sets, sets.predict_sets(split.X_test))
    np.testing.assert_array_equal(out.val.sets, sets.predict_sets(split.X_train[rows.val]))
    metrics = result.metrics
    assert metrics["pl_knn.conformal.coverage"] == out.test.sets[np.arange(rows.test.size), data.y[rows.test]].mean()
    assert metrics["pl_knn.conformal.mean_set_size"] == out.test.sets.sum(axis=1).mean()
    frame = result.prediction_frames()["predictions/pl_knn.parquet"]
    assert (frame["conformal_set_size"] == out.test.sets.sum(axis=1)).all()
    assert frame["conformal_set"].iat[0] == "|".join(ds.classes[out.test.sets[0]])
    without = run_protocol(ds, seed=2, methods=["pl_knn"], conformal_alpha=None)
    assert {o.option for o in without.outputs} == {"native", "trust"}
    with pytest.raises(InvalidParameterError, match="conformal_alpha"):
        run_protocol(ds, methods=["pl_knn"], conformal_alpha=1.5)


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

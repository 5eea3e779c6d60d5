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

ROOT = Path(__file__).resolve().parents[2]

def same_value(a, b):
    return a == b or (math.isnan(a) and math.isnan(b))


def test_library_run_gives_exactly_the_metrics_and_predictions_the_pipeline_logged(
    prefect_harness, tracking_uri, tmp_path
):
    from pll_pipeline.flows.pipeline import pipeline

    options = {"seed": 3, "methods": sorted(METHODS), "val_fraction": 0.25,
               "noise": "uniform", "noise_params": {"p": 0.6, "r": 2}}
    logged_run = pipeline(dataset="wine", tracking_uri=tracking_uri, experiment="protocol", **options)
    result = run_protocol(pll.load_dataset("wine"), **options)

    client = MlflowClient(tracking_uri)
    parent = client.get_run(logged_run["run_id"])
    assert set(parent.data.metrics) == set(result.neighbor_metrics)  # the searches, shared by the method runs
    assert parent.data.params["truth"] == result.evaluation.truth
    frames = result.prediction_frames()
    assert set(logged_run["method_run_ids"]) == set(result.metrics) == set(frames) == set(METHODS)
    for name, run_id in logged_run["method_run_ids"].items():
        run = client.get_run(run_id)
        logged = run.data.metrics
        series = {k for k in logged if k.endswith((".risk_by_lambda", ".risk_by_coverage"))}
        assert set(logged) - series == set(result.metrics[name]) and len(series) == 2 * 3
        assert len(logged) > 50
        different = {k: (logged[k], v) for k, v in result.metrics[name].items() if not same_value(logged[k], v)}
        assert not different
        assert run.data.params["method"] == name and run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        for part, frame in frames[name].items():
            path = client.download_artifacts(run_id, f"predictions/{part}.parquet", str(tmp_path / name))
            pd.testing.assert_frame_equal(pd.read_parquet(path), frame, check_exact=True)


def test_each_method_and_reject_option_is_evaluated_on_its_own():
    result = run_protocol(pll.load_dataset("iris"), seed=1, methods=["dst_pll", "pl_knn"], knn="exact")
    evaluated = [(o.name, o.option) for o in result.evaluation.options]
    assert sorted(evaluated) == [(m, o) for m in ("dst_pll", "pl_knn") for o in ("conformal", "native", "trust")]
    for o in result.evaluation.options:
        logged = result.metrics[o.name]
        for name, value in o.metrics.items():
            if name in ("accuracy", "mcc") and o.option != "conformal":  # the method's own labels: once, unprefixed
                assert logged[name] == value
            else:
                assert logged[f"{o.option}.{name}"] == value
        assert o.sweep["accepted"].iat[0] == result.rows.test.size
    assert set(result.metrics["dst_pll"]) == set(result.metrics["pl_knn"])  # one set of names for every method
    assert set(result.neighbors) == {"minmax"}  # the two methods share one neighbor computation


def test_conformal_sets_come_from_a_model_that_never_saw_its_calibration_rows():
    ds = pll.load_dataset("wine")
    result = run_protocol(ds, seed=2, methods=["pl_knn"], noise="uniform", noise_params={"p": 0.5, "r": 1},
                          conformal_alpha=0.2)
    out = next(o for o in result.outputs if o.option == "conformal")
    rows, data = result.rows, result.data
    fit, val = rows.train[rows.fit], rows.train[rows.val]
    # Features and model fitted on the fitting rows alone; validation and test rows are new rows to both.
    scaler = pll.preprocessing.make_features("minmax").fit(data.X[fit])
    holdout = pll.PlKnn(random_state=2).fit(scaler.transform(data.X[fit]), data.S[fit])
    sets = pll.ConformalSets(holdout, alpha=0.2).fit(scaler.transform(data.X[val]), data.S[val])
    np.testing.assert_array_equal(out.test.sets, sets.predict_sets(scaler.transform(data.X[rows.test])))
    np.testing.assert_array_equal(out.val.sets, sets.predict_sets(scaler.transform(data.X[val])))
    metrics = result.metrics["pl_knn"]
    assert metrics["conformal.coverage"] == out.test.sets[np.arange(rows.test.size), data.y[rows.test]].mean()
    assert metrics["conformal.mean_set_size"] == out.test.sets.sum(axis=1).mean()
    frame = result.prediction_frames()["pl_knn"]["test"]
    assert (frame["conformal_set_size"] == out.test.sets.sum(axis=1)).all()
    assert frame["conformal_set"].iat[0] == "|".join(ds.classes[out.test.sets[0]])
    without = run_protocol(ds, seed=2, methods=["pl_knn"], conformal_alpha=None)
    assert {o.option for o in without.outputs} == {"native", "trust"}
    with pytest.raises(InvalidParameterError, match="conformal_alpha"):
        run_protocol(ds, methods=["pl_knn"], conformal_alpha=1.5)


def test_each_method_run_fits_its_hold_out_model_once_for_its_own_and_its_conformal_calibration(monkeypatch):
    """A strong learner's hold-out fit costs as much as its main fit: the native and conformal options share it."""
    from pll.experiment import CalibrationSplit

    fitted = []
    real_fit = CalibrationSplit.fit_holdout

    def counted(self, run, seed):
        fitted.append(run.method)
        return real_fit(self, run, seed)

    monkeypatch.setattr(CalibrationSplit, "fit_holdout", counted)
    result = run_protocol(pll.load_dataset("wine"), seed=1, methods=["pl_knn", "pl_classifier"], knn="exact",
                          method_params={"pl_classifier": {"n_folds": 2, "max_rounds": 1}})
    assert sorted(fitted) == ["pl_classifier", "pl_knn"]
    assert sorted((o.method, o.option) for o in result.outputs if o.option != "trust") == [
        ("pl_classifier", "conformal"), ("pl_classifier", "native"), ("pl_knn", "conformal"), ("pl_knn", "native")]


def test_thresholds_are_also_chosen_from_bags_and_alone_so_without_true_labels():
    noisy = pll.noise.apply_noise(pll.load_dataset("wine"), "uniform", {"p": 0.5, "r": 1}, random_state=4)
    labelled = run_protocol(noisy, seed=4, methods=["pl_knn"], noise="none", conformal_alpha=None)
    lambdas = (0.0, 0.05, 0.1, 0.15, 0.2)
    val_rows = labelled.rows.train[labelled.rows.val]
    for out in labelled.outputs:
        metrics = {k.split(".", 1)[1]: v for k, v in labelled.metrics["pl_knn"].items() if k.startswith(f"{out.option}.")}
        for lam in lambdas:
            # The bag bounds at the chosen threshold hold the validation rows' true R_λ.
            accept = out.val.score > metrics[f"bag_cal_threshold_{lam:.2f}"]
            true = pll.evaluation.reject_report(noisy.y[val_rows], out.val.labels, accept, (lam,))[f"risk_{lam:.2f}"]
            assert metrics[f"bag_val_risk_lower_{lam:.2f}"] - 1e-12 <= true <= metrics[f"bag_val_risk_upper_{lam:.2f}"] + 1e-12
            assert metrics[f"bag_val_risk_upper_{lam:.2f}"] <= lam + 1e-12  # never worse than rejecting all
    unlabelled = pll.PartialLabelDataset(noisy.X, noisy.S, None, noisy.classes, "unlabelled")
    blind = run_protocol(unlabelled, seed=4, methods=["pl_knn"], noise="none", conformal_alpha=None)
    blind_metrics, labelled_metrics = blind.metrics["pl_knn"], labelled.metrics["pl_knn"]
    compared = [name for name in blind_metrics if ".cal_" in name]
    assert len(compared) == 2 * 3 * len(lambdas)
    for name in compared:  # without true labels the calibrated thresholds are the bags' choice
        assert blind_metrics[name] == blind_metrics[name.replace(".cal_", ".bag_cal_")]
        if "threshold" in name:  # which needs no labels, so it is the labelled run's too
            assert blind_metrics[name] == labelled_metrics[name.replace(".cal_", ".bag_cal_")]


def test_a_bad_parameter_is_refused_before_anything_is_computed():
    with pytest.raises(InvalidParameterError, match="features of 'pl_knn': unknown feature pipeline 'nosuch'"):
        run_protocol(pll.load_dataset("iris"), methods=["pl_knn"], method_features={"pl_knn": "nosuch"})


def test_the_protocol_runs_without_prefect_or_mlflow():
    code = (
        "import sys, pll\n"
        "from pll.experiment import run_protocol\n"
        "r = run_protocol(pll.load_dataset('iris'), methods=['pl_knn'])\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'prefect', 'mlflow', 'tasks', 'flows'}))\n"
        "print(r.metrics['pl_knn']['accuracy'] > 0.9)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "True"]


def test_a_run_on_repeated_binary_rows_finds_the_exact_neighbors(tmp_path):
    """Bag-of-words-like data, where hundreds of rows tie: the default run, its neighbors equal to brute force."""
    from pll.data.synthetic import make_repeated_rows_table
    from tests.oracles import nearest

    path = tmp_path / "repeated.parquet"
    make_repeated_rows_table(2500, n_features=60, n_classes=8, n_prototypes=40, random_state=1).to_parquet(path)
    ds = pll.load_dataset(str(path))
    result = run_protocol(ds, seed=0)
    X = ds.X.astype(np.float64)
    lo, hi = X[result.rows.train].min(axis=0), X[result.rows.train].max(axis=0)
    scaled = (X - lo) / np.where(hi > lo, hi - lo, 1.0)  # minmax, as the run's default features
    nb = result.neighbors["minmax"]
    np.testing.assert_array_equal(nb.test.indices, nearest(scaled[result.rows.train], scaled[result.rows.test],
                                                           nb.test.k)[0])
    for name, metrics in result.metrics.items():
        assert metrics["accuracy"] > 0.5, name  # eight classes: chance is 1/8

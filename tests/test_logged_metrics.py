"""What a run logs can be recomputed from what it logs: metrics from the predictions artifacts."""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from pll.bag_bounds import calibrate_thresholds_from_bags
from pll.conformal import set_report
from pll.data import PartialLabelDataset, load_dataset
from pll.errors import InvalidDataError
from pll.evaluation import (
    aurc,
    calibrate_thresholds,
    calibrated_metrics,
    partial_label_report,
    reject_report,
    threshold_sweep,
)
from pll.experiment import MethodOutput, evaluate, make_split, prediction_frames
from pll.experiment.evaluation import bag_calibrated_metrics
from pll.methods import METHODS, RejectPrediction
from pll.noise import apply_noise

PER_CLASS_PREFIXES = ("belief", "plausibility", "share")


def option_columns(frame, option, base_option):
    """Labels, accept and score of one reject option in a predictions table."""
    prefix = "" if option == base_option else f"{option}_"
    labels = frame[f"{option}_label"] if f"{option}_label" in frame else frame["label"]
    return labels.to_numpy(), frame[f"{prefix}accept"].to_numpy(), frame[f"{prefix}score"].to_numpy()


def recompute(test, val, option, base_option, classes, val_bags):
    """Every metric of one (method, option), from its test and validation predictions tables (and the validation bags)."""
    labels, accept, score = option_columns(test, option, base_option)
    y = test["y_true"].to_numpy()
    report = reject_report(y, labels, accept, n_classes=len(classes))
    correct = labels == y
    report["aurc"] = aurc(threshold_sweep(score, correct))
    val_labels, _, val_score = option_columns(val, option, base_option)
    calibration = calibrate_thresholds(val_score, val_labels == val["y_true"].to_numpy())
    report.update(calibrated_metrics(calibration, score, correct))
    bag_calibration = calibrate_thresholds_from_bags(val_score, val_labels, val_bags)
    report.update(bag_calibrated_metrics(bag_calibration, score, correct))
    if f"{option}_set" in test:
        names = test[f"{option}_set"].str.split("|")
        sets = np.array([[c in row for c in classes] for row in names])
        assert (sets.sum(axis=1) == test[f"{option}_set_size"]).all()
        report.update(set_report(sets, y))
    return report


@pytest.mark.slow
def test_logged_metrics_equal_those_recomputed_from_logged_predictions(prefect_harness, tracking_uri, tmp_path):
    from flows.pipeline import pipeline

    methods = sorted(METHODS)
    result = pipeline(dataset="digits", seed=0, methods=methods, tracking_uri=tracking_uri, experiment="logged")
    client = MlflowClient(tracking_uri)
    run = client.get_run(result["run_id"])
    root = Path(client.download_artifacts(run.info.run_id, "", str(tmp_path)))
    # Other stages log their own metrics (e.g. the neighbor search); these are the methods'.
    logged = {k: v for k, v in run.data.metrics.items() if k.split(".", 1)[0] in methods}
    summary = pd.read_json(root / "dataset_summary.json", typ="series")
    classes = [str(c) for c in summary["class_names"]]

    options = {}
    for name in logged:
        method, option, _ = name.split(".", 2)
        options.setdefault(method, set()).add(option)
    assert set(options) == set(methods) and len(logged) > 30 * len(methods)

    recomputed = {}
    bags = apply_noise(load_dataset("digits"), "auto", None, 0).S  # the run's bags: digits, noise auto, seed 0
    for method, opts in options.items():
        base = "native" if "native" in opts else min(opts)
        test = pd.read_parquet(root / "predictions" / f"{method}.parquet")
        val = pd.read_parquet(root / "predictions" / f"{method}.val.parquet")
        assert len(test) == 360 and test["row"].is_unique and val["row"].is_unique
        assert not set(test["row"]) & set(val["row"])  # the hold-out never sees test rows
        for option in opts:
            for key, value in recompute(test, val, option, base, classes, bags[val["row"].to_numpy()]).items():
                recomputed[f"{method}.{option}.{key}"] = value
            if option != base:
                assert f"{option}_score" in test and f"{option}_accept" in test
        check_per_class_columns(test, classes)
        expected_prefixes = {"dst_pll": ("belief", "plausibility"), "pl_knn": ("share",)}.get(method, ())
        assert all(f"{prefix}_{classes[0]}" in test for prefix in expected_prefixes)
    assert set(recomputed) == set(logged)
    for name, value in recomputed.items():
        assert logged[name] == pytest.approx(value, rel=1e-12, abs=1e-15), name
    # Names sort by method, then reject option; λ with two decimals.
    assert all(re.fullmatch(r"[a-z_]+\.[a-z_]+\.([a-z_]+(_\d\.\d\d)?|coverage_\d+)", name) for name in logged)
    check_curves_figures_and_report(root, logged, options)


def check_per_class_columns(frame, classes):
    """``belief_<class>``, ``plausibility_<class>``, ``share_<class>``: all classes or none."""
    for prefix in PER_CLASS_PREFIXES:
        present = [c for c in frame.columns if c.startswith(prefix + "_")]
        if present:
            assert present == [f"{prefix}_{c}" for c in classes]


def check_curves_figures_and_report(root, logged, options):
    for method, opts in options.items():
        for option in opts:
            sweep = pd.read_csv(root / "curves" / f"{method}.{option}.sweep.csv")
            assert sweep["accepted"].iat[0] == 360 and sweep["accepted"].iat[-1] == 0
            assert logged[f"{method}.{option}.aurc"] == pytest.approx(aurc(sweep), rel=1e-12)
            # The option's own rule is one of the sweep's operating points (accept = score > threshold).
            own = (logged[f"{method}.{option}.rejection_rate"], logged[f"{method}.{option}.covered_accuracy"])
            gaps = np.hypot(sweep["rejection_rate"] - own[0], sweep["covered_accuracy"] - own[1])
            assert gaps.min() < 1e-12, (method, option)
            precision = pd.read_csv(root / "curves" / f"{method}.{option}.precision.csv")
            assert precision["percentile"].tolist() == list(range(101))
            calibration = pd.read_csv(root / "curves" / f"{method}.{option}.calibration.csv")
            thresholds = [logged[f"{method}.{option}.cal_threshold_{lam:.2f}"] for lam in calibration["lambda"]]
            np.testing.assert_array_equal(calibration["threshold"], thresholds)
    for name in ("tradeoff", "risk", "precision"):
        assert (root / "figures" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (root / "report.md").read_text()
    for link in ("figures/tradeoff.png", "figures/risk.png", "figures/precision.png"):
        assert f"]({link})" in report and (root / link).is_file()
    assert all(f"| {method} " in report for method in options) and "cal_risk" in report


# -------------------------------------------- the evaluation stage without true labels


def toy_run(n=60, n_classes=3, seed=0):
    rng = np.random.default_rng(seed)
    S = rng.random((n, n_classes)) < 0.5
    S[rng.random(n) < 0.15] = False  # some rows without a bag
    ds = PartialLabelDataset(
        rng.random((n, 2)), S, None, np.array(["a", "b", "c"]), "no-truth", allow_empty_bags=True
    )
    rows = make_split(n, seed, val_fraction=0.3)

    def prediction(m):
        score = rng.integers(0, 5, m) / 4.0
        return RejectPrediction(rng.integers(0, n_classes, m), score > 0.5, score, np.zeros(m, bool))

    out = MethodOutput(
        "pl_knn", "minmax", prediction(rows.test.size), prediction(rows.train.size), prediction(rows.val.size)
    )
    return ds, rows, out


def test_without_true_labels_the_partial_label_loss_judges_rows_with_bags():
    ds, rows, out = toy_run()
    result = evaluate([out], ds, rows)
    keep = ds.S[rows.test].any(axis=1)
    assert 0 < keep.sum() < rows.test.size  # the toy data exercises the empty-bag case
    expected = partial_label_report(ds.S[rows.test][keep], out.test.labels[keep], out.test.accept[keep])
    val_rows = rows.train[rows.val]
    test_correct = ds.S[rows.test[keep], out.test.labels[keep]]
    # Without true labels the thresholds minimise the bags' upper bound of R_λ, not the partial-label loss.
    calibration = calibrate_thresholds_from_bags(out.val.score, out.val.labels, ds.S[val_rows])
    expected.update(calibrated_metrics(calibration, out.test.score[keep], test_correct))
    expected.update(bag_calibrated_metrics(calibration, out.test.score[keep], test_correct))
    expected["aurc"] = aurc(threshold_sweep(out.test.score[keep], test_correct))
    assert result.metrics == {f"pl_knn.native.{k}": v for k, v in expected.items()}
    assert "pl_knn.native.mcc" not in result.metrics
    assert result.truth.startswith("partial-label loss")
    assert result.sweeps[("pl_knn", "native")]["accepted"].iat[0] == keep.sum()


def test_evaluation_refuses_test_rows_that_have_no_bag_at_all():
    ds, rows, out = toy_run()
    S = ds.S.copy()
    S[rows.test] = False
    with pytest.raises(InvalidDataError, match="no test row has a candidate bag"):
        evaluate([out], ds.with_bags(S), rows)


def test_evaluation_refuses_two_outputs_for_the_same_reject_option():
    ds, rows, out = toy_run()
    with pytest.raises(InvalidDataError, match="two outputs"):
        evaluate([out, out], ds, rows)


def test_predictions_tables_put_other_reject_options_beside_the_native_one():
    ds, rows, out = toy_run()
    trust = MethodOutput(
        out.method,
        out.features,
        test=RejectPrediction(out.test.labels, ~out.test.accept, -out.test.score, out.test.guess),
        train=out.train,
        val=RejectPrediction(out.val.labels, out.val.accept, out.val.score + 1.0, out.val.guess),
        option="trust",
    )
    frames = prediction_frames([trust, out], ds, rows)
    assert set(frames) == {"predictions/pl_knn.parquet", "predictions/pl_knn.val.parquet"}
    test = frames["predictions/pl_knn.parquet"]
    np.testing.assert_array_equal(test["score"], out.test.score)  # native gives the base columns
    np.testing.assert_array_equal(test["trust_score"], -out.test.score)
    np.testing.assert_array_equal(test["trust_accept"], ~out.test.accept)
    assert "trust_label" not in test and (test["y_true"] == -1).all()
    np.testing.assert_array_equal(test["row"], rows.test)
    val = frames["predictions/pl_knn.val.parquet"]
    np.testing.assert_array_equal(val["row"], rows.train[rows.val])
    np.testing.assert_array_equal(val["trust_score"], out.val.score + 1.0)


@pytest.mark.slow
def test_a_run_on_data_without_true_labels_is_judged_by_the_bags(prefect_harness, tracking_uri, tmp_path):
    from flows.pipeline import pipeline
    from pll import load_dataset, noise

    digits = load_dataset("digits")
    S = noise.class_dependent(digits.y, n_classes=10, random_state=1)
    bags = ["|".join(str(c) for c in np.flatnonzero(row)) for row in S]
    path = tmp_path / "own-data.csv"
    pd.DataFrame(digits.X, columns=[f"f{j}" for j in range(64)]).assign(candidates=bags).to_csv(path, index=False)

    result = pipeline(dataset=str(path), seed=0, methods=["pl_knn"], tracking_uri=tracking_uri, experiment="no-truth")
    client = MlflowClient(tracking_uri)
    run = client.get_run(result["run_id"])
    assert run.data.tags["evaluated_against"].startswith("partial-label loss")
    assert run.data.params["truth"] == result["truth"] == run.data.tags["evaluated_against"]
    logged = run.data.metrics
    assert "pl_knn.native.mcc" not in logged
    test = pd.read_parquet(client.download_artifacts(run.info.run_id, "predictions/pl_knn.parquet", str(tmp_path)))
    assert (test["y_true"] == -1).all()
    expected = partial_label_report(S[test["row"]], test["label"], test["accept"].to_numpy())
    for key, value in expected.items():
        assert logged[f"pl_knn.native.{key}"] == pytest.approx(value, rel=1e-12, abs=1e-15), key


def test_every_reject_option_of_a_method_gets_its_own_metric_names():
    ds, rows, out = toy_run()
    rng = np.random.default_rng(5)
    y = rng.integers(0, 3, ds.n_rows)
    labelled = PartialLabelDataset(ds.X, ds.S | np.eye(3, dtype=bool)[y], y, ds.classes, "labelled")
    trust = MethodOutput(
        out.method, out.features, out.test, out.train,
        RejectPrediction(out.val.labels, out.val.accept, 1.0 - out.val.score, out.val.guess), option="trust",
    )
    result = evaluate([out, trust], labelled, rows)
    assert set(result.sweeps) == {("pl_knn", "native"), ("pl_knn", "trust")}
    native = {k.split(".", 2)[2] for k in result.metrics if k.startswith("pl_knn.native.")}
    assert {k.split(".", 2)[2] for k in result.metrics if k.startswith("pl_knn.trust.")} == native
    assert {"mcc", "aurc", "risk_0.10", "cal_risk_0.10", "cal_threshold_0.10"} <= native
    # Same test predictions, different validation scores: only the calibrated values may differ.
    for name in native - {n for n in native if n.startswith("cal_")}:
        assert result.metrics[f"pl_knn.trust.{name}"] == result.metrics[f"pl_knn.native.{name}"]
    assert result.truth == "true labels"

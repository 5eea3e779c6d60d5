"""What a run logs can be recomputed from what it logs: metrics from the predictions artifacts."""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from pll.evaluation.bag_bounds import calibrate_thresholds_from_bags
from pll.reject.conformal import set_report
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
from pll.experiment import MethodOutput, evaluate, make_split, prediction_frames, run_metrics
from pll.experiment._evaluate import bag_calibrated_metrics
from pll.methods import METHODS, RejectPrediction
from pll.noise import apply_noise
from pll.experiment.presets import SCRIPT_RULES, script_operating_point
from pll.methods.reasons import REASONS, reason_report

PER_CLASS_PREFIXES = ("belief", "plausibility", "share")


def option_columns(frame, option, base_option):
    """Labels, accept and score of one reject option in a predictions table."""
    prefix = "" if option == base_option else f"{option}_"
    labels = frame[f"{option}_label"] if f"{option}_label" in frame else frame["label"]
    return labels.to_numpy(), frame[f"{prefix}accept"].to_numpy(), frame[f"{prefix}score"].to_numpy()


def recompute(test, val, option, base_option, classes, val_bags, method):
    """Every metric of one (method, option), from its test and validation predictions tables (and the validation bags)."""
    labels, accept, score = option_columns(test, option, base_option)
    y = test["y_true"].to_numpy()
    report = reject_report(y, labels, accept, n_classes=len(classes))
    correct = labels == y
    if option == base_option:
        rule = SCRIPT_RULES[method]
        shares = test[[f"share_{c}" for c in classes]].to_numpy().max(axis=1) if rule.top_share else None
        report.update(script_operating_point(score if shares is None else shares, correct, rule))
    report["aurc"] = aurc(threshold_sweep(score, correct))
    val_labels, _, val_score = option_columns(val, option, base_option)
    calibration = calibrate_thresholds(val_score, val_labels == val["y_true"].to_numpy())
    report.update(calibrated_metrics(calibration, score, correct))
    bag_calibration = calibrate_thresholds_from_bags(val_score, val_labels, val_bags)
    report.update(bag_calibrated_metrics(bag_calibration, score, correct))
    reason = test["reason" if option == base_option else f"{option}_reason"].to_numpy()
    assert set(reason[accept]) <= {"none"} and "none" not in set(reason[~accept]) and set(reason) <= set(REASONS)
    report.update(reason_report(reason, correct))
    if f"{option}_set" in test:
        names = test[f"{option}_set"].str.split("|")
        sets = np.array([[c in row for c in classes] for row in names])
        assert (sets.sum(axis=1) == test[f"{option}_set_size"]).all()
        report.update(set_report(sets, y))
    return report


SERIES = (".risk_by_lambda", ".risk_by_coverage")


def test_logged_metrics_equal_those_recomputed_from_logged_predictions(prefect_harness, tracking_uri, tmp_path):
    from pll_pipeline.flows.pipeline import pipeline

    methods = sorted(METHODS)
    # stage_tasks: the per-stage path, which a run this small would otherwise not take.
    result = pipeline(dataset="digits", seed=0, methods=methods, tracking_uri=tracking_uri, experiment="logged",
                      stage_tasks=True)
    client = MlflowClient(tracking_uri)
    parent = Path(client.download_artifacts(result["run_id"], "", str(tmp_path / "parent")))
    summary = pd.read_json(parent / "dataset_summary.json", typ="series")
    classes = [str(c) for c in summary["class_names"]]
    bags = apply_noise(load_dataset("digits"), "auto", None, 0).S  # the run's bags: digits, noise auto, seed 0
    assert set(result["method_run_ids"]) == set(methods)
    keys = set()
    for method, run_id in result["method_run_ids"].items():
        run = client.get_run(run_id)
        root = Path(client.download_artifacts(run_id, "", str(tmp_path / method)))
        logged = {k: v for k, v in run.data.metrics.items() if not k.endswith(SERIES)}
        options = {k.split(".", 1)[0] for k in logged if "." in k}
        assert options == {"native", "trust", "conformal"}
        test = pd.read_parquet(root / "predictions" / "test.parquet")
        val = pd.read_parquet(root / "predictions" / "val.parquet")
        assert len(test) == 360 and test["row"].is_unique and val["row"].is_unique
        assert not set(test["row"]) & set(val["row"])  # the hold-out never sees test rows
        recomputed = {option: recompute(test, val, option, "native", classes, bags[val["row"].to_numpy()], method)
                      for option in options}
        for option in options - {"native"}:
            assert f"{option}_score" in test and f"{option}_accept" in test
        expected = run_metrics(recomputed)
        assert set(expected) == set(logged)
        for name, value in expected.items():
            assert logged[name] == pytest.approx(value, rel=1e-12, abs=1e-15), (method, name)
        check_per_class_columns(test, classes)
        expected_prefixes = {"dst_pll": ("belief", "plausibility"), "pl_knn": ("share",)}.get(method, ())
        assert all(f"{prefix}_{classes[0]}" in test for prefix in expected_prefixes)
        # λ with two decimals; the label metrics without a reject option.
        assert all(re.fullmatch(r"(accuracy|mcc|[a-z]+\.([a-z_]+(_\d\.\d\d)?|coverage_\d+))", k) for k in logged)
        check_curves_and_series(client, run_id, root, logged, options)
        keys.add(frozenset(logged))
    assert len(keys) == 1  # every method run logs the same metric names
    check_figures_and_report(parent, methods)


def check_per_class_columns(frame, classes):
    """``belief_<class>``, ``plausibility_<class>``, ``share_<class>``: all classes or none."""
    for prefix in PER_CLASS_PREFIXES:
        present = [c for c in frame.columns if c.startswith(prefix + "_")]
        if present:
            assert present == [f"{prefix}_{c}" for c in classes]


def check_curves_and_series(client, run_id, root, logged, options):
    """A method run's curves (CSV artifacts) agree with its metrics, and its metric series with both."""
    for option in options:
        sweep = pd.read_csv(root / "curves" / f"{option}.sweep.csv")
        assert sweep["accepted"].iat[0] == 360 and sweep["accepted"].iat[-1] == 0
        assert logged[f"{option}.aurc"] == pytest.approx(aurc(sweep), rel=1e-12)
        # The option's own rule is one of the sweep's operating points (accept = score > threshold).
        own = (logged[f"{option}.rejection_rate"], logged[f"{option}.covered_accuracy"])
        gaps = np.hypot(sweep["rejection_rate"] - own[0], sweep["covered_accuracy"] - own[1])
        assert gaps.min() < 1e-12, option
        precision = pd.read_csv(root / "curves" / f"{option}.precision.csv")
        assert precision["percentile"].tolist() == list(range(101))
        calibration = pd.read_csv(root / "curves" / f"{option}.calibration.csv")
        thresholds = [logged[f"{option}.cal_threshold_{lam:.2f}"] for lam in calibration["lambda"]]
        np.testing.assert_array_equal(calibration["threshold"], thresholds)
        by_lambda = client.get_metric_history(run_id, f"{option}.risk_by_lambda")
        assert [(m.step, m.value) for m in by_lambda] == [
            (round(100 * lam), logged[f"{option}.risk_{lam:.2f}"]) for lam in calibration["lambda"]]
        by_coverage = {m.step: m.value for m in client.get_metric_history(run_id, f"{option}.risk_by_coverage")}
        full = by_coverage[100]  # every row accepted: the error rate of all test rows
        assert full == pytest.approx(1.0 - sweep.loc[sweep["rejection_rate"] == 0, "covered_accuracy"].iat[0])
        assert all(step % 5 == 0 for step in by_coverage)


def check_figures_and_report(root, methods):
    for name in ("tradeoff", "risk", "precision"):
        assert (root / "figures" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (root / "report.md").read_text()
    for link in ("figures/tradeoff.png", "figures/risk.png", "figures/precision.png"):
        assert f"]({link})" in report and (root / link).is_file()
    assert all(f"| {method} " in report for method in methods) and "cal_risk" in report


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
        "pl_knn", "minmax", prediction(rows.test.size), prediction(rows.train.size), prediction(rows.val.size),
        method="pl_knn",
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
    expected.update(script_operating_point(out.test.score[keep], test_correct, SCRIPT_RULES["pl_knn"]))
    assert result.metrics == {"pl_knn": run_metrics({"native": expected})}
    assert "mcc" not in result.metrics["pl_knn"]
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
        out.name,
        out.features,
        test=RejectPrediction(out.test.labels, ~out.test.accept, -out.test.score, out.test.guess),
        train=out.train,
        val=RejectPrediction(out.val.labels, out.val.accept, out.val.score + 1.0, out.val.guess),
        option="trust",
    )
    frames = prediction_frames([trust, out], ds, rows)
    assert set(frames) == {"pl_knn"} and set(frames["pl_knn"]) == {"test", "val"}
    test = frames["pl_knn"]["test"]
    np.testing.assert_array_equal(test["score"], out.test.score)  # native gives the base columns
    np.testing.assert_array_equal(test["trust_score"], -out.test.score)
    np.testing.assert_array_equal(test["trust_accept"], ~out.test.accept)
    assert "trust_label" not in test and (test["y_true"] == -1).all()
    np.testing.assert_array_equal(test["row"], rows.test)
    val = frames["pl_knn"]["val"]
    np.testing.assert_array_equal(val["row"], rows.train[rows.val])
    np.testing.assert_array_equal(val["trust_score"], out.val.score + 1.0)


def test_a_run_on_data_without_true_labels_is_judged_by_the_bags(prefect_harness, tracking_uri, tmp_path):
    from pll_pipeline.flows.pipeline import pipeline
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
    method_run = result["method_run_ids"]["pl_knn"]
    logged = client.get_run(method_run).data.metrics
    assert client.get_run(method_run).data.params["truth"] == result["truth"]
    assert "mcc" not in logged
    test = pd.read_parquet(client.download_artifacts(method_run, "predictions/test.parquet", str(tmp_path)))
    assert (test["y_true"] == -1).all()
    expected = run_metrics({"native": partial_label_report(S[test["row"]], test["label"], test["accept"].to_numpy())})
    for key, value in expected.items():
        assert logged[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key


def test_every_reject_option_of_a_method_gets_its_own_metric_names():
    ds, rows, out = toy_run()
    rng = np.random.default_rng(5)
    y = rng.integers(0, 3, ds.n_rows)
    labelled = PartialLabelDataset(ds.X, ds.S | np.eye(3, dtype=bool)[y], y, ds.classes, "labelled")
    trust = MethodOutput(
        out.name, out.features, out.test, out.train,
        RejectPrediction(out.val.labels, out.val.accept, 1.0 - out.val.score, out.val.guess), option="trust",
    )
    result = evaluate([out, trust], labelled, rows)
    assert set(result.sweeps) == {("pl_knn", "native"), ("pl_knn", "trust")}
    metrics = result.metrics["pl_knn"]
    native = {k.split(".", 1)[1] for k in metrics if k.startswith("native.")}
    # The authors' script's operating point is the method's own score's: native only.
    native -= {"script_threshold", "script_rejection_rate", "script_covered_accuracy"}
    assert {k.split(".", 1)[1] for k in metrics if k.startswith("trust.")} == native
    assert {"aurc", "risk_0.10", "cal_risk_0.10", "cal_threshold_0.10"} <= native
    # The label metrics depend on no reject option: logged once, without a prefix.
    assert {"accuracy", "mcc"} <= set(metrics) and not {"accuracy", "mcc"} & native
    # Same test predictions, different validation scores: only the calibrated values may differ.
    for name in native - {n for n in native if n.startswith("cal_")}:
        assert metrics[f"trust.{name}"] == metrics[f"native.{name}"]
    assert result.truth == "true labels"

"""Evaluation stage: metrics, curves and calibrated thresholds of every method and reject option."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from pll.errors import InvalidDataError
from pll.evaluation import (
    DEFAULT_LAMBDAS,
    aurc,
    calibrate_thresholds,
    calibrated_metrics,
    correctness,
    partial_label_report,
    precision_at_percentile,
    reject_report,
    threshold_sweep,
)

TRUE_LABELS = "true labels"
PARTIAL_LABEL_LOSS = "partial-label loss (label in the row's bag; rows with empty bags left out)"


@dataclass(frozen=True)
class Evaluation:
    """What the evaluation of one run produced.

    ``metrics``: ``<method>.<option>.<metric>`` -> float.  Keyed by
    ``(method, option)``: ``sweeps`` (:func:`pll.evaluation.threshold_sweep`
    of the test rows), ``precision`` (precision at percentile, test rows),
    ``calibration`` (per λ: the threshold chosen on the validation hold-out,
    with its ``val_risk`` and ``val_rejection_rate`` there) and
    ``operating_points`` (rejection rate, covered accuracy) of each option's
    own rule.  ``truth`` says what "correct" meant.
    """

    metrics: dict
    sweeps: dict
    precision: dict
    calibration: dict
    operating_points: dict
    truth: str


class _Judge:
    """Judges predictions of data set rows: against true labels, else by the partial-label loss."""

    def __init__(self, ds, idx, part):
        self.ds, self.idx = ds, np.asarray(idx)
        # Without true labels only rows with a non-empty bag can be judged.
        self.keep = np.ones(self.idx.size, bool) if ds.y is not None else ds.S[self.idx].any(axis=1)
        if not self.keep.any():
            raise InvalidDataError(f"{ds.name}: no {part} row has a candidate bag to evaluate against")

    def correct(self, pred):
        labels = pred.labels[self.keep]
        if self.ds.y is not None:
            return correctness(labels, y_true=self.ds.y[self.idx], n_classes=self.ds.n_classes)
        return correctness(labels, bags=self.ds.S[self.idx[self.keep]])

    def report(self, pred, lambdas):
        if self.ds.y is not None:
            return reject_report(self.ds.y[self.idx], pred.labels, pred.accept, lambdas, n_classes=self.ds.n_classes)
        bags = self.ds.S[self.idx[self.keep]]
        return partial_label_report(bags, pred.labels[self.keep], pred.accept[self.keep], lambdas)


@task(name="evaluate", cache_policy=NO_CACHE)
def evaluate(outputs, ds, rows, lambdas=DEFAULT_LAMBDAS) -> Evaluation:
    """Evaluate every method output on the test rows, with thresholds calibrated on the validation rows.

    With true labels (``ds.y``) a prediction is correct when it equals the
    true label; without, when it lies in the row's bag (rows with an empty
    bag are left out).  Metric names: ``<method>.<option>.<metric>`` with
    the keys of :func:`pll.evaluation.reject_report`, ``aurc`` and those of
    :func:`pll.evaluation.calibrated_metrics`.
    """
    test = _Judge(ds, rows.test, "test")
    val = _Judge(ds, rows.train[rows.val], "validation")
    metrics, sweeps, precision, calibration, points = {}, {}, {}, {}, {}
    for out in outputs:
        key = (out.method, out.option)
        if key in sweeps:
            raise InvalidDataError(f"two outputs for method {out.method!r} with reject option {out.option!r}")
        report = test.report(out.test, lambdas)
        correct = test.correct(out.test)
        score = out.test.score[test.keep]
        sweeps[key] = threshold_sweep(score, correct)
        precision[key] = precision_at_percentile(score, correct)
        cal = calibrate_thresholds(out.val.score[val.keep], val.correct(out.val), lambdas)
        report["aurc"] = aurc(sweeps[key])
        report.update(calibrated_metrics(cal, score, correct))
        calibration[key] = cal.rename(columns={"risk": "val_risk", "rejection_rate": "val_rejection_rate"})
        points[key] = (report["rejection_rate"], report["covered_accuracy"])
        metrics.update({f"{out.method}.{out.option}.{name}": value for name, value in report.items()})
    truth = TRUE_LABELS if ds.y is not None else PARTIAL_LABEL_LOSS
    return Evaluation(metrics, sweeps, precision, calibration, points, truth)


def prediction_frames(outputs, ds, rows) -> dict:
    """Predictions artifacts: artifact path -> table, per method, of the test and the validation rows.

    ``predictions/<method>.parquet`` holds the test rows,
    ``predictions/<method>.val.parquet`` the validation hold-out (what the
    calibrated thresholds were chosen on).  The ``native`` option (else the
    alphabetically first) gives the columns of :meth:`RejectPrediction.to_frame`
    (``belief_<class>``, ``plausibility_<class>``, ``share_<class>``, ...);
    every other option adds ``<option>_score`` and ``<option>_accept`` (e.g.
    ``trust_score``), and ``<option>_label`` if its labels differ.
    """
    by_method = {}
    for out in outputs:
        by_method.setdefault(out.method, []).append(out)
    frames = {}
    for method, outs in by_method.items():
        outs = sorted(outs, key=lambda o: (o.option != "native", o.option))
        for part, idx, suffix in (("test", rows.test, ""), ("val", rows.train[rows.val], ".val")):
            base = getattr(outs[0], part)
            frame = base.to_frame(ds.classes, None if ds.y is None else ds.y[idx], idx)
            extra = {}
            for other in outs[1:]:
                pred = getattr(other, part)
                extra[f"{other.option}_score"] = pred.score
                extra[f"{other.option}_accept"] = pred.accept
                if not np.array_equal(pred.labels, base.labels):
                    extra[f"{other.option}_label"] = pred.labels
            frames[f"predictions/{method}{suffix}.parquet"] = frame.assign(**extra)
    return frames

"""The evaluation stage: metrics, curves and calibrated thresholds of every method and reject option."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..errors import InvalidDataError
from ..evaluation.metric_names import option_metric
from ..evaluation import Judge
from .presets import SCRIPT_RULES, script_operating_point, script_score
from ..methods.reasons import reason_report
from ..evaluation import (
    DEFAULT_LAMBDAS,
    aurc,
    calibrate_thresholds,
    calibrated_metrics,
    precision_at_percentile,
    threshold_sweep,
)

LABEL_METRICS = ("accuracy", "mcc")
"""Metrics of the predicted labels alone, whatever is rejected: a method run logs them without an option prefix."""
SHARED_LABEL_OPTIONS = ("native", "trust")
"""Reject options that keep the method's own predicted labels (the trust score only decides what to reject)."""

TRUE_LABELS = "true labels"
PARTIAL_LABEL_LOSS = "partial-label loss (label in the row's bag; rows with empty bags left out)"


@dataclass(frozen=True)
class OptionEvaluation:
    """The evaluation of one method run (``name``) with one reject option on the test rows.

    ``metrics``: metric -> float, the keys of :func:`pll.evaluation.reject_report`,
    ``aurc`` and those of :func:`pll.evaluation.calibrated_metrics` (with
    prediction sets, also those of :func:`pll.reject.conformal.set_report`; with
    reasons of rejection, those of :func:`pll.methods.reasons.reason_report`);
    ``sweep``: :func:`pll.evaluation.threshold_sweep`; ``precision``:
    precision at percentile; ``calibration``: per λ, the threshold chosen on
    the validation hold-out with its ``val_risk`` and ``val_rejection_rate``
    there; ``operating_point``: (rejection rate, covered accuracy) of the
    option's own rule.
    """

    name: str
    option: str
    metrics: dict
    sweep: pd.DataFrame
    precision: pd.DataFrame
    calibration: pd.DataFrame
    operating_point: tuple


@dataclass(frozen=True)
class Evaluation:
    """What the evaluation of one run produced: one :class:`OptionEvaluation` per method run and reject option.

    ``truth`` says what "correct" meant.  The other attributes gather the
    options' results: ``metrics`` by method run, as each logs them
    (:func:`run_metrics`); ``table`` one row per method run and option; the
    rest by ``(method run, option)``.
    """

    options: tuple
    truth: str

    @property
    def metrics(self) -> dict:
        """Method run name -> its metrics by the names it logs (:func:`run_metrics`)."""
        by_run = {}
        for o in self.options:
            by_run.setdefault(o.name, {})[o.option] = o.metrics
        return {name: run_metrics(options) for name, options in by_run.items()}

    @property
    def table(self) -> pd.DataFrame:
        """The comparison table: a row per method run (column ``method``) and reject option (``reject``)."""
        first = {}
        for i, o in enumerate(self.options):
            first.setdefault(o.name, i)
        options = sorted(self.options, key=lambda o: first[o.name])  # a method run's options together
        return pd.DataFrame([{"method": o.name, "reject": o.option, **o.metrics} for o in options])

    @property
    def sweeps(self) -> dict:
        return {(o.name, o.option): o.sweep for o in self.options}

    @property
    def precision(self) -> dict:
        return {(o.name, o.option): o.precision for o in self.options}

    @property
    def calibration(self) -> dict:
        return {(o.name, o.option): o.calibration for o in self.options}

    @property
    def operating_points(self) -> dict:
        return {(o.name, o.option): o.operating_point for o in self.options}


def run_metrics(option_metrics: dict) -> dict:
    """One method run's metrics by the names it logs: ``<option>.<metric>``, and :data:`LABEL_METRICS` unprefixed.

    ``option_metrics``: reject option -> metric -> value.  The label metrics
    of ``native`` (the method's own predictions) are logged once, without a
    prefix; the other options in :data:`SHARED_LABEL_OPTIONS` repeat them by
    construction and leave them out; an option with a model of its own
    (``conformal``, fitted on the fitting rows only) keeps its own, prefixed.
    So every run of every method logs the same keys.

    Examples
    --------
    >>> run_metrics({"native": {"accuracy": 0.9, "risk_0.10": 0.12}, "trust": {"accuracy": 0.9, "risk_0.10": 0.11}})
    {'accuracy': 0.9, 'native.risk_0.10': 0.12, 'trust.risk_0.10': 0.11}
    """
    out = {}
    for option, metrics in option_metrics.items():
        for name, value in metrics.items():
            if name in LABEL_METRICS and option in SHARED_LABEL_OPTIONS:
                if option == "native":
                    out[name] = value
            else:
                out[option_metric(option, name)] = value
    return out


def bag_calibrated_metrics(calibration, score, correct):
    """The thresholds chosen from bags (:func:`pll.evaluation.bag_bounds.calibrate_thresholds_from_bags`) applied to test rows.

    ``bag_cal_<what>_<λ>`` as :func:`pll.evaluation.calibrated_metrics` names
    them, and the validation rows' bounds at the chosen threshold:
    ``bag_val_risk_lower_<λ>``, ``bag_val_risk_upper_<λ>`` and
    ``bag_rejects_all_<λ>`` (1.0 when the upper bound chose to reject every row).
    """
    out = {f"bag_{name}": value for name, value in calibrated_metrics(calibration, score, correct).items()}
    columns = ("lambda", "risk_lower", "risk_upper", "rejects_all")
    for lam, lower, upper, rejects_all in zip(*(calibration[c] for c in columns)):
        out[f"bag_val_risk_lower_{lam:.2f}"] = float(lower)
        out[f"bag_val_risk_upper_{lam:.2f}"] = float(upper)
        out[f"bag_rejects_all_{lam:.2f}"] = float(rejects_all)
    return out


def _script_point(out, keep, correct):
    """:func:`~pll.experiment.presets.script_operating_point` of a native output; NaN for an output naming no method."""
    rule = SCRIPT_RULES.get(out.method)
    if rule is None:
        return dict.fromkeys(("script_threshold", "script_rejection_rate", "script_covered_accuracy"), float("nan"))
    return script_operating_point(script_score(out.test, rule)[keep], correct, rule)


def evaluate(outputs, ds, rows, lambdas=DEFAULT_LAMBDAS) -> Evaluation:
    """Evaluate every :class:`~pll.experiment.MethodOutput` on the test rows, thresholds calibrated on validation rows.

    With true labels (``ds.y``) a prediction is correct when it equals the
    true label; without, when it lies in the row's bag (rows with an empty
    bag are left out).  The calibrated thresholds (``cal_*``) are chosen with
    the true labels of the validation rows; without true labels, from their
    bags, minimising the upper bound of ``R_λ`` (the same as ``bag_cal_*``,
    which every run logs: the certified choice next to the true-label one).
    The native option of every method also logs the operating point of
    the DST-PLL authors' plotting script (``script_*``,
    :func:`pll.experiment.presets.script_operating_point`).
    """
    test = Judge(ds, rows.test, "test")
    val = Judge(ds, rows.train[rows.val], "validation")
    options, seen = [], set()
    for out in outputs:
        if (out.name, out.option) in seen:
            raise InvalidDataError(f"two outputs for method run {out.name!r} with reject option {out.option!r}")
        seen.add((out.name, out.option))
        report = test.report(out.test, lambdas)
        correct = test.correct(out.test)
        score = out.test.score[test.keep]
        sweep = threshold_sweep(score, correct)
        bag_cal = val.bag_calibration(out.val, lambdas)
        # Without true labels the partial-label loss would calibrate on the optimistic lower bound.
        cal = calibrate_thresholds(out.val.score[val.keep], val.correct(out.val), lambdas) if ds.y is not None else bag_cal
        report["aurc"] = aurc(sweep)
        if out.test.sets is not None:
            report.update(test.sets(out.test))
        if out.test.reason is not None:
            report.update(reason_report(out.test.reason[test.keep], correct))
        report.update(calibrated_metrics(cal, score, correct))
        report.update(bag_calibrated_metrics(bag_cal, score, correct))
        if out.option == "native":  # the DST-PLL authors' operating point, for their way of tabulating R_λ
            report.update(_script_point(out, test.keep, correct))
        options.append(OptionEvaluation(
            out.name,
            out.option,
            report,
            sweep,
            precision_at_percentile(score, correct),
            cal.rename(columns={"risk": "val_risk", "rejection_rate": "val_rejection_rate"}),
            (report["rejection_rate"], report["covered_accuracy"]),
        ))
    return Evaluation(tuple(options), TRUE_LABELS if ds.y is not None else PARTIAL_LABEL_LOSS)

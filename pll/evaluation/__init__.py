"""Evaluation of predictions with a reject option (DST-PLL paper, sections 2 and 5).

Reject reports and risks, threshold sweeps and calibration, comparisons of methods with their
significance tests; :class:`Judge`, which judges predictions against true labels or else bags;
:mod:`pll.evaluation.bag_bounds`, risk bounds and thresholds from bags alone; and
:mod:`pll.evaluation.metric_names`, which spells every metric name.
"""

from ._reject import (
    DEFAULT_LAMBDAS,
    DEFAULT_PERCENTILES,
    MIN_PAIRS,
    RiskScorer,
    aurc,
    calibrate_thresholds,
    calibrated_metrics,
    compare_methods,
    correctness,
    make_risk_scorer,
    matthews_correlation,
    paired_p_values,
    partial_label_report,
    precision_at_percentile,
    reject_report,
    threshold_sweep,
)
from . import bag_bounds, metric_names
from ._judge import Judge

__all__ = [
    "DEFAULT_LAMBDAS",
    "DEFAULT_PERCENTILES",
    "Judge",
    "MIN_PAIRS",
    "RiskScorer",
    "aurc",
    "bag_bounds",
    "calibrate_thresholds",
    "calibrated_metrics",
    "compare_methods",
    "correctness",
    "make_risk_scorer",
    "matthews_correlation",
    "metric_names",
    "paired_p_values",
    "partial_label_report",
    "precision_at_percentile",
    "reject_report",
    "threshold_sweep",
]

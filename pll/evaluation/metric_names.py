"""Metric names, built and parsed back in one place, so that reports, grids and MLflow spell them alike.

* ``risk_<λ>``: ``R_λ`` at a reject option's own rule, λ with two decimals
  (``risk_0.10``; MLflow metric names allow no ``@``).
* ``cal_<what>_<λ>``: ``what`` (``threshold``, ``rejection_rate``, ``risk``)
  at the threshold calibrated for λ on the validation rows.
* ``risk_<side>_<λ>``: a bound on ``R_λ`` from the candidate bags alone
  (``side`` is ``lower`` or ``upper``).
* ``<option>.<name>``: a metric of one reject option in a method's MLflow run
  (``native.risk_0.10``, ``conformal.coverage``).
"""

from __future__ import annotations

import re

# Metrics where a smaller value is better (for significance tables).
LOWER_IS_BETTER_PREFIXES = ("risk_", "cal_risk_", "nonreject_error", "rejection_rate", "aurc")
_RISK = re.compile(r"^risk_(?P<lam>\d+\.\d\d)$")
_CALIBRATED = re.compile(r"^cal_(?P<what>.+)_(?P<lam>\d+\.\d\d)$")


def risk_name(lam) -> str:
    """The metric name of ``R_λ``: λ with two decimals, e.g. ``risk_0.10``."""
    return f"risk_{lam:.2f}"


def calibrated_name(what: str, lam) -> str:
    """The name of ``what`` at the threshold calibrated for λ, e.g. ``cal_risk_0.10``."""
    return f"cal_{what}_{lam:.2f}"


def bound_name(side: str, lam) -> str:
    """The name of the ``side`` (``lower`` or ``upper``) bound on ``R_λ`` from the bags, e.g. ``risk_upper_0.10``."""
    return f"risk_{side}_{lam:.2f}"


def option_metric(option: str, name: str) -> str:
    """The MLflow key of metric ``name`` of reject option ``option``, e.g. ``native.risk_0.10``."""
    return f"{option}.{name}"


def parse_per_lambda(name) -> tuple[str, float] | None:
    """``("risk", λ)`` of a :func:`risk_name`, ``("cal_<what>", λ)`` of a :func:`calibrated_name`, else None."""
    match = _RISK.match(str(name))
    if match:
        return "risk", float(match["lam"])
    match = _CALIBRATED.match(str(name))
    return (f"cal_{match['what']}", float(match["lam"])) if match else None


def is_calibrated(name) -> bool:
    """Whether ``name`` is a :func:`calibrated_name`."""
    return _CALIBRATED.match(str(name)) is not None


def smaller_is_better(metric):
    """Whether a smaller value of ``metric`` (a name like ``risk_0.10``) is better."""
    return metric.startswith(LOWER_IS_BETTER_PREFIXES)

"""Evaluation of predictions with a reject option (DST-PLL paper, section 2)."""

from __future__ import annotations

import numpy as np

from .errors import InvalidDataError

DEFAULT_LAMBDAS = (0.0, 0.05, 0.10, 0.15, 0.20)


def risk_name(lam):
    """The metric name of ``R_λ``: λ with two decimals, e.g. ``risk_0.10``."""
    return f"risk_{lam:.2f}"


def _check(y_true, labels, accept):
    y_true = np.asarray(y_true)
    labels = np.asarray(labels)
    accept = np.asarray(accept)
    if not (y_true.ndim == labels.ndim == accept.ndim == 1):
        raise InvalidDataError("y_true, labels and accept must be 1-d arrays")
    if not (y_true.shape == labels.shape == accept.shape):
        raise InvalidDataError(
            f"lengths differ: y_true {y_true.size}, labels {labels.size}, accept {accept.size}"
        )
    if y_true.size == 0:
        raise InvalidDataError("no rows to evaluate")
    if accept.dtype != bool:
        raise InvalidDataError("accept must be a boolean array")
    return y_true, labels, accept


def reject_report(y_true, labels, accept, lambdas=DEFAULT_LAMBDAS):
    """Accuracy, rejection rate, covered accuracy, non-reject error and ``R_λ``.

    ``covered_accuracy`` is 1.0 when nothing is accepted (no accepted errors).
    """
    y_true, labels, accept = _check(y_true, labels, accept)
    n = y_true.size
    correct = labels == y_true
    n_accepted = int(accept.sum())
    rejection = 1.0 - n_accepted / n
    error = float((accept & ~correct).sum()) / n
    report = {
        "accuracy": float(correct.mean()),
        "rejection_rate": rejection,
        "covered_accuracy": float(correct[accept].mean()) if n_accepted else 1.0,
        "nonreject_error": error,
    }
    for lam in lambdas:
        report[risk_name(lam)] = error + lam * rejection
    return report

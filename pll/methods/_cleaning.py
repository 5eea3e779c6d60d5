"""Conformal candidate cleaning (Fuchs & Kalinke, UAI 2025): a deep learner narrows each bag while it trains.

One rule for every learner that takes ``cleaning_alpha`` (:class:`pll.Proden`,
:class:`pll.CroSel`), as the study's code applies it to each of its methods.
At the start of an epoch the networks (in inference mode) score calibration
rows, ``1 − max_{c ∈ S_j} p_c(x_j)``; from epoch :data:`CLEANING_START` on, a
batch row's targets are restricted to the candidates ``c`` whose conformal
p-value ``(#{j: score_j ≥ 1 − p_c(x_i)(1 − ε)} + 1) / (m + 1)`` exceeds
``alpha + β``, where ``ε = 2^−(epoch − 9)`` eases the cleaning in and ``β``
is the batch's mean probability outside its bags (how far the network is
from its bags); a row with no such candidate keeps its bag.
"""

from __future__ import annotations

import numpy as np

CLEANING_START = 10
"""Epochs before candidate cleaning starts: the networks first learn from the whole bags (the study's choice)."""
MIN_CALIBRATION_ROWS = 100
"""Fewest calibration rows of candidate cleaning (the study's choice), next to a fifth of the rows."""


def calibration_rows(bags, seed):
    """The rows whose scores calibrate the cleaning, sorted.

    The rows whose bag holds one label, when there are at least a fifth of
    the rows (and 100) of them; otherwise a random fifth of the rows (at
    least 100, at most all).  All rows still train (the study holds the
    random fifth out of training from 1,000 rows per class on).
    """
    n = bags.shape[0]
    m = min(n, max(MIN_CALIBRATION_ROWS, n // 5))
    single = np.flatnonzero(bags.sum(axis=1) == 1)
    return single if single.size >= m else np.sort(np.random.default_rng([seed, 11]).permutation(n)[:m])


def calibration_scores(P, bags):
    """The calibration rows' sorted scores ``1 − max_{c ∈ S_j} p_c(x_j)``, from their probabilities ``P`` and bags."""
    return np.sort(1.0 - np.where(bags, P, 0.0).max(axis=1))


def cleaned_bags(P, bags, scores, alpha, epoch):
    """The batch's bags (bool, (B, l)) narrowed to the candidates that cleaning keeps at ``epoch`` (>= CLEANING_START).

    ``P``: the batch's probabilities; ``scores``: the calibration scores of
    the epoch's start (:func:`calibration_scores`).
    """
    beta = float(np.where(bags, 0.0, P).sum(axis=1).mean())
    eps = 0.5 ** (epoch - CLEANING_START + 1)
    at_least = scores.size - np.searchsorted(scores, 1.0 - P * (1.0 - eps), side="left")
    kept = bags & ((at_least + 1) / (scores.size + 1) > alpha + beta)
    return np.where(kept.any(axis=1, keepdims=True), kept, bags)

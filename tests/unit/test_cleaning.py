"""Conformal candidate cleaning, the rule Proden and CroSel share: against row-by-row computations."""

from __future__ import annotations

import numpy as np

from pll.methods._cleaning import CLEANING_START, calibration_rows, calibration_scores, cleaned_bags


def test_cleaning_keeps_the_candidates_whose_conformal_p_value_exceeds_alpha_plus_beta():
    """The vectorised sets against a count row by row and class by class, ties between scores included."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        n, l, m = rng.integers(1, 12), rng.integers(2, 6), rng.integers(1, 25)
        P = np.round(rng.dirichlet(np.ones(l), size=n), 1).astype(np.float32)
        bags = rng.random((n, l)) < 0.5
        bags[np.arange(n), rng.integers(0, l, n)] = True
        scores = np.sort(np.round(rng.random(m), 1))
        epoch, alpha = int(rng.integers(CLEANING_START, CLEANING_START + 4)), float(rng.uniform(0.01, 0.3))
        beta = sum(P[i, c] for i in range(n) for c in range(l) if not bags[i, c]) / n
        keep = np.zeros((n, l), dtype=bool)
        for i in range(n):
            for c in np.flatnonzero(bags[i]):
                score = 1.0 - P[i, c] * (1.0 - 0.5 ** (epoch - CLEANING_START + 1))
                keep[i, c] = ((scores >= score).sum() + 1) / (m + 1) > alpha + beta
            keep[i] = keep[i] if keep[i].any() else bags[i]
        np.testing.assert_array_equal(cleaned_bags(P, bags, scores, alpha, epoch), keep)


def test_the_calibration_scores_are_one_minus_the_best_candidates_probability_sorted():
    rng = np.random.default_rng(1)
    P = rng.dirichlet(np.ones(5), size=40)
    bags = rng.random((40, 5)) < 0.4
    bags[np.arange(40), rng.integers(0, 5, 40)] = True
    expected = sorted(1.0 - max(P[i, c] for c in np.flatnonzero(bags[i])) for i in range(40))
    np.testing.assert_allclose(calibration_scores(P, bags), expected)


def test_cleaning_calibrates_on_the_rows_of_one_label_when_there_are_enough_of_them():
    bags = np.ones((600, 3), dtype=bool)
    bags[:150, 1:] = False  # 150 rows of one label: at least a fifth (120)
    np.testing.assert_array_equal(calibration_rows(bags, 0), np.arange(150))
    bags[100:150] = True  # 100 of them: too few, so a random fifth
    rows = calibration_rows(bags, 0)
    assert rows.size == 120 == np.unique(rows).size and not np.array_equal(rows, np.arange(120))
    assert calibration_rows(bags[:50], 0).size == 50  # at least 100: all there are

"""Which rows of a run train, test and calibrate.

The papers split 80/20 at random.  On top of that a seeded validation
hold-out is carved from the training rows: a model fitted on the remaining
training rows scores it exactly like test rows, so that reject thresholds
can be calibrated without looking at the test rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data import split_indices, validation_indices


@dataclass(frozen=True, eq=False)
class SplitRows:
    """Row indices of one run.

    Attributes
    ----------
    train, test : ndarray of int
        Data set rows, sorted.
    val, fit : ndarray of int
        Positions *within* ``train``: the validation hold-out and the rest.
    """

    train: np.ndarray
    test: np.ndarray
    val: np.ndarray
    fit: np.ndarray


def make_split(n_rows, seed=0, test_size=0.2, val_fraction=0.2) -> SplitRows:
    """A seeded train/test split with a validation hold-out inside the training rows."""
    train, test = split_indices(n_rows, test_size, seed)
    val, fit = validation_indices(train.size, val_fraction, seed)
    return SplitRows(train, test, val, fit)

"""Which rows of a run train, test and calibrate.

The papers split 80/20 at random.  On top of that a seeded validation
hold-out is carved from the training rows: a model fitted on the remaining
training rows scores it exactly like test rows, so that reject thresholds
can be calibrated without looking at the test rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data import split_indices
from ..errors import InvalidParameterError


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
    if not 0.0 < val_fraction < 1.0:
        raise InvalidParameterError(f"val_fraction must be in (0, 1), got {val_fraction}")
    n_val = int(round(val_fraction * train.size))
    if n_val < 1 or n_val >= train.size:
        raise InvalidParameterError(
            f"val_fraction={val_fraction} leaves no validation or no fitting rows among {train.size} training rows"
        )
    perm = np.random.default_rng([seed, 1]).permutation(train.size)
    return SplitRows(train, test, np.sort(perm[:n_val]), np.sort(perm[n_val:]))

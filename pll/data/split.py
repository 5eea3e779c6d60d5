"""The papers' evaluation protocol: a seeded random train/test split."""

import numpy as np
from sklearn.model_selection import train_test_split as _sk_split

from ..errors import InvalidParameterError


def split_indices(n_rows, test_size=0.2, random_state=0):
    """Row indices of a seeded random train/test split (80/20 by default)."""
    if not 0.0 < test_size < 1.0:
        raise InvalidParameterError(f"test_size must be in (0, 1), got {test_size}")
    if n_rows < 2:
        raise InvalidParameterError(f"cannot split {n_rows} row(s) into train and test")
    train, test = _sk_split(np.arange(n_rows), test_size=test_size, random_state=random_state)
    return np.sort(train), np.sort(test)


def train_test_split(dataset, test_size=0.2, random_state=0):
    """Split a :class:`PartialLabelDataset` into (train, test) data sets."""
    train, test = split_indices(dataset.n_rows, test_size, random_state)
    return dataset.subset(train), dataset.subset(test)

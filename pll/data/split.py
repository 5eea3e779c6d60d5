"""Every split of rows: the papers' seeded random train/test split, and the validation hold-out inside the training rows."""

import numpy as np
from sklearn.model_selection import train_test_split as _sk_split

from ..utils._random import seed_to_int
from ..errors import InvalidParameterError
from ..utils.validation import check_fraction


def split_indices(n_rows, test_size=0.2, random_state=0):
    """Row indices of a seeded random train/test split (80/20 by default)."""
    check_fraction(test_size, "test_size")
    if n_rows < 2:
        raise InvalidParameterError(f"cannot split {n_rows} row(s) into train and test")
    train, test = _sk_split(np.arange(n_rows), test_size=test_size, random_state=random_state)
    return np.sort(train), np.sort(test)


def train_test_split(dataset, test_size=0.2, random_state=0):
    """Split a :class:`PartialLabelDataset` into (train, test) data sets."""
    train, test = split_indices(dataset.n_rows, test_size, random_state)
    return dataset.subset(train), dataset.subset(test)


def validation_indices(n_train, val_fraction=0.2, random_state=0):
    """Positions among ``n_train`` training rows of a seeded validation hold-out and of the rest (fitting rows), sorted.

    ``round(val_fraction · n_train)`` rows, drawn from a stream keyed by
    (seed, 1), so that the hold-out does not reuse the train/test split's draw.
    """
    check_fraction(val_fraction, "val_fraction")
    n_val = int(round(val_fraction * n_train))
    if n_val < 1 or n_val >= n_train:
        raise InvalidParameterError(
            f"val_fraction={val_fraction} leaves no validation or no fitting rows among {n_train} training rows"
        )
    perm = np.random.default_rng([seed_to_int(random_state), 1]).permutation(n_train)
    return np.sort(perm[:n_val]), np.sort(perm[n_val:])

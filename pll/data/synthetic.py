"""Synthetic partial-label tables of any size, for scale tests and benchmarks.

Rows are drawn from a mixture of Gaussian classes whose means lie close
enough that neighborhoods mix classes (as in real partial-label data), and
each row's bag holds its true label plus 0 to 3 other labels drawn at random.
The table has the layout :func:`pll.load_dataset` reads from CSV or Parquet:
feature columns ``x0 …``, ``candidates`` (labels joined by ``|``) and ``label``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import InvalidParameterError
from .tabular import CANDIDATES, LABEL, SEPARATOR


def make_partial_label_table(
    n_rows, *, n_features=32, n_classes=20, max_extra=3, spread=1.5, random_state=0
) -> pd.DataFrame:
    """A table of ``n_rows`` rows with partial labels (see the module).

    Parameters
    ----------
    n_rows, n_features, n_classes : int
    max_extra : int, default=3
        Each bag holds the true label and a uniform number from 0 to
        ``max_extra`` of other labels.
    spread : float, default=1.5
        Standard deviation of the class means around the origin; rows have
        unit variance around their class mean, so a smaller spread means more
        overlapping classes.
    random_state : int, default=0

    Returns
    -------
    DataFrame
        ``x0`` … ``x{d-1}`` (float32), ``candidates`` (str) and ``label`` (str;
        class names ``0`` … ``l-1``).

    Examples
    --------
    >>> t = make_partial_label_table(5, n_features=2, n_classes=4, random_state=1)
    >>> list(t.columns)
    ['x0', 'x1', 'candidates', 'label']
    >>> all(label in bag.split("|") for label, bag in zip(t["label"], t["candidates"]))
    True
    """
    for name, value, low in (("n_rows", n_rows, 1), ("n_features", n_features, 1), ("n_classes", n_classes, 2),
                             ("max_extra", max_extra, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise InvalidParameterError(f"{name} must be an integer >= {low}, got {value!r}")
    if max_extra >= n_classes:
        raise InvalidParameterError(f"max_extra={max_extra} must be below n_classes={n_classes}")
    rng = np.random.default_rng(random_state)
    means = rng.normal(scale=spread, size=(n_classes, n_features)).astype(np.float32)
    y = rng.integers(n_classes, size=n_rows)
    X = means[y] + rng.standard_normal((n_rows, n_features), dtype=np.float32)
    # Extra candidates: the labels with the n_extra smallest random keys, the true label's key set above all.
    n_extra = rng.integers(max_extra + 1, size=n_rows)
    keys = rng.random((n_rows, n_classes), dtype=np.float32)
    keys[np.arange(n_rows), y] = 2.0
    rank = keys.argsort(axis=1).argsort(axis=1)
    bags = rank < n_extra[:, None]
    bags[np.arange(n_rows), y] = True
    names = np.array([str(c) for c in range(n_classes)], dtype=object)
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(n_features)])
    frame[CANDIDATES] = [SEPARATOR.join(names[row]) for row in bags]
    frame[LABEL] = names[y]
    return frame

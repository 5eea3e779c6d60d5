"""Synthetic partial-label tables of any size, for scale tests and benchmarks.

:func:`make_partial_label_table` draws rows from a mixture of Gaussian
classes whose means lie close enough that neighborhoods mix classes (as in
real partial-label data); :func:`make_repeated_rows_table` draws sparse
binary rows from a few hundred prototypes, so that rows repeat and many
distances tie, as in bag-of-words, one-hot or count data.  Each row's bag
holds its true label plus 0 to ``max_extra`` other labels drawn at random.
The tables have the layout :func:`pll.load_dataset` reads from CSV or Parquet:
feature columns ``x0 …``, ``candidates`` (labels joined by ``|``) and ``label``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..utils._random import seed_to_int
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
    _check_sizes(n_rows=n_rows, n_features=n_features, n_classes=n_classes, max_extra=max_extra)
    rng = np.random.default_rng(seed_to_int(random_state))
    means = rng.normal(scale=spread, size=(n_classes, n_features)).astype(np.float32)
    y = rng.integers(n_classes, size=n_rows)
    X = means[y] + rng.standard_normal((n_rows, n_features), dtype=np.float32)
    return _table(X, y, n_classes, max_extra, rng)


def make_repeated_rows_table(
    n_rows, *, n_features=519, n_classes=90, n_prototypes=400, density=0.04, flips=1.0, max_extra=3, random_state=0
) -> pd.DataFrame:
    """A table of sparse binary rows that repeat: prototypes, each of one class, with a few bits flipped.

    Prototype ``p`` is drawn with probability proportional to ``(p + 1)^-0.7``
    (a few are common, as words or item sets are), and each row flips a
    Poisson(``flips``) number of its bits: a third of the rows copy their
    prototype exactly.  With the defaults, 20,000 rows hold about 12,500
    distinct ones and the largest group of identical rows about 450, as in a
    real 21,878-row table of 519 binary features.

    Parameters
    ----------
    n_rows, n_features, n_classes, n_prototypes : int
    density : float, default=0.04
        Share of a prototype's bits that are set.
    flips : float, default=1.0
        Mean number of bits a row flips.
    max_extra : int, default=3
    random_state : int, default=0

    Returns
    -------
    DataFrame
        As :func:`make_partial_label_table`, with features 0.0 or 1.0.

    Examples
    --------
    >>> t = make_repeated_rows_table(1000, n_features=20, n_classes=5, n_prototypes=10, random_state=1)
    >>> features = t.filter(like="x").to_numpy()
    >>> np.unique(features).tolist(), len(np.unique(features, axis=0)) < 500
    ([0.0, 1.0], True)
    """
    _check_sizes(n_rows=n_rows, n_features=n_features, n_classes=n_classes, max_extra=max_extra,
                 n_prototypes=n_prototypes)
    rng = np.random.default_rng(seed_to_int(random_state))
    prototypes = rng.random((n_prototypes, n_features)) < density
    classes = rng.integers(n_classes, size=n_prototypes)
    weights = 1.0 / np.arange(1, n_prototypes + 1) ** 0.7
    drawn = rng.choice(n_prototypes, size=n_rows, p=weights / weights.sum())
    X = prototypes[drawn]
    n_flips = rng.poisson(flips, size=n_rows)
    rows = np.repeat(np.arange(n_rows), n_flips)
    X[rows, rng.integers(n_features, size=rows.size)] ^= True
    return _table(X.astype(np.float32), classes[drawn], n_classes, max_extra, rng)


def _check_sizes(**sizes):
    """Refuse a size below its least value (1; 2 classes; 0 extra labels), or ``max_extra`` not below the classes."""
    for name, value in sizes.items():
        low = {"n_classes": 2, "max_extra": 0}.get(name, 1)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise InvalidParameterError(f"{name} must be an integer >= {low}, got {value!r}")
    if sizes["max_extra"] >= sizes["n_classes"]:
        raise InvalidParameterError(f"max_extra={sizes['max_extra']} must be below n_classes={sizes['n_classes']}")


def _table(X, y, n_classes, max_extra, rng):
    """The table of features ``X``, true labels ``y`` and bags of ``y`` plus 0 to ``max_extra`` random labels."""
    n_rows, n_features = X.shape
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

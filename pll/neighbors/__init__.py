"""k-nearest-neighbor search behind one function, with interchangeable backends.

Every backend returns a :class:`NeighborResult` of the same shape: indices
sorted by distance, ties by lower training index, distances recomputed in
float64.  Methods depend on that result, never on a backend.
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import InvalidDataError, InvalidParameterError, NeighborsError
from .exact import exact_kneighbors
from .result import NeighborResult

BACKENDS = ("exact",)


def _as_features(X, what):
    try:
        X = np.asarray(X)
        if not np.issubdtype(X.dtype, np.floating):
            X = X.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidDataError(f"{what}: features are not numeric ({exc})") from None
    if X.ndim != 2:
        raise InvalidDataError(f"{what}: features must be a 2-d array, got shape {X.shape}")
    bad = ~np.isfinite(X).all(axis=1)
    if bad.any():
        raise InvalidDataError(
            f"{what}: {int(bad.sum())} row(s) hold NaN or infinite values (first at row {int(np.argmax(bad))})"
        )
    return X


def kneighbors(X_train, X_query=None, k=10, backend="exact", **options) -> NeighborResult:
    """Find the ``k`` nearest training rows of each query row.

    Parameters
    ----------
    X_train : array of shape (n_train, d)
    X_query : array of shape (n_query, d) or None
        None means the training rows' own neighbors, each row excluded by its
        index (an exact duplicate of a row is a genuine neighbor at distance 0).
    k : int
    backend : {"exact"}
    **options
        Backend parameters.

    Returns
    -------
    NeighborResult
    """
    X_train = _as_features(X_train, "training rows")
    exclude_self = X_query is None
    X_query = X_train if exclude_self else _as_features(X_query, "query rows")
    if X_query.shape[1] != X_train.shape[1]:
        raise InvalidDataError(
            f"query rows have {X_query.shape[1]} features but training rows have {X_train.shape[1]}"
        )
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise InvalidParameterError(f"k must be a positive integer, got {k!r}")
    available = X_train.shape[0] - (1 if exclude_self else 0)
    if k > available:
        raise NeighborsError(f"k={k} exceeds the {available} training rows available as neighbors")
    if backend not in BACKENDS:
        raise InvalidParameterError(f"unknown kNN backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if options:
        raise InvalidParameterError(f"backend {backend!r} takes no options, got {', '.join(options)}")
    t0 = time.perf_counter()
    indices, distances = exact_kneighbors(X_train, X_query, k, exclude_self=exclude_self)
    return NeighborResult(
        indices,
        distances,
        None,
        "exact",
        exclude_self,
        {"query": time.perf_counter() - t0},
    )


__all__ = ["BACKENDS", "NeighborResult", "kneighbors"]

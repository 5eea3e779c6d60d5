"""Building an in-process index (a local backend of :mod:`pll.neighbors.registry`), for local search and Dask shards."""

from __future__ import annotations

from .exact import ExactIndex
from .nndescent import DEFAULTS as NNDESCENT_DEFAULTS
from .registry import BACKENDS


def local_index(X_train, k, backend, options):
    """Build the index of the local ``backend`` over ``X_train``, serving up to ``k`` neighbors.

    ``options`` are checked by the caller (:func:`~pll.neighbors.registry.check_backend`).
    """
    entry = BACKENDS[backend]
    if entry.approximate and X_train.shape[0] <= options.get("leaf_size", NNDESCENT_DEFAULTS["leaf_size"]):
        # Rows that fit in one random-projection leaf are all compared with each other anyway; pynndescent
        # also needs more rows than its graph degree (a class set of one row has none).
        return ExactIndex(X_train)
    return entry.index_class()(X_train, k, **options)

"""The in-process search backends and their options, shared by local search and Dask shards."""

from __future__ import annotations

from ..errors import InvalidParameterError
from .exact import ExactIndex
from .nndescent import DEFAULTS as NNDESCENT_DEFAULTS
from .nndescent import OPTIONS as NNDESCENT_OPTIONS
from .nndescent import NNDescentIndex

LOCAL_OPTIONS = {"exact": (), "nndescent": NNDESCENT_OPTIONS}
APPROXIMATE = {"nndescent"}


def check_options(backend, options, allowed):
    """Raise :class:`InvalidParameterError` naming the first option ``backend`` does not take."""
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        known = ", ".join(sorted(allowed)) or "none"
        raise InvalidParameterError(f"kNN backend {backend!r} has no option {unknown[0]!r} (options: {known})")


def local_index(X_train, k, backend, options):
    """Build an in-process index (``exact`` or ``nndescent``) serving up to ``k`` neighbors."""
    check_options(backend, options, LOCAL_OPTIONS[backend])
    if backend == "exact" or X_train.shape[0] <= options.get("leaf_size", NNDESCENT_DEFAULTS["leaf_size"]):
        # Rows that fit in one random-projection leaf are all compared with each other anyway; pynndescent
        # also needs more rows than its graph degree (a class set of one row has none).
        return ExactIndex(X_train)
    return NNDescentIndex(X_train, k, **options)

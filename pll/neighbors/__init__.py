"""k-nearest-neighbor search behind one function, with interchangeable backends.

Every backend returns a :class:`NeighborResult` of the same shape: indices
sorted by distance, ties by lower training index, distances recomputed in
float64.  Methods depend on that result, never on a backend.  To query one
training set several times (its own rows, then new rows), build a
:class:`NeighborIndex` once.  :func:`nearest_by_group` finds the nearest row of
every group (class) in one search, for trust scores.

The backends are one table, :mod:`pll.neighbors.registry`.  Names are
imported on first use, so that the registry loads without numba and
scikit-learn.
"""

from ..utils._lazy import lazy_attributes

_PUBLIC = {
    "BACKENDS": ".registry",
    "DEFAULT_BACKEND": ".registry",
    "NeighborIndex": ".index",
    "NeighborResult": ".result",
    "check_backend": ".registry",
    "kneighbors": ".index",
    "nearest_by_group": ".grouped",
    "use_backend": ".index",
}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_attributes(__name__, _PUBLIC)

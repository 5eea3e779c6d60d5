"""k-nearest-neighbor search behind one function, with interchangeable backends.

Every backend returns a :class:`NeighborResult` of the same shape: indices
sorted by distance, ties by lower training index, distances recomputed in
float64.  Methods depend on that result, never on a backend.  To query one
training set several times (its own rows, then new rows), build a
:class:`NeighborIndex` once.  :func:`nearest_by_group` finds the nearest row of
every group (class) in one search, for trust scores.
"""

from .grouped import nearest_by_group
from .index import BACKENDS, DEFAULT_BACKEND, NeighborIndex, kneighbors, use_backend
from .result import NeighborResult

__all__ = [
    "BACKENDS", "DEFAULT_BACKEND", "NeighborIndex", "NeighborResult", "kneighbors", "nearest_by_group", "use_backend"
]

"""How the ``auto`` backend picks exact or approximate search, by the number of training rows.

Kept apart from the backends themselves (and light, like :mod:`pll.neighbors.registry`)
so that the command line can describe ``auto`` without importing scikit-learn or numba.
"""

from __future__ import annotations

from numbers import Integral

from ..errors import InvalidParameterError

AUTO_EXACT_MAX_ROWS = 100_000
"""``auto``: exact search up to this many training rows (twice as many for ``k >= AUTO_WIDE_K``), nndescent
beyond.  ``benchmarks/auto_threshold.py`` on this 2-core machine (synthetic 32-d table with 20 classes,
min-max scaled; the training rows' own graph plus a quarter as many queries), seconds of exact / warm
nndescent at recall >= 0.98:

=============  ============  ============  ============  =============
training rows  20,000        40,000        80,000        160,000
k = 10         0.6 / 0.6     2.2 / 1.2     7.7 / 3.0     28.7 / 10.7
k = 50         1.0 / 1.7     2.8 / 4.5     8.7 / 11.0    31.8 / 25.3
=============  ============  ============  ============  =============

pynndescent's first use in a process adds 33 s of numba compilation, shared by the few searches of a
run, so exact search wins up to about 100k rows at k = 10 and about 200k at k = 50: pynndescent's graph
and candidate lists grow with k, exact search's cost barely does."""
AUTO_WIDE_K = 32
AUTO_MIN_CONTRAST = 2.0
"""``auto`` beyond its exact threshold searches exactly when the training rows' relative contrast (the mean
distance to random rows over the distance to the :data:`CONTRAST_K`-th neighbor, median of the recall sample,
:meth:`~pll.neighbors.recall.RecallProbe.relative_contrast`) is below this.  Measured on 32-d Gaussian
mixtures of 20 classes (30,000 and 120,000 rows): the project's generator (class means of spread 1.5) has a
contrast of 2.4-2.6 and nndescent's own graph a recall@10 of 0.993-1.000 at default settings; centres close
together (spread 0.2, no cluster structure) have 1.55-1.65 and 0.88-0.95, falling with the rows (0.857 at
240,000), where reaching 0.95 costs more than exact search (``benchmarks/recall_target.py``).  The
contrast needs only the exact neighbors of the recall sample, which the own graph's recall needs anyway, and
no numba compilation (33 s in a fresh process, which exact search need not pay)."""
CONTRAST_K = 10


def auto_exact_max_rows(k):
    """The most training rows ``auto`` searches exactly for ``k`` neighbors (see :data:`AUTO_EXACT_MAX_ROWS`)."""
    return AUTO_EXACT_MAX_ROWS * (2 if k >= AUTO_WIDE_K else 1)


def choose_backend(n_train, exact_max_rows=AUTO_EXACT_MAX_ROWS):
    """The backend ``auto`` picks for ``n_train`` training rows: ``exact`` up to ``exact_max_rows``."""
    if isinstance(exact_max_rows, bool) or not isinstance(exact_max_rows, Integral) or exact_max_rows < 0:
        raise InvalidParameterError(f"exact_max_rows must be a non-negative integer, got {exact_max_rows!r}")
    return "exact" if n_train <= exact_max_rows else "nndescent"

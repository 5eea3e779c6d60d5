"""The kNN backends in one table: each name's index class, the options it takes, approximate or not.

Everything that names a backend reads this table: the command line's choices
and help, the early check of a run's, a grid's or an estimator's backend
(:func:`check_backend`; :func:`check_knn_params` in the estimators' parameter check),
:class:`~pll.neighbors.NeighborIndex`, the nearest row per group and the Dask
shards.  It imports nothing heavy (a class is named here and imported when a
search starts), so that ``pll --help`` lists the backends without scikit-learn
or numba.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from numbers import Real

from ..errors import InvalidParameterError
from ..utils._parameter_checks import add_parameter_check
from .auto import AUTO_EXACT_MAX_ROWS, AUTO_WIDE_K, choose_backend

COMMON_OPTIONS = ("recall_sample", "random_state", "target_recall")
"""Options of every backend: the recall sample, the seed and the recall an approximate search promises
(:class:`~pll.neighbors.NeighborIndex`)."""
NNDESCENT_OPTIONS = (
    # Passed on to pynndescent.NNDescent as they are.
    "n_neighbors", "n_trees", "leaf_size", "n_iters", "delta", "max_candidates", "diversify_prob",
    "pruning_degree_multiplier", "low_memory", "n_jobs", "parallel_batch_queries",
    # pynndescent's search breadth, the candidates fetched per query before reranking, the seed.
    "epsilon", "query_k", "random_state",
)
SHARD_OPTIONS = ("n_shards", "shard_backend", "address", "client", "n_workers", "threads_per_worker", "block_rows",
                 "random_state")
TARGET_RECALL = 0.95
"""Default ``target_recall`` of approximate searches: the recall@k they escalate to, or search exactly."""
EXACT = "exact"
"""The reference search: what approximate backends' recall is measured against, and the default shard."""


@dataclass(frozen=True)
class Backend:
    """One kNN backend.

    Attributes
    ----------
    name : str
    summary : str
        One line for the command line's help.
    index : str or None
        ``"module:Class"`` of its index, built as ``Class(X_train, k, **options)``;
        None for ``auto``, which picks a local backend by the number of training rows.
    options : tuple of str
        The keyword arguments its index takes, besides :data:`COMMON_OPTIONS`.
    approximate : bool or None
        None when it is as approximate as the local backend it runs
        (``auto``'s pick, ``dask``'s shards).
    local : bool
        Searches in this process: what ``auto`` picks and what a Dask shard runs.
    """

    name: str
    summary: str
    index: str | None
    options: tuple = ()
    approximate: bool | None = False
    local: bool = False

    def index_class(self):
        """The index class, imported now."""
        module, _, name = self.index.partition(":")
        return getattr(import_module(module), name)


BACKENDS = {
    backend.name: backend
    for backend in (
        Backend("auto", f"exact up to {AUTO_EXACT_MAX_ROWS:,} training rows ({2 * AUTO_EXACT_MAX_ROWS:,} for "
                f"{AUTO_WIDE_K} or more neighbors), nndescent beyond", None, ("exact_max_rows",), None),
        Backend(EXACT, "exact search (float32 BLAS screening, certified in float64)",
                "pll.neighbors.exact:ExactIndex", local=True),
        Backend("nndescent", "approximate search with pynndescent, its recall measured",
                "pll.neighbors.nndescent:NNDescentIndex", NNDESCENT_OPTIONS, approximate=True, local=True),
        Backend("dask", "the training rows sharded over a Dask cluster, exact or nndescent shards",
                "pll.neighbors.sharded:ShardedIndex", SHARD_OPTIONS, None),
    )
}
DEFAULT_BACKEND = "auto"
"""The backend of runs that name none (``pll run``, ``pll train``, grids): exact search while it is
fast, approximate search beyond, so that big data gets approximate search without asking for it."""
LOCAL_BACKENDS = tuple(name for name, backend in BACKENDS.items() if backend.local)


def backend_entry(name) -> Backend:
    """The table's entry for ``name``, or an :class:`InvalidParameterError` listing the backends."""
    if not isinstance(name, str) or name not in BACKENDS:
        raise InvalidParameterError(f"unknown kNN backend {name!r}: choose one of {', '.join(BACKENDS)}")
    return BACKENDS[name]


def check_options(label, options, allowed):
    """Raise :class:`InvalidParameterError` naming the first option of ``options`` not in ``allowed``."""
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        known = ", ".join(sorted(set(allowed))) or "none"
        raise InvalidParameterError(f"kNN backend {label!r} has no option {unknown[0]!r} (options: {known})")


def check_shard_backend(name):
    """The entry of a Dask shard's backend, which must be local."""
    if name not in LOCAL_BACKENDS:
        raise InvalidParameterError(f"shard_backend must be one of {', '.join(LOCAL_BACKENDS)}, got {name!r}")
    return BACKENDS[name]


def backend_options(name, options=None) -> tuple:
    """The options backend ``name`` takes with ``options``: its own and :data:`COMMON_OPTIONS`.

    ``auto`` takes the options of the backends it may pick (and passes on
    those of its pick), ``dask`` those of its ``shard_backend``.
    """
    entry, options = backend_entry(name), dict(options or {})
    allowed = [*entry.options, *COMMON_OPTIONS]
    if entry.index is None:
        allowed += [option for local in LOCAL_BACKENDS for option in BACKENDS[local].options]
    elif not entry.local:
        allowed += check_shard_backend(options.get("shard_backend", EXACT)).options
    return tuple(allowed)


def check_backend(name, options=None):
    """Refuse an unknown backend, or an option it does not take (:func:`backend_options`), before anything is searched.

    The checks a search makes when it starts, made early: the command line,
    the grid and the estimators' ``fit`` call this before any stage runs.
    """
    options = dict(options or {})
    check_options(name, options, backend_options(name, options))
    if "target_recall" in options:
        check_target(options["target_recall"])


def check_target(value, name="target_recall"):
    """``value`` as a float in [0, 1], or a one-line :class:`~pll.errors.InvalidParameterError`."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0.0 <= value <= 1.0:
        raise InvalidParameterError(f"{name} must be a number from 0 to 1, got {value!r}")
    return float(value)


def resolve(name, options, n_train, exact_max_rows):
    """``(backend, options)`` that search ``n_train`` training rows: ``auto`` replaced by its pick.

    ``auto`` picks :data:`EXACT` up to ``exact_max_rows`` rows (its option
    ``exact_max_rows`` overrides it), ``nndescent`` beyond, and keeps the
    options that its pick takes.  Other backends come back as they are.
    """
    if backend_entry(name).index is not None:
        return name, dict(options)
    options = dict(options)
    picked = choose_backend(n_train, options.pop("exact_max_rows", exact_max_rows))
    taken = (*BACKENDS[picked].options, *COMMON_OPTIONS)
    return picked, {option: value for option, value in options.items() if option in taken}


def check_knn_params(params):
    """The backend ``knn`` and its ``knn_options`` of an estimator's ``params``, checked by :func:`check_backend`.

    Added to :func:`pll.utils.validation.check_params` here, so that every
    estimator with a ``knn`` parameter gets it checked at ``fit`` (and by
    :func:`pll.methods.make_method`) while the validation layer imports
    nothing above it: such an estimator searches through this package, so
    its module has imported this one.
    """
    check_backend(params["knn"], params.get("knn_options"))


add_parameter_check("knn", check_knn_params)

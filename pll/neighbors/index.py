"""A neighbor index built once over the training rows and queried any number of times."""

from __future__ import annotations

import time

import numpy as np

from ..errors import InvalidParameterError, NeighborsError
from ..utils.validation import check_features, check_positive_int, check_queries
from .auto import AUTO_MIN_CONTRAST, CONTRAST_K, auto_exact_max_rows
from .backends import local_index
from .exact import ExactIndex
from .recall import RecallProbe
from .registry import EXACT, TARGET_RECALL, backend_entry, check_backend, check_target, resolve
from .result import NeighborResult


def use_backend(estimator, backend, options=None, keep=()):
    """Point the neighbor searches of ``estimator`` (its ``knn`` and ``knn_options``) at ``backend``.

    Parameters named in ``keep`` (e.g. set explicitly by the user) stay as
    they are, and a kept ``knn`` keeps its options; an estimator without
    these parameters searches no neighbors and is returned unchanged.
    """
    params = estimator.get_params(deep=False)
    updates = {"knn": backend, "knn_options": dict(options or {})}
    keep = {"knn", "knn_options"} if "knn" in keep else set(keep)
    updates = {name: value for name, value in updates.items() if name in params and name not in keep}
    return estimator.set_params(**updates) if updates else estimator


class NeighborIndex:
    """Search structure over ``X_train``, built once, serving every query of a split.

    Parameters
    ----------
    X_train : array of shape (n_train, d)
    k : int, default=10
        The most neighbors a query may ask for.
    backend : {"auto", "exact", "nndescent", "dask"}, default="exact"
        A name of :data:`pll.neighbors.registry.BACKENDS`.  ``auto`` picks
        ``exact`` up to :func:`auto_exact_max_rows` training rows (its option
        ``exact_max_rows``) and ``nndescent`` beyond; :attr:`backend` says which.
    recall_sample : int, default=1000
        Queries checked against exact search to measure an approximate
        backend's recall (0: do not measure).
    random_state : int, default=0
        Seeds the recall sample and the approximate index.
    target_recall : float, default=0.95
        The recall@k an approximate search promises.  After each search its
        recall is measured on the sample; while below the target the search
        escalates (:meth:`kneighbors`), or searches exactly once the next step
        would cost more than exact search.  0: report the recall, never act on it.
    **options
        Backend options: see :class:`pll.neighbors.nndescent.NNDescentIndex`
        and :class:`pll.neighbors.sharded.ShardedIndex`.

    Attributes
    ----------
    backend : str
        The backend in use (``auto`` resolved).
    approximate : bool
    build_seconds : float
    decision : str
        Why :attr:`backend` was picked (``auto``: by the training rows, or by
        their relative contrast, :data:`~pll.neighbors.auto.AUTO_MIN_CONTRAST`).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [1.0], [1.0], [3.0]])
    >>> with NeighborIndex(X, k=2) as index:
    ...     nb = index.kneighbors()
    >>> nb.indices.tolist()
    [[1, 2], [2, 0], [1, 0], [1, 2]]
    """

    def __init__(self, X_train, k=10, backend="exact", *, recall_sample=1000, random_state=0,
                 target_recall=TARGET_RECALL, **options):
        X_train = check_features(X_train, "training rows")
        check_backend(backend, {**options, "target_recall": target_recall})
        _check_k(k)
        if k > X_train.shape[0]:
            raise NeighborsError(f"k={k} exceeds the {X_train.shape[0]} training rows")
        if not isinstance(recall_sample, (int, np.integer)) or recall_sample < 0:
            raise InvalidParameterError(f"recall_sample must be a non-negative integer, got {recall_sample!r}")
        self.X_train, self.k = X_train, int(k)
        self.recall_sample, self.random_state = int(recall_sample), random_state
        self.target_recall = check_target(target_recall)
        self._exact, self._own_probe = None, None
        t0 = time.perf_counter()
        asked = backend
        backend, options = resolve(backend, options, X_train.shape[0], auto_exact_max_rows(k))
        self.decision = f"{backend} search as asked" if asked == backend else f"auto: {backend} search, " + (
            f"at most {auto_exact_max_rows(k):,} training rows" if backend == EXACT
            else f"more than {auto_exact_max_rows(k):,} training rows")
        if asked != backend and backend != EXACT and self.recall_sample and self.target_recall:
            contrast = self._probe(X_train, None).relative_contrast(min(CONTRAST_K, k) - 1, random_state)
            if contrast < AUTO_MIN_CONTRAST:
                backend, options = EXACT, {}
                self.decision = (f"auto: exact search, relative contrast {contrast:.2f} < {AUTO_MIN_CONTRAST} "
                                 "(no cluster structure: a neighbor graph would cost more than exact search)")
            else:
                self.decision += f", relative contrast {contrast:.2f}"
        entry = backend_entry(backend)
        self.backend = backend
        if "random_state" in entry.options:
            options = {"random_state": random_state, **options}
        if entry.local:
            self._index = local_index(X_train, self.k, backend, options)
        else:
            self._index = entry.index_class()(X_train, self.k, **options)
        self.approximate = self._index.approximate if entry.approximate is None else entry.approximate
        self.build_seconds = time.perf_counter() - t0

    def _probe(self, Q, X_query):
        """The recall sample of the training rows' own neighbors (kept) or of the new rows ``Q``."""
        if self._exact is None:
            self._exact = ExactIndex(self.X_train)
        if X_query is None and self._own_probe is not None:
            return self._own_probe
        probe = RecallProbe(self._exact, Q, self.k, self_excluded=X_query is None, sample=self.recall_sample,
                            random_state=self.random_state)
        if X_query is None:
            self._own_probe = probe
        return probe

    def kneighbors(self, X_query=None, k=None) -> NeighborResult:
        """The ``k`` nearest training rows of each query row.

        Parameters
        ----------
        X_query : array of shape (n_queries, d) or None
            None: the training rows' own neighbors, each row excluded by its
            index (an exact duplicate of a row stays, at distance 0).
        k : int, optional
            At most the ``k`` the index was built for (the default).

        Returns
        -------
        NeighborResult
            Timings ``build``, ``query`` and, for approximate backends,
            ``recall`` (seconds spent measuring it and planning escalation).

        Notes
        -----
        An approximate search whose measured recall is below
        :attr:`target_recall` escalates: first its query breadth (more
        candidates, larger epsilon; the training rows' own neighbors are then
        also searched through the index), then the graph (rebuilt thicker,
        with more NN-descent iterations).  Each step is first tried on the
        recall sample, which prices it (seconds per query) and predicts its
        recall; the whole query set is searched again only once the sample
        meets the target.  When a step's price, added to what the search has
        spent (the build included for the training rows' own neighbors),
        reaches the price of exact search of all queries (timed on the
        sample), the queries are searched exactly instead.  The result's
        ``effort`` and ``decision`` say where it ended and why.
        """
        k = self.k if k is None else k
        _check_k(k)
        if k > self.k:
            raise NeighborsError(f"k={k} exceeds the k={self.k} this neighbor index was built for")
        exclude_self = X_query is None
        if exclude_self:
            Q, exclude = self.X_train, np.arange(self.X_train.shape[0])
        else:
            Q, exclude = check_queries(X_query, self.X_train.shape[1]), None
        available = self.X_train.shape[0] - exclude_self
        if k > available:
            raise NeighborsError(f"k={k} exceeds the {available} training rows available as neighbors")
        timings = {"build": self.build_seconds}
        t0 = time.perf_counter()
        indices, distances = self._index.search(Q, k, exclude)
        timings["query"] = time.perf_counter() - t0
        if not (self.approximate and self.recall_sample):
            decision = self.decision if not self.approximate else f"{self.decision}; recall not measured"
            return NeighborResult(indices, distances, None, self.backend, exclude_self, timings,
                                  _effort(self._index, k), decision)
        t0 = time.perf_counter()
        probe = self._probe(Q, X_query)
        recall = probe.recall(distances)
        timings["recall"] = time.perf_counter() - t0
        escalation = _Escalation(self, probe, Q, k, exclude, timings)
        return escalation.run(indices, distances, recall)

    def _search_exactly(self, Q, k, exclude, timings):
        """Search ``Q`` exactly (the fallback of an escalation that would cost more)."""
        t0 = time.perf_counter()
        found = self._exact.search(Q, k, exclude)
        timings["exact"] = time.perf_counter() - t0
        return found

    def close(self):
        """Release what the index holds elsewhere (Dask shards)."""
        close = getattr(self._index, "close", None)
        if close is not None:
            close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _effort(index, k):
    """The settings of ``index`` for searches of ``k`` neighbors; None for exact search."""
    effort = getattr(index, "effort", None)
    return None if effort is None else effort(k)


class _Escalation:
    """One search's way to its target recall: query breadth, then a thicker graph, else exact search.

    See :meth:`NeighborIndex.kneighbors`.  An index that escalates has
    ``breadth``, ``widen()``, ``deepen()`` and ``search(Q, k, exclude, breadth)``
    (:class:`~pll.neighbors.nndescent.NNDescentIndex`,
    :class:`~pll.neighbors.sharded.ShardedIndex` with nndescent shards).
    """

    DEEPEN_COST = 2.5
    """A rebuild one step thicker costs about this many times the last build (degree x1.5, delta / 4)."""

    def __init__(self, owner, probe, Q, k, exclude, timings):
        self.owner, self.index, self.probe = owner, owner._index, probe
        self.Q, self.k, self.exclude, self.timings = Q, k, exclude, timings
        self.own = exclude is not None
        self.exact_seconds = probe.seconds_per_query * Q.shape[0]
        # What this result has cost: the training rows' own neighbors are what the graph is built for.
        self.spent = timings["query"] + (owner.build_seconds if self.own else 0.0)
        self.steps = 0

    def run(self, indices, distances, recall):
        owner, target = self.owner, self.owner.target_recall
        first = recall
        while recall < target:
            step = self._next_step()
            if step is None:
                return self._exact(f"recall {recall:.3f} < target {target:g} and no effort left")
            kind, price, sample = step
            if self.spent + price >= self.exact_seconds:
                return self._exact(f"recall {recall:.3f} < target {target:g}; {kind} would bring the search to "
                                   f"{self.spent + price:.3g} s, exact search costs {self.exact_seconds:.3g} s")
            self.steps += 1
            if kind == "wider queries":
                self.index.widen()
            else:
                t0 = time.perf_counter()
                self.index.deepen()
                seconds = time.perf_counter() - t0
                self.owner.build_seconds += seconds
                self._charge("build", seconds)
                sample = self._search_sample(self.index.breadth)
            recall = self.probe.recall(sample)
            if recall >= target:
                t0 = time.perf_counter()
                indices, distances = self.index.search(self.Q, self.k, self.exclude)
                self._charge("query", time.perf_counter() - t0)
                recall = self.probe.recall(distances)
        how = "without escalating" if not self.steps else f"after {self.steps} step(s) from recall {first:.3f}"
        decision = (f"{owner.decision}; recall {recall:.3f} >= target {target:g} {how}" if target
                    else f"{owner.decision}; recall {recall:.3f}, no target")
        return self._result(indices, distances, recall, decision)

    def _next_step(self):
        """``(kind, predicted seconds, sample distances or None)`` of the next step; None when there is none.

        A wider query is tried on the sample now: that prices it and gives its recall.
        """
        index = self.index
        if not hasattr(index, "widen"):
            return None
        if index.breadth < index.max_breadth:
            if hasattr(index, "prepare"):  # the search structures, built once at the first query: not per query
                t0 = time.perf_counter()
                index.prepare()
                self._charge("build", time.perf_counter() - t0)
            t0 = time.perf_counter()
            sample = self._search_sample(index.breadth + 1)
            seconds = time.perf_counter() - t0
            return "wider queries", seconds / max(self.probe.rows.size, 1) * self.Q.shape[0], sample
        if index.can_deepen():
            return "a thicker graph", self.DEEPEN_COST * self.owner.build_seconds + self.last_full_search, None
        return None

    @property
    def last_full_search(self):
        """Seconds of a full search at the current breadth, predicted from the last sample searched."""
        return self._per_query * self.Q.shape[0]

    _per_query = 0.0

    def _search_sample(self, breadth):
        """Distances (n_queries, k; inf outside the sample) of the sample searched at ``breadth``, timed."""
        rows = self.probe.rows
        t0 = time.perf_counter()
        _, found = self.index.search(self.Q[rows], self.k, None if self.exclude is None else self.exclude[rows],
                                     breadth)
        seconds = time.perf_counter() - t0
        self._charge("recall", seconds)
        self._per_query = seconds / max(rows.size, 1)
        distances = np.full((self.Q.shape[0], self.k), np.inf)
        distances[rows] = found
        return distances

    def _charge(self, phase, seconds):
        self.timings[phase] = self.timings.get(phase, 0.0) + seconds
        self.spent += seconds

    def _exact(self, why):
        owner = self.owner
        indices, distances = owner._search_exactly(self.Q, self.k, self.exclude, self.timings)
        effort = dict(_effort(self.index, self.k) or {}, steps=self.steps)
        return NeighborResult(indices, distances, None, EXACT, self.own, self.timings, effort,
                              f"{owner.decision}; exact search: {why}")

    def _result(self, indices, distances, recall, decision):
        effort = dict(_effort(self.index, self.k) or {}, steps=self.steps)
        return NeighborResult(indices, distances, recall, self.owner.backend, self.own, self.timings, effort, decision)


def _check_k(k):
    check_positive_int(k, "k")


def kneighbors(X_train, X_query=None, k=10, backend="exact", **options) -> NeighborResult:
    """Find the ``k`` nearest training rows of each query row.

    Parameters
    ----------
    X_train : array of shape (n_train, d)
    X_query : array of shape (n_query, d) or None
        None means the training rows' own neighbors, each row excluded by its
        index (an exact duplicate of a row is a genuine neighbor at distance 0).
    k : int
    backend : {"auto", "exact", "nndescent", "dask"}
    **options
        See :class:`NeighborIndex`.

    Returns
    -------
    NeighborResult
        Indices sorted by float64 distance, ties by lower training index;
        ``recall`` measured for approximate backends, None for exact ones.

    Examples
    --------
    >>> import numpy as np
    >>> nb = kneighbors(np.array([[0.0], [2.0], [3.0]]), np.array([[1.0]]), k=2)
    >>> nb.indices.tolist(), nb.distances.tolist()
    ([[0, 1]], [[1.0, 1.0]])
    """
    X_train = check_features(X_train, "training rows")
    if X_query is not None:
        X_query = check_queries(X_query, X_train.shape[1])
    _check_k(k)
    available = X_train.shape[0] - (X_query is None)
    if k > available:
        raise NeighborsError(f"k={k} exceeds the {available} training rows available as neighbors")
    with NeighborIndex(X_train, k, backend, **options) as index:
        return index.kneighbors(X_query, k)

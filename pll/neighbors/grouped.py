"""The nearest training row of every group (class), for each query: what a trust score measures.

Exact search screens every (query, training row) pair once with the float32
BLAS product of :mod:`pll.neighbors.screening` and keeps only the minimum of each run of :data:`CHUNK` rows of
one group.  A query's nearest row of a group lies in a chunk whose minimum
is within twice the rounding bound of the group's best chunk; when that
chunk is the only one, its rows are reranked in float64 (the same
:func:`~pll.neighbors.exact.rerank` as every backend), otherwise the query is
searched again in that group by :class:`~pll.neighbors.exact.ExactIndex`.
Integer rows and queries screen exactly (:class:`~pll.neighbors.screening.Screen`):
then the group's first chunk at the minimum holds the answer, however many
rows tie.  One pass over the training rows thus serves all groups, instead of one
search per group.
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import InvalidDataError
from ..utils.progress import blocks, track
from ..utils.validation import check_features, check_positive_int, check_queries
from .exact import ExactIndex, nearest_among, rerank
from .grouped_cells import GroupedCellIndex
from .index import NeighborIndex
from .recall import sample_rows
from .registry import EXACT, TARGET_RECALL, backend_entry, check_backend, resolve
from .screening import Screen

CHUNK = 16
"""Rows of one group whose screening distances are reduced to one minimum."""
AUTO_EXACT_MAX_ROWS = 300_000
"""``auto`` searches exactly up to this many training rows, by cells beyond (:mod:`pll.neighbors.grouped_cells`).
``benchmarks/grouped_search.py`` on this 2-core machine (20 class sets of the scale benchmark's table, 20,000
queries; seconds exact / cells build + query; how often the trust score ``ξ`` stays on the same side of 1.5):

=============  ===========  ===========  ===========  ===========
training rows  80,000       200,000      400,000      800,000
seconds        3.3 / 3.2    6.5 / 6.4    13.1 / 8.0   26.5 / 13.1
same side      1.0000       1.0000       0.9962       0.9929
=============  ===========  ===========  ===========  ===========

Up to about 10,000 rows per set the cells probed are most of the set and save nothing; beyond, exact search
grows with the rows and the cells do not (a pipeline run also queries ten times as many rows against one
build).  One pynndescent index per set was slower than exact search at 1,000,000 rows and found the same
nearest row for 60 % of the queries."""
# Training slots screened by one matrix product (a multiple of CHUNK).
_TILE_ROWS = 4096
# Bytes a block of queries may hold in chunk minima, and again in screening values.
_BLOCK_BYTES = 32 * 2**20


def nearest_by_group(X_train, groups, n_groups, X_query=None, backend="exact", *, exclude=None, report=None,
                     **options):
    """Index and distance of the nearest training row of every group, for each query row.

    Parameters
    ----------
    X_train : array of shape (n_train, d)
    groups : int array of shape (n_train,)
        Each training row's group in ``[0, n_groups)``, or -1 for a row in no group.
    n_groups : int
    X_query : array of shape (n_queries, d) or None
        None: the training rows, each excluded from its own group by index.
    backend : {"auto", "exact", "nndescent", "dask"}
        ``exact`` searches all groups in one pass (see the module);
        ``nndescent`` and ``dask`` run one :class:`~pll.neighbors.NeighborIndex`
        search per group; ``auto`` is ``exact`` up to :data:`AUTO_EXACT_MAX_ROWS`
        training rows (its option ``exact_max_rows``), beyond that the cell
        search of :mod:`pll.neighbors.grouped_cells` (approximate: a distance
        is never below the exact one).
    exclude : int array of shape (n_queries,), optional
        With ``X_query``: a training row never returned for each query, -1 for
        none (e.g. training rows given as queries, each excluding itself).
    report : dict, optional
        Filled with how ``auto``'s cell search ended (:class:`TargetedCellSearch`:
        ``agreement``, ``n_probe``, ``decision``); left empty by other searches.
    **options
        Options of :class:`~pll.neighbors.NeighborIndex` (approximate backends);
        ``target_recall`` is the cell search's target agreement with exact search.

    Returns
    -------
    indices : ndarray of shape (n_queries, n_groups), int64
        The nearest row of each group (ties: the lower index); -1 where the
        group has no row to offer.
    distances : ndarray of shape (n_queries, n_groups), float64
        Float64 Euclidean distances; inf where the index is -1.

    Examples
    --------
    >>> X = np.array([[0.0], [1.0], [5.0], [7.0]])
    >>> idx, dist = nearest_by_group(X, np.array([0, 0, 1, -1]), 2, np.array([[4.0]]))
    >>> idx.tolist(), dist.tolist()
    ([[1, 2]], [[3.0, 1.0]])
    """
    X_train, groups, Q, exclude = _check_search(X_train, groups, n_groups, X_query, exclude)
    search = _searcher(X_train, groups, n_groups, backend, options)
    found = search.search(Q, exclude)
    _report(search, report)
    return found


def _report(search, report):
    if report is not None:
        report.update(getattr(search, "report", {}))


def nearest_own_and_other(X_train, groups, n_groups, own, X_query=None, backend="exact", *, exclude=None,
                          known_own=None, report=None, **options):
    """Each query's distance to the nearest row of its own group and to the nearest row of any other group.

    The two distances a trust score compares.  Parameters as for
    :func:`nearest_by_group`, and ``own`` (int array of shape (n_queries,),
    values in ``[0, n_groups)``): each query's own group.  The result is that
    of :func:`nearest_by_group` reduced to these two, except for ``auto``
    beyond its exact threshold, whose cell search
    (:meth:`~pll.neighbors.grouped_cells.GroupedCellIndex.search_own_and_other`)
    probes the query's own group and the cells nearest it among all other
    groups, instead of every group: ``l / 2`` times less work, the same
    guarantee (a distance is never below the exact one).

    ``report`` as for :func:`nearest_by_group`, its agreement that of trust decisions.
    ``known_own`` (float array of shape (n_queries,), NaN where unknown):
    own distances the caller already has, e.g. from a neighbor list that
    holds a row of the own group; they are returned as given, and the cell
    search skips the own group for those queries.

    Returns
    -------
    own_distance, other_distance : ndarrays of shape (n_queries,), float64
        ``inf`` where no row is left to offer.
    other_group : ndarray of shape (n_queries,), int64
        The group of the nearest other row (ties: the lower group); the lowest
        group other than ``own`` when no other group has a row.
    """
    X_train, groups, Q, exclude = _check_search(X_train, groups, n_groups, X_query, exclude)
    own = np.asarray(own)
    if own.shape != (Q.shape[0],) or not np.issubdtype(own.dtype, np.integer):
        raise InvalidDataError(f"own must be an int array of shape ({Q.shape[0]},), got {own.dtype} {own.shape}")
    if own.size and not (0 <= own.min() and own.max() < n_groups):
        raise InvalidDataError(f"own groups must lie in [0, {n_groups}), found {own.min()}..{own.max()}")
    own = own.astype(np.int64)
    known = np.full(Q.shape[0], np.nan) if known_own is None else np.asarray(known_own, dtype=np.float64)
    if known.shape != (Q.shape[0],):
        raise InvalidDataError(f"known_own must have shape ({Q.shape[0]},), got {known.shape}")
    search = _searcher(X_train, groups, n_groups, backend, options)
    indices, distances = search.search_own_and_other(Q, exclude, own, need_own=np.isnan(known))
    _report(search, report)
    # No other group has a row: h̃ is the lowest group other than the query's own.
    other_group = np.where(indices[:, 1] >= 0, groups[np.maximum(indices[:, 1], 0)], (own == 0).astype(np.int64))
    return np.where(np.isnan(known), distances[:, 0], known), distances[:, 1], other_group


def _check_search(X_train, groups, n_groups, X_query, exclude):
    """Checked arrays of a grouped search: training rows, int64 groups, queries and int64 excluded rows."""
    X_train = check_features(X_train, "training rows")
    check_positive_int(n_groups, "n_groups")
    groups = np.asarray(groups)
    if groups.shape != (X_train.shape[0],) or not np.issubdtype(groups.dtype, np.integer):
        raise InvalidDataError(
            f"groups must be an int array of shape ({X_train.shape[0]},), got {groups.dtype} {groups.shape}"
        )
    if groups.size and not (-1 <= groups.min() and groups.max() < n_groups):
        raise InvalidDataError(f"groups must lie in [-1, {n_groups}), found {groups.min()}..{groups.max()}")
    groups = groups.astype(np.int64)
    if X_query is None:
        return X_train, groups, X_train, np.arange(X_train.shape[0])
    Q = check_queries(X_query, X_train.shape[1])
    exclude = np.full(Q.shape[0], -1) if exclude is None else np.asarray(exclude)
    if exclude.shape != (Q.shape[0],) or not np.issubdtype(exclude.dtype, np.integer):
        raise InvalidDataError(f"exclude must be an int array of shape ({Q.shape[0]},), got {exclude.shape}")
    return X_train, groups, Q, exclude.astype(np.int64)


def _searcher(X_train, groups, n_groups, backend, options):
    """What searches the groups for ``backend``: an index with ``search`` and ``search_own_and_other``."""
    check_backend(backend, options)
    picked, options = resolve(backend, options, X_train.shape[0], AUTO_EXACT_MAX_ROWS)
    if picked == EXACT:
        return GroupedExactIndex(X_train, groups, n_groups)
    if backend_entry(backend).index is None:  # auto, beyond its exact threshold
        random_state = options.get("random_state", 0)
        cells = GroupedCellIndex(X_train, groups, n_groups, random_state=random_state)
        target, sample = options.get("target_recall", TARGET_RECALL), options.get("recall_sample", 1000)
        if not (target and sample):
            return cells
        return TargetedCellSearch(cells, X_train, groups, n_groups, target, sample, random_state)
    return EachGroupSearch(X_train, groups, n_groups, picked, options)


AGREEMENT_THRESHOLD = 1.5
"""The trust score's default threshold (:data:`pll.reject.trust_score.DEFAULT_THRESHOLD`): a query's decision is the
side of it on which its ratio of other to own distance falls."""
WIDER_PROBE = 2
"""Each escalation step of the cell search probes this many times as many cells."""


class TargetedCellSearch:
    """The cell search (:class:`~pll.neighbors.grouped_cells.GroupedCellIndex`) held to a target agreement with exact search.

    The agreement is measured on a seeded sample of each search's queries, against
    :class:`GroupedExactIndex`: for :meth:`search_own_and_other`, the fraction
    of sampled queries whose trust decision (other over own distance against
    :data:`AGREEMENT_THRESHOLD`; the other distance alone where the caller
    knows the own one) is the same; for :meth:`search`, the fraction of
    (query, group) pairs whose nearest distance is exact.  While below the
    target, the cells probed grow :data:`WIDER_PROBE` times, each step first
    tried and timed on the sample; once a step's price would reach that of
    exact search of all queries (timed on the sample too), the queries are
    searched exactly.  :attr:`report` says how the last search ended:
    ``agreement`` (None when searched exactly), ``n_probe`` and ``decision``.
    """

    def __init__(self, cells, X_train, groups, n_groups, target, sample, random_state):
        t0 = time.perf_counter()
        self.cells, self.target, self.sample, self.random_state = cells, target, sample, random_state
        self.exact = GroupedExactIndex(X_train, groups, n_groups)
        self.build_seconds = time.perf_counter() - t0
        self.max_probe = max(int(np.bincount(cells.cell_group, minlength=n_groups).max(initial=1)), 1)
        self.report = {}

    def search(self, Q, exclude):
        """Nearest row of every group for each row of ``Q`` (the contract of :func:`nearest_by_group`)."""

        def agreement(found, true):
            return float(np.mean(np.isclose(found[1], true[1], rtol=1e-12, atol=0) | (found[1] == true[1])))

        return self._run(Q, lambda search, q: search.search(Q[q], exclude[q]), agreement)

    def search_own_and_other(self, Q, exclude, own, need_own=None):
        """Nearest row of the own group and of any other group (the contract of
        :meth:`~pll.neighbors.grouped_cells.GroupedCellIndex.search_own_and_other`)."""
        need_own = np.ones(Q.shape[0], dtype=bool) if need_own is None else np.asarray(need_own, dtype=bool)
        sampled = {}

        def run(search, q):
            sampled["need"] = need_own[q]
            return search.search_own_and_other(Q[q], exclude[q], own[q], need_own[q])

        def agreement(found, true):
            (_, d), (_, e) = found, true
            with np.errstate(divide="ignore", invalid="ignore"):
                side = d[:, 1] >= AGREEMENT_THRESHOLD * d[:, 0]
                true_side = e[:, 1] >= AGREEMENT_THRESHOLD * e[:, 0]
            same_other = np.isclose(d[:, 1], e[:, 1], rtol=1e-12, atol=0) | (d[:, 1] == e[:, 1])
            return float(np.mean(np.where(sampled["need"], side == true_side, same_other)))

        return self._run(Q, run, agreement)

    def _run(self, Q, run, agreement):
        """Escalate the cells probed until ``agreement`` on the sample meets the target, else search exactly."""
        cells, n_query = self.cells, Q.shape[0]
        rows = sample_rows(n_query, self.sample, self.random_state)
        true, exact_price = self._exact_sample(run, rows, n_query)
        t0 = time.perf_counter()
        reached = agreement(run(cells, rows), true)
        spent = time.perf_counter() - t0
        first, steps = reached, 0
        while reached < self.target:
            if cells.n_probe >= self.max_probe:
                return self._exactly(run, n_query, f"agreement {reached:.4f} < target {self.target:g} with every "
                                     "cell probed")
            before, cells.n_probe = cells.n_probe, min(cells.n_probe * WIDER_PROBE, self.max_probe)
            t0 = time.perf_counter()
            reached = agreement(run(cells, rows), true)
            seconds = time.perf_counter() - t0
            spent += seconds
            price = seconds / max(rows.size, 1) * n_query
            if spent + price >= exact_price:
                cells.n_probe = before
                return self._exactly(run, n_query, f"agreement < target {self.target:g}; probing {before * WIDER_PROBE} "
                                     f"cells would cost {spent + price:.3g} s, exact search {exact_price:.3g} s")
            steps += 1
        how = "without escalating" if not steps else f"after {steps} step(s) from {first:.4f}"
        found = run(cells, np.arange(n_query))
        self.report = {"agreement": reached, "n_probe": cells.n_probe, "steps": steps,
                       "decision": f"cells: agreement {reached:.4f} >= target {self.target:g} {how}"}
        return found

    def _exact_sample(self, run, rows, n_query):
        """Exact answers of the sample, and the price of exact search of all ``n_query`` queries timed on it."""
        t0 = time.perf_counter()
        true = run(self.exact, rows)
        return true, (time.perf_counter() - t0) / max(rows.size, 1) * n_query

    def _exactly(self, run, n_query, why):
        self.report = {"agreement": None, "n_probe": self.cells.n_probe, "decision": f"exact search: {why}"}
        return run(self.exact, np.arange(n_query))


class AllGroupsSearch:
    """A search of every group at once, whose own-and-other search is that search reduced to two groups."""

    def search_own_and_other(self, Q, exclude, own, need_own=None):
        """Nearest row of the own group ``own`` and of any other group (ties: the lower group), shape (n, 2) each.

        The contract of :meth:`~pll.neighbors.grouped_cells.GroupedCellIndex.search_own_and_other`;
        the own group is found for every query, whatever ``need_own`` says (one pass serves all groups).
        """
        indices, distances = self.search(Q, exclude)
        rows = np.arange(Q.shape[0])
        own_index, own_distance = indices[rows, own], distances[rows, own]
        distances[rows, own] = np.inf
        other = np.argmin(distances, axis=1)
        other_distance = distances[rows, other]
        other_index = np.where(np.isinf(other_distance), -1, indices[rows, other])  # no other group has a row
        return np.column_stack([own_index, other_index]), np.column_stack([own_distance, other_distance])


class EachGroupSearch(AllGroupsSearch):
    """One :class:`~pll.neighbors.NeighborIndex` search per group, with an approximate ``backend``.

    A query whose excluded row is in the group takes its second neighbor.
    """

    def __init__(self, X_train, groups, n_groups, backend, options):
        self.X_train, self.groups, self.n_groups = X_train, groups, n_groups
        self.backend, self.options = backend, options

    def search(self, Q, exclude):
        """Nearest row of every group for each row of ``Q`` (see :func:`nearest_by_group`)."""
        indices = np.full((Q.shape[0], self.n_groups), -1, dtype=np.int64)
        distances = np.full((Q.shape[0], self.n_groups), np.inf)
        rows = np.arange(Q.shape[0])
        for g in range(self.n_groups):
            members = np.flatnonzero(self.groups == g)
            if members.size == 0:
                continue
            k = min(2, members.size)
            with NeighborIndex(self.X_train[members], k, self.backend, **self.options) as index:
                nb = index.kneighbors(Q, k)
            found = np.where(nb.indices >= 0, members[nb.indices], -1)
            valid = (found >= 0) & (found != exclude[:, None])
            first = valid.argmax(axis=1)
            kept = valid[rows, first]
            indices[:, g] = np.where(kept, found[rows, first], -1)
            distances[:, g] = np.where(kept, nb.distances[rows, first], np.inf)
        return indices, distances


class GroupedExactIndex(AllGroupsSearch):
    """Exact nearest row of every group: float32 BLAS screening, certified float64 reranking.

    The member rows' screening rows (:mod:`pll.neighbors.screening`) are laid
    out group by group, each group padded to whole chunks of :data:`CHUNK`
    rows.

    Parameters
    ----------
    X_train : array of shape (n_train, d), float64
    groups : int64 array of shape (n_train,)
        Group of each row in ``[0, n_groups)``; -1 for none.
    n_groups : int
    """

    def __init__(self, X_train, groups, n_groups):
        self.X_train, self.n_groups = X_train, n_groups
        n, d = X_train.shape
        members = np.flatnonzero(groups >= 0)
        members = members[np.argsort(groups[members], kind="stable")]
        sizes = np.bincount(groups[members], minlength=n_groups)
        chunks = -(-sizes // CHUNK)
        self.group_chunks = np.concatenate([[0], np.cumsum(chunks)])
        # Padded position of each member: its group's first slot plus its rank within the group.
        first_member = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        slot = np.repeat(self.group_chunks[:-1] * CHUNK - first_member, sizes) + np.arange(members.size)
        self.rows = np.full(self.group_chunks[-1] * CHUNK, -1, dtype=np.int64)
        self.rows[slot] = members
        self.slot_of_row = np.full(n, -1, dtype=np.int64)
        self.slot_of_row[members] = slot
        self.pads = np.flatnonzero(self.rows < 0)
        self.screen = Screen(X_train[members])
        self.A = np.zeros((self.rows.size, d + 1), dtype=np.float32)
        self.A[slot] = self.screen.rows
        self.sq = np.zeros(self.rows.size)
        self.sq[slot] = self.screen.sq
        self._group_index = {}

    def search(self, Q, exclude):
        """Nearest row of every group for each row of ``Q`` (see :func:`nearest_by_group`).

        ``exclude`` (int array of shape (n_queries,), -1 for none) names a
        training row never returned for each query.
        """
        n_query, d = Q.shape
        indices = np.full((n_query, self.n_groups), -1, dtype=np.int64)
        distances = np.full((n_query, self.n_groups), np.inf)
        if self.rows.size == 0:
            return indices, distances
        B, sq_q, gamma = self.screen.queries(Q)
        excluded_slot = np.where(exclude >= 0, self.slot_of_row[exclude], -1)
        step = max(1, _BLOCK_BYTES // (4 * max(self.group_chunks[-1], min(_TILE_ROWS, self.rows.size))))
        crowded = [[] for _ in range(self.n_groups)]
        for block in track(blocks(n_query, step), "exact search per group"):
            rows = np.arange(block.start, block.stop)
            minima, at = self._chunk_minima(np.ascontiguousarray(B[rows].T), excluded_slot[rows])
            for g in range(self.n_groups):
                lo, hi = self.group_chunks[g], self.group_chunks[g + 1]
                if lo < hi:
                    rest = self._certify(g, minima[lo:hi], at[lo:hi], rows, Q, exclude, sq_q, gamma, indices,
                                         distances)
                    crowded[g] += [rest] if rest.size else []
        for g, queries in enumerate(crowded):
            if queries:
                self._search_group(g, Q, np.concatenate(queries), exclude, indices, distances)
        return indices, distances

    def _chunk_minima(self, Bt, excluded_slot):
        """Float32 screening values reduced to each chunk's minimum, shape (n_chunks, n_queries), and the
        position in its chunk of each minimum's first row (uint8, same shape)."""
        n_slots, n_query = self.rows.size, Bt.shape[1]
        minima = np.empty((n_slots // CHUNK, n_query), dtype=np.float32)
        at = np.empty(minima.shape, dtype=np.uint8)
        tile = np.empty((min(_TILE_ROWS, n_slots), n_query), dtype=np.float32)
        columns = np.arange(n_query)
        for lo in range(0, n_slots, _TILE_ROWS):
            hi = min(lo + _TILE_ROWS, n_slots)
            part = tile[: hi - lo]
            np.matmul(self.A[lo:hi], Bt, out=part)
            part[self.pads[np.searchsorted(self.pads, lo) : np.searchsorted(self.pads, hi)] - lo] = np.inf
            hit = (excluded_slot >= lo) & (excluded_slot < hi)
            part[excluded_slot[hit] - lo, columns[hit]] = np.inf
            chunks = part.reshape(-1, CHUNK, n_query)
            first = chunks.argmin(axis=1)
            at[lo // CHUNK : hi // CHUNK] = first
            minima[lo // CHUNK : hi // CHUNK] = np.take_along_axis(chunks, first[:, None], 1)[:, 0]
        return minima, at

    def _certify(self, g, minima, at, rows, Q, exclude, sq_q, gamma, indices, distances):
        """Nearest row of group ``g`` for the queries ``rows`` whose best chunk has no rival within the bound.

        ``minima`` holds the group's chunk minima, shape (n_chunks_g, rows.size),
        and ``at`` their positions in their chunks.  The best chunk's first row
        at the minimum bounds the nearest exact value from above
        (:class:`~pll.neighbors.screening.Screen`); a chunk whose minimum
        lies beyond that bound plus the rounding cannot hold the nearest row.
        With exact values (``gamma`` 0) that row is the answer itself, the
        lowest index at the least distance; otherwise a query with a single
        chunk within the bound has its chunk reranked in float64.  Returns the
        other queries, whose rivals need :meth:`_search_group`.
        """
        columns = np.arange(rows.size)
        best = minima.argmin(axis=0)
        lowest = minima[best, columns]
        slot = (self.group_chunks[g] + best) * CHUNK + at[best, columns]
        gam = gamma[rows]
        exact = gam == 0
        if exact.any():
            q = rows[exact]
            dist = self.screen.exact_distances(lowest[exact], sq_q[q])
            indices[q, g], distances[q, g] = np.where(np.isinf(dist), -1, self.rows[slot[exact]]), dist
        margin = self.screen.margin(sq_q[rows], gam, self.sq[slot])
        single = ~exact & ((minima <= lowest + margin).sum(axis=0) == 1)
        first = (self.group_chunks[g] + best[single]) * CHUNK
        q = rows[single]
        idx, dist = rerank(self.X_train, Q[q], self.rows[first[:, None] + np.arange(CHUNK)], 1, exclude=exclude[q])
        indices[q, g], distances[q, g] = idx[:, 0], dist[:, 0]
        return rows[~single & ~exact]

    def _search_group(self, g, Q, queries, exclude, indices, distances):
        """Exact search of group ``g`` for queries whose screening left near-ties across chunks.

        The group's :class:`~pll.neighbors.exact.ExactIndex` is kept for the
        index's later searches (its own rows, then new rows).
        """
        members = self.rows[self.group_chunks[g] * CHUNK : self.group_chunks[g + 1] * CHUNK]
        members = members[members >= 0]
        if g not in self._group_index:
            self._group_index[g] = ExactIndex(self.X_train[members])
        indices[queries, g], distances[queries, g] = nearest_among(
            self.X_train, members, Q[queries], exclude[queries], self._group_index[g]
        )

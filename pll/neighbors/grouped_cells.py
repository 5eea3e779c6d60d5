"""Approximate nearest row of every group: each group cut into cells, each query searching the cells nearest it.

What a trust score needs at scale (:func:`~pll.neighbors.nearest_by_group`
with ``auto`` beyond its exact threshold): for every query, its nearest row in
each of ``l`` groups.  Exact search costs ``n_queries × n_train × d``
whatever the groups; one approximate index per group (pynndescent) is built
for queries like its rows and finds, for a query far outside the group, the
same nearest row only 60–75 % of the time.

Here each group's rows are split into cells of about :data:`CELL_ROWS` rows
by a few Lloyd iterations (k-means) on the group alone, and a query searches
exactly the :data:`N_PROBE` cells of each group whose centers lie nearest it
(the inverted-file scheme of product-quantization search, without the
quantization).  A query's nearest row of a group lies in a cell whose center
is near the query, so few cells hold it; the work falls to about
``n_queries × l × N_PROBE × CELL_ROWS × d``, and the matrix products stay large
(all queries that probe a cell are searched against it at once).  A row that
a query does not probe is never returned, so a distance is never below the
exact one; when every cell of the group is probed (``n_probe >= n_cells``,
e.g. groups of at most ``n_probe × cell_rows`` rows) it is the exact one but
for rows whose squared distances the float32 screening cannot tell apart
(within its rounding bound, :func:`~pll.neighbors.exact.rounding_bound`).
A query whose probed cells hold only its excluded row (a training row
scored against its own set) searches that group exactly.
Candidates are screened in float32 and the chosen row of each group is
reranked in float64 (:func:`~pll.neighbors.exact.rerank`), as every backend
returns distances.  ``benchmarks/trust_class_sets.py`` measures its agreement
with exact search.  Blocks of queries, and the groups' cells, are spread over
one thread per CPU (:func:`~pll.utils.progress.track_in_parallel`); the results do
not depend on the threads.
"""

from __future__ import annotations

import numpy as np

from ..utils.progress import blocks, track_in_parallel
from .exact import nearest_among, rerank
from .screening import screening_queries, screening_rows

CELL_ROWS = 256
"""Rows per cell, on average: the unit of exact search."""
N_PROBE = 32
"""Cells of each group a query searches."""
LLOYD_ITERATIONS = 4
"""k-means iterations that place the cells of a group (from centers drawn among its rows)."""
# Queries searched together: their screening values against one cell stay small.
_QUERY_BLOCK = 16_384
# Queries whose distances to every cell center are held at once (own and other groups).
_CENTER_BLOCK = 2048


def _cells(X, initial):
    """Centers (float64, shape (n_cells, d)) and each row's cell: Lloyd's iterations from the rows ``initial`` of ``X``."""
    n_cells = initial.size
    centers = X[initial].astype(np.float64)
    for _ in range(LLOYD_ITERATIONS + 1):
        values = X @ centers.T  # becomes |c|^2 - 2 x.c in place: the squared distance less |x|^2
        values *= -2.0
        values += np.einsum("ij,ij->i", centers, centers)
        cell = np.argmin(values, axis=1)
        counts = np.bincount(cell, minlength=n_cells)
        # Sums per cell, column by column: np.add.at does the same additions many times slower.
        sums = np.stack([np.bincount(cell, weights=column, minlength=n_cells) for column in X.T], axis=1)
        filled = counts > 0
        centers[filled] = sums[filled] / counts[filled, None]  # an empty cell keeps its center
    return centers, cell


class GroupedCellIndex:
    """Each group's rows in cells; queries search the ``n_probe`` nearest cells of every group (see the module).

    Parameters
    ----------
    X_train : array of shape (n_train, d), float64
    groups : int64 array of shape (n_train,)
        Group of each row in ``[0, n_groups)``; -1 for none.
    n_groups : int
    cell_rows : int, default=:data:`CELL_ROWS`
    n_probe : int, default=:data:`N_PROBE`
    random_state : int, default=0
        Seeds the cells' initial centers.
    """

    def __init__(self, X_train, groups, n_groups, *, cell_rows=CELL_ROWS, n_probe=N_PROBE, random_state=0):
        self.X_train, self.n_groups, self.n_probe = X_train, n_groups, n_probe
        rng = np.random.default_rng(random_state)
        self.center = X_train[groups >= 0].mean(axis=0) if (groups >= 0).any() else np.zeros(X_train.shape[1])
        members_of = [np.flatnonzero(groups == g) for g in range(n_groups)]
        # Initial centers drawn group by group, in order: the cells do not depend on the threads that place them.
        initial = [rng.choice(m.size, max(1, -(-m.size // cell_rows)), replace=False) if m.size else None
                   for m in members_of]
        placed = [None] * n_groups

        def place(group_slice):
            for g in range(group_slice.start, group_slice.stop):
                if members_of[g].size:
                    placed[g] = _cells(X_train[members_of[g]] - self.center, initial[g])

        track_in_parallel(place, blocks(n_groups, 1), "cells, group by group")
        centers, cell_rows_of, cell_group = [], [], []
        for g, members in enumerate(members_of):
            if members.size == 0:
                continue
            n_cells = initial[g].size
            found, cell = placed[g]
            order = np.argsort(cell, kind="stable")
            bounds = np.searchsorted(cell[order], np.arange(n_cells + 1))
            for c in range(n_cells):
                if bounds[c] < bounds[c + 1]:
                    centers.append(found[c])
                    cell_rows_of.append(members[order[bounds[c] : bounds[c + 1]]])
                    cell_group.append(g)
        d = X_train.shape[1]
        self.centers = np.array(centers).reshape(-1, d)
        self.cell_group = np.array(cell_group, dtype=np.int64)
        self.cell_rows = cell_rows_of
        self.screening = [screening_rows(X_train[rows], self.center)[0] for rows in cell_rows_of]
        # Cells are chosen in float32: which of two nearly equidistant cells is probed does not matter.
        self._centers32 = self.centers.astype(np.float32)
        self._sq_centers = np.einsum("ij,ij->i", self.centers, self.centers).astype(np.float32)

    def search(self, Q, exclude):
        """Approximate nearest row of every group for each row of ``Q`` (the contract of :func:`nearest_by_group`).

        ``exclude`` (int array of shape (n_queries,), -1 for none) names a
        training row never returned for each query.
        """
        n_query = Q.shape[0]
        indices = np.full((n_query, self.n_groups), -1, dtype=np.int64)
        distances = np.full((n_query, self.n_groups), np.inf)
        if not self.cell_rows:
            return indices, distances

        def candidates(rows):
            indices[rows] = self._candidates(Q[rows], exclude[rows])

        track_in_parallel(candidates, blocks(n_query, _QUERY_BLOCK), "cell search per group")
        for g in range(self.n_groups):
            found = indices[:, g] >= 0
            idx, dist = rerank(self.X_train, Q[found], indices[found, g : g + 1], 1)
            indices[found, g], distances[found, g] = idx[:, 0], dist[:, 0]
            self._search_unfound(g, Q, exclude, np.flatnonzero(~found), indices, distances)
        return indices, distances

    def search_own_and_other(self, Q, exclude, own, need_own=None):
        """Approximate nearest row of its own group and of any other group, for each row of ``Q``.

        The contract of :func:`~pll.neighbors.grouped.nearest_own_and_other`.
        A query probes the :attr:`n_probe` cells of its group ``own`` nearest
        it, and the ``n_probe`` nearest cells of all other groups together:
        the nearest other row lies in a cell near the query whatever its
        group, so the work is that of two groups, not of ``l``.  Queries
        outside ``need_own`` (bool, shape (n,); default: all) search the
        other groups only, and get -1 and inf in the own slot.
        """
        n_query = Q.shape[0]
        need_own = np.ones(n_query, dtype=bool) if need_own is None else np.asarray(need_own, dtype=bool)
        best = np.full((n_query, 2), np.inf, dtype=np.float32)
        chosen = np.full((n_query, 2), -1, dtype=np.int64)

        def probe_own_and_other(rows):
            queries, cells, slots = [], [], []
            for lo in range(rows.start, rows.stop, _CENTER_BLOCK):
                part = np.arange(lo, min(lo + _CENTER_BLOCK, rows.stop))
                to_center = self._center_values(Q[part])
                mine = self.cell_group[None, :] == own[part, None]
                for slot, allowed, asking in ((0, mine, need_own[part]), (1, ~mine, slice(None))):
                    q, c = _nearest_allowed(np.where(allowed[asking], to_center[asking], np.float32(np.inf)),
                                            self.n_probe)
                    queries.append(part[asking][q] - rows.start), cells.append(c)
                    slots.append(np.full(q.size, slot))
            B, _ = screening_queries(Q[rows], self.center)
            self._probe(B, exclude[rows], np.concatenate(queries), np.concatenate(cells), np.concatenate(slots),
                        best[rows], chosen[rows])

        if self.cell_rows:
            track_in_parallel(probe_own_and_other, blocks(n_query, _QUERY_BLOCK), "cell search, own and other group")
        distances = np.full((n_query, 2), np.inf)
        for slot, asking in ((0, need_own), (1, np.ones(n_query, dtype=bool))):
            found = chosen[:, slot] >= 0
            idx, dist = rerank(self.X_train, Q[found], chosen[found, slot : slot + 1], 1)
            chosen[found, slot], distances[found, slot] = idx[:, 0], dist[:, 0]
            for g in np.unique(own[asking & ~found]):  # probed cells held nothing but the excluded row
                queries = np.flatnonzero(asking & ~found & (own == g))
                cells = self.cell_group == g if slot == 0 else self.cell_group != g
                chosen[queries, slot], distances[queries, slot] = self._nearest_exactly(cells, Q, queries, exclude)
        return chosen, distances

    def _center_values(self, Q, cells=slice(None)):
        """Squared distances from each query to the centers of ``cells`` (default: all), less ``|q|^2``."""
        centered = (Q - self.center).astype(np.float32)
        return self._sq_centers[None, cells] - np.float32(2.0) * centered @ self._centers32[cells].T

    def _search_unfound(self, g, Q, exclude, queries, indices, distances):
        """Exact search of group ``g`` for queries whose probed cells held nothing but their excluded row.

        So a group with a row to offer always gives one, as in exact search.
        """
        if queries.size:
            indices[queries, g], distances[queries, g] = self._nearest_exactly(self.cell_group == g, Q, queries, exclude)

    def _nearest_exactly(self, cells, Q, queries, exclude):
        """Exact nearest row among the rows of the cells selected by the bool mask ``cells`` (-1, inf: none)."""
        members = [self.cell_rows[c] for c in np.flatnonzero(cells)]
        if not members or queries.size == 0:
            return np.full(queries.size, -1, dtype=np.int64), np.full(queries.size, np.inf)
        return nearest_among(self.X_train, np.sort(np.concatenate(members)), Q[queries], exclude[queries])

    def _candidates(self, Q, exclude):
        """The screened nearest row of every group among the probed cells, shape (n, n_groups); -1 for none."""
        n = Q.shape[0]
        B, _ = screening_queries(Q, self.center)
        best = np.full((n, self.n_groups), np.inf, dtype=np.float32)
        chosen = np.full((n, self.n_groups), -1, dtype=np.int64)
        for g in range(self.n_groups):
            cells = np.flatnonzero(self.cell_group == g)
            if cells.size:
                q, c = _nearest_allowed(self._center_values(Q, cells), self.n_probe)
                self._probe(B, exclude, q, cells[c], np.full(q.size, g), best, chosen)
        return chosen

    def _probe(self, B, exclude, queries, cells, slots, best, chosen):
        """Screen every (query, cell) pair; keep in ``best``/``chosen[query, slot]`` the least value and its row.

        Pairs are taken cell by cell, so that each cell is one matrix product
        with all queries that probe it.  A query probes a cell at most once.
        """
        order = np.argsort(cells, kind="stable")
        cells, queries, slots = cells[order], queries[order], slots[order]
        starts = np.flatnonzero(np.r_[True, cells[1:] != cells[:-1]]) if cells.size else np.empty(0, dtype=np.int64)
        for lo, hi in zip(starts, np.r_[starts[1:], cells.size]):
            c, q, s = cells[lo], queries[lo:hi], slots[lo:hi]
            values = B[q] @ self.screening[c].T  # |x|^2 - 2 q.x: the squared distance less |q|^2
            members = self.cell_rows[c]
            mine = exclude[q] >= 0
            if mine.any():
                values[mine] = np.where(members[None, :] == exclude[q[mine], None], np.inf, values[mine])
            j = values.argmin(axis=1)
            value = values[np.arange(q.size), j]
            better = value < best[q, s]
            best[q[better], s[better]] = value[better]
            chosen[q[better], s[better]] = members[j[better]]


def _nearest_allowed(values, n_probe):
    """The (query, cell) pairs of each query's ``n_probe`` cells with the least finite ``values``."""
    probe = min(n_probe, values.shape[1])
    near = np.argpartition(values, probe - 1, axis=1)[:, :probe]
    queries = np.repeat(np.arange(values.shape[0]), probe)
    cells = near.ravel()
    finite = np.isfinite(values[queries, cells])
    return queries[finite], cells[finite]

"""The nearest row of every class set, exact against cells: where ``auto`` should switch, and what it costs in agreement.

What the trust score searches (:func:`pll.neighbors.nearest_by_group`): for
each query, the nearest training row of each of 20 class sets.  Data: the
scale benchmark's synthetic table (:func:`pll.data.synthetic.make_partial_label_table`,
32 features, 20 overlapping classes), min-max scaled as the pipeline does,
80 % training rows grouped by their class, 20,000 new queries.  For each size
the script times the exact grouped search (:class:`~pll.neighbors.grouped.GroupedExactIndex`)
and the cell search (:class:`~pll.neighbors.grouped_cells.GroupedCellIndex`,
build and queries apart), and prints how often the cells return the same row,
the 99th percentile of their distances' relative excess, and what matters for
the trust score: how often ``ξ = d(nearest other set) / d(own set)`` (own set:
the query's class) falls on the same side of the default threshold 1.5, and the
99th percentile of ``ξ``'s relative error.  The ratio is exact seconds over
cell seconds, measured in the same run.  A second line per size does the same
for what the trust score now asks (:func:`pll.neighbors.grouped.nearest_own_and_other`):
only the query's own set and the nearest other set, the cells probed in its own
set and among all others (``search_own_and_other``, on the same index).

Run: ``.venv/bin/python benchmarks/grouped_search.py`` (``--sizes 50000``: a quick check).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pll.data.synthetic import make_partial_label_table
from pll.neighbors.grouped import GroupedExactIndex
from pll.neighbors.grouped_cells import CELL_ROWS, N_PROBE, GroupedCellIndex
from pll.reject.trust_score import DEFAULT_THRESHOLD

N_QUERIES = 20_000


def data(n):
    table = make_partial_label_table(n, random_state=0)
    X = table[[c for c in table.columns if c.startswith("x")]].to_numpy(np.float64)
    X = (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0))
    y = table["label"].astype(int).to_numpy()
    cut = int(0.8 * n)
    return X[:cut], y[:cut], X[cut : cut + N_QUERIES], y[cut : cut + N_QUERIES]


def trust(distances, own):
    rows = np.arange(own.size)
    other = distances.copy()
    other[rows, own] = np.inf
    return other.min(axis=1) / (distances[rows, own] + 1e-12)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 250_000, 500_000, 1_000_000])
    parser.add_argument("--cell-rows", type=int, default=CELL_ROWS)
    parser.add_argument("--probe", type=int, default=N_PROBE)
    args = parser.parse_args()
    print(f"cells of {args.cell_rows} rows, {args.probe} probed per set; {N_QUERIES} queries, 20 sets")
    print("training rows | exact s | cells build + query s | ratio | same row | distance excess p99 | "
          "same side of 1.5 | trust error p99")
    for n in args.sizes:
        X, groups, Q, y = data(n)
        none = np.full(Q.shape[0], -1)
        t0 = time.perf_counter()
        exact_idx, exact = GroupedExactIndex(X, groups, 20).search(Q, none)
        t_exact = time.perf_counter() - t0
        t0 = time.perf_counter()
        index = GroupedCellIndex(X, groups, 20, cell_rows=args.cell_rows, n_probe=args.probe)
        t_build = time.perf_counter() - t0
        t0 = time.perf_counter()
        cell_idx, cells = index.search(Q, none)
        t_query = time.perf_counter() - t0
        report(f"{X.shape[0]:,}", t_exact, t_build, t_query, cell_idx == exact_idx, cells / exact,
               trust(exact, y), trust(cells, y))
        t0 = time.perf_counter()
        pair_idx, pair = index.search_own_and_other(Q, none, y)
        t_pair = time.perf_counter() - t0
        rows = np.arange(y.size)
        other = exact.copy()
        other[rows, y] = np.inf
        exact_pair = np.column_stack([exact[rows, y], other.min(axis=1)])
        exact_pair_idx = np.column_stack([exact_idx[rows, y], exact_idx[rows, other.argmin(axis=1)]])
        report("own + other", t_exact, t_build, t_pair, pair_idx == exact_pair_idx, pair / exact_pair,
               trust(exact, y), pair[:, 1] / (pair[:, 0] + 1e-12))


def report(label, t_exact, t_build, t_query, same, excess, xi_exact, xi_cells):
    """One line of the table: times, their ratio, agreement of rows, distances and trust scores."""
    side = np.mean((xi_exact > DEFAULT_THRESHOLD) == (xi_cells > DEFAULT_THRESHOLD))
    print(f"{label:>13} | {t_exact:7.1f} | {t_build:5.1f} + {t_query:5.1f} | "
          f"{t_exact / (t_build + t_query):5.2f} | {np.mean(same):8.3f} | "
          f"{np.quantile(excess - 1, 0.99):19.3f} | {side:16.4f} | "
          f"{np.quantile(np.abs(xi_cells / xi_exact - 1), 0.99):15.4f}", flush=True)


if __name__ == "__main__":
    main()

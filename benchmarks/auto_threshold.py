"""Where ``auto`` should switch from exact to approximate search: both backends at several sizes, equal recall.

Data: the scale benchmark's synthetic table (:func:`pll.data.synthetic.make_partial_label_table`,
32 features, 20 classes), min-max scaled as the pipeline does, 80 % training rows and 20 % queries.
For each size N and each k (10: PL-kNN and DST-PLL; 50: PL A-kNN) the script times what a run does
with one index: the training rows' own k-NN graph plus the queries, once with exact search and once
with warm pynndescent (compiled beforehand).  pynndescent runs with the project's defaults first and
with larger settings until its recall@k (measured on 1,000 queries of each kind) reaches 0.98, so the
two are compared at equal recall.  Printed: seconds of each and their ratio.

Run: ``.venv/bin/python benchmarks/auto_threshold.py`` (``--sizes 20000 50000``: a quick check).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pll.data.synthetic import make_partial_label_table
from pll.neighbors import NeighborIndex

RECALL_GOAL = 0.98
# pynndescent settings tried in turn, cheapest first, until the recall goal is met.
LADDER = ({}, {"n_trees": 32, "extra_graph": 6, "epsilon": 0.4}, {"n_trees": 48, "extra_graph": 12, "epsilon": 0.5})


def data(n):
    table = make_partial_label_table(n, random_state=0)
    X = table[[c for c in table.columns if c.startswith("x")]].to_numpy(np.float64)
    X = (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0))
    cut = int(0.8 * n)
    return X[:cut], X[cut:]


def run(X, Q, k, backend, options):
    t0 = time.perf_counter()
    with NeighborIndex(X, k, backend, recall_sample=1000, **options) as index:
        own, new = index.kneighbors(None), index.kneighbors(Q)
    seconds = time.perf_counter() - t0 - own.timings.get("recall", 0.0) - new.timings.get("recall", 0.0)
    recall = None if own.recall is None else min(own.recall, new.recall)
    return seconds, recall


def nndescent_options(step, k):
    options = dict(step)
    extra = options.pop("extra_graph", None)
    if extra is not None:
        options["n_neighbors"] = k + 4 + extra
    return options


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[25_000, 50_000, 100_000, 200_000])
    parser.add_argument("--ks", type=int, nargs="+", default=[10, 50])
    args = parser.parse_args()
    warm = data(3000)
    t0 = time.perf_counter()
    run(*warm, 10, "nndescent", {})
    print(f"pynndescent compilation (first use in this process): {time.perf_counter() - t0:.1f} s")
    print("| N | k | exact s | nndescent s | nndescent settings | recall | exact / nndescent |")
    print("| - | - | - | - | - | - | - |")
    for n in args.sizes:
        X, Q = data(n)
        for k in args.ks:
            exact, _ = run(X, Q, k, "exact", {})
            for step in LADDER:
                options = nndescent_options(step, k)
                approx, recall = run(X, Q, k, "nndescent", options)
                if recall >= RECALL_GOAL:
                    break
            print(f"| {n:,} | {k} | {exact:.1f} | {approx:.1f} | {options or 'defaults'} | {recall:.4f} | "
                  f"{exact / approx:.2f} |", flush=True)


if __name__ == "__main__":
    main()

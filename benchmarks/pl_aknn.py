"""PL A-kNN: the vectorized method against the per-query loop of tests/test_pl_aknn.py.

Both get the same precomputed neighbors (not timed).  The loop is timed on a
subset of the queries and extrapolated per query to all of them (it is the
plain reference, one Python step per neighbor and label).  Predictions and
scores on the subset must agree exactly.

Run: ``.venv/bin/python benchmarks/pl_aknn.py [--queries 20000] [--loop-queries 500]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import make_classification

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pll  # noqa: E402
from pll.noise import uniform  # noqa: E402
from tests.test_pl_aknn import loop_pl_aknn  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=20000)
    parser.add_argument("--queries", type=int, default=20000)
    parser.add_argument("--loop-queries", type=int, default=500)
    parser.add_argument("--classes", type=int, default=10)
    args = parser.parse_args()
    X, y = make_classification(
        n_samples=args.train + args.queries, n_features=20, n_informative=10, n_classes=args.classes,
        n_clusters_per_class=2, class_sep=1.0, random_state=0,
    )
    S = uniform(y[: args.train], args.classes, p=0.7, r=3, random_state=0)
    X_train, X_query = X[: args.train], X[args.train:]
    print(f"{args.train} training rows, {args.queries} queries, {args.classes} classes, 20 features")
    for T in (50, 400):
        nb = pll.neighbors.kneighbors(X_train, X_query, T)
        clf = pll.PlAknn(max_neighbors=T).fit(X_train, S)
        t0 = time.perf_counter()
        r = clf.predict_with_reject(X_query, neighbors=nb)
        fast = time.perf_counter() - t0
        m = args.loop_queries
        start = np.ones(args.classes, dtype=bool)
        t0 = time.perf_counter()
        ref = [loop_pl_aknn(list(nb.indices[i]), S, start, args.train, T, clf.c1, clf.delta) for i in range(m)]
        slow = (time.perf_counter() - t0) / m * args.queries
        assert all(r.labels[i] == label for i, (label, _, _) in enumerate(ref))
        assert all(r.accept[i] == (k is not None) for i, (_, k, _) in enumerate(ref))
        print(
            f"T={T:3d}: vectorized {fast:7.3f} s, loop {slow:8.1f} s (extrapolated from {m} queries), "
            f"speed ratio {slow / fast:6.1f}x; accepted {r.accept.mean():.3f}, "
            f"accuracy {np.mean(r.labels == y[args.train:]):.3f}"
        )


if __name__ == "__main__":
    main()

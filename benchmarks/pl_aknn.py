"""PL A-kNN: the compiled method against the per-query reference loop of tests/oracles.py.

Both get the same precomputed neighbors (not timed).  The method is first run
once on a tiny input, so numba's compilation (or the load from its on-disk
cache) is timed apart from the warm runs; the warm time is the best of
``--repeats`` runs on all queries.  The loop (the plain reference, one Python
step per neighbor and label) is timed on the first ``--loop-queries`` queries
and extrapolated per query to all of them.  Predictions, accept flags and
scores on that subset must agree exactly.  Wall and CPU (process) time are
both reported, since the machine may be shared.

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
from pll.methods._aknn import _eliminate_kernel  # noqa: E402
from pll.noise import uniform  # noqa: E402
from tests.oracles import loop_pl_aknn  # noqa: E402


def timed(fn):
    """``fn()``'s result, wall seconds and CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def warm_up():
    """Compile (or load from cache) the kernel on a tiny input; return (wall, cpu, how)."""
    X = np.arange(6.0)[:, None]
    S = np.eye(2, dtype=bool)[[0, 0, 0, 1, 1, 1]]
    clf = pll.PlAknn(max_neighbors=3).fit(X, S)
    _, wall, cpu = timed(lambda: clf.predict_with_reject(X[:2]))
    stats = _eliminate_kernel.stats
    how = "loaded from numba's cache" if sum(stats.cache_hits.values()) else "compiled"
    return wall, cpu, how


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=20000)
    parser.add_argument("--queries", type=int, default=20000)
    parser.add_argument("--loop-queries", type=int, default=500)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    X, y = make_classification(
        n_samples=args.train + args.queries, n_features=20, n_informative=10, n_classes=args.classes,
        n_clusters_per_class=2, class_sep=1.0, random_state=0,
    )
    S = uniform(y[: args.train], args.classes, p=0.7, r=3, random_state=0)
    X_train, X_query = X[: args.train], X[args.train:]
    print(f"{args.train} training rows, {args.queries} queries, {args.classes} classes, 20 features")
    wall, cpu, how = warm_up()
    print(f"first call on a tiny input ({how}): wall {wall:.3f} s, cpu {cpu:.3f} s")
    m = args.loop_queries
    print(f"loop timed on the first {m} queries, extrapolated per query to {args.queries}; method: best of "
          f"{args.repeats} warm runs on all queries")
    for T in (50, 400):
        nb = pll.neighbors.kneighbors(X_train, X_query, T)
        clf = pll.PlAknn(max_neighbors=T).fit(X_train, S)
        runs = [timed(lambda: clf.predict_with_reject(X_query, neighbors=nb)) for _ in range(args.repeats)]
        r = runs[0][0]
        fast_wall, fast_cpu = min(w for _, w, _ in runs), min(c for _, _, c in runs)
        start = np.ones(args.classes, dtype=bool)
        ref, wall, cpu = timed(
            lambda: [loop_pl_aknn(list(nb.indices[i]), S, start, args.train, T, clf.c1, clf.delta) for i in range(m)]
        )
        slow_wall, slow_cpu = wall / m * args.queries, cpu / m * args.queries
        for i, (label, decided_at, best) in enumerate(ref):
            assert r.labels[i] == label and r.accept[i] == (decided_at is not None), f"query {i}"
            want = (T + 1 - decided_at) / T if decided_at is not None else min(0.0, -best / clf.A_)
            assert r.score[i] == want, f"query {i}"
        print(
            f"T={T:3d}: compiled wall {fast_wall:7.4f} s cpu {fast_cpu:7.4f} s | "
            f"loop wall {slow_wall:7.1f} s cpu {slow_cpu:7.1f} s (extrapolated) | "
            f"ratio wall {slow_wall / fast_wall:7.0f}x cpu {slow_cpu / fast_cpu:7.0f}x | "
            f"accepted {r.accept.mean():.3f}, accuracy {np.mean(r.labels == y[args.train:]):.3f}"
        )


if __name__ == "__main__":
    main()

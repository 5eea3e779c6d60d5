"""Does kNN keep its promised recall (``target_recall``, default 0.95) on any data, and at what price?

Two tables of 300,000 rows x 32 features (float32 values, searched as float64), 20 classes, the first 80 %
indexed and the rest new queries, k = 10:

- *no cluster structure*: a Gaussian mixture built here with plain numpy, whose 20 class centres lie close
  together (standard deviation 0.2 around the origin, rows of unit variance around their centre), as
  embeddings of ambiguous data often do (issue 37);
- *the project's generator*: :func:`pll.data.synthetic.make_partial_label_table` (class means of spread 1.5).

For each table, ``exact``, ``nndescent`` and ``auto`` build one index and search the training rows' own
graph and the new rows, timed from the index build to the last result (escalation and recall sampling
included).  Recall is then measured here, outside the project, against a float64 brute force of 2,000
sampled new rows and 2,000 sampled training rows (a neighbor counts when it is no farther than the true
k-th; distances from the float64 expansion |q|^2 + |x|^2 - 2 q.x, with a 1e-9 relative margin).

Exact search at the machine's limit: its GFLOP/s (2 (d + 1) flops per query-row pair, the float32
screening product) against a float32 BLAS matrix product of the same shape, timed in the same run.
pynndescent is compiled once before the first timing (its numba compilation is printed apart).

Run: ``.venv/bin/python benchmarks/recall_target.py`` (``--rows 30000`` for a smoke run).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pll.data.synthetic import make_partial_label_table  # noqa: E402
from pll.neighbors import NeighborIndex  # noqa: E402

K = 10
SAMPLE = 2000


def no_cluster_structure(n_rows, random_state=0):
    rng = np.random.default_rng(random_state)
    centres = rng.normal(scale=0.2, size=(20, 32))
    y = rng.integers(20, size=n_rows)
    return (centres[y] + rng.standard_normal((n_rows, 32))).astype(np.float32).astype(np.float64)


def project_generator(n_rows):
    table = make_partial_label_table(n_rows, random_state=0)
    return table.filter(like="x").to_numpy(dtype=np.float64)


def brute_force_kth(X_train, Q, exclude=None):
    """The true k-th neighbor distance of each query (float64 BLAS expansion; ``exclude``: the query's own row)."""
    sq_train = np.einsum("ij,ij->i", X_train, X_train)
    kth = np.empty(Q.shape[0])
    for start in range(0, Q.shape[0], 250):
        q = Q[start : start + 250]
        d2 = np.einsum("ij,ij->i", q, q)[:, None] + sq_train[None, :] - 2.0 * (q @ X_train.T)
        if exclude is not None:
            d2[np.arange(q.shape[0]), exclude[start : start + 250]] = np.inf
        kth[start : start + 250] = np.sqrt(np.maximum(np.partition(d2, K - 1, axis=1)[:, K - 1], 0.0))
    return kth


def recall(result, rows, kth):
    return float((result.distances[rows] <= kth[:, None] * (1 + 1e-9)).mean())


def run(X_train, X_query, backend):
    t0 = time.perf_counter()
    with NeighborIndex(X_train, K, backend) as index:
        graph = index.kneighbors(None)
        query = index.kneighbors(X_query)
    return time.perf_counter() - t0, graph, query


def blas_gflops(n_query, n_train, d):
    """float32 matrix product of the exact search's screening shape (one block of 4,096 queries), GFLOP/s."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((min(n_query, 4096), d + 1), dtype=np.float32)
    B = rng.standard_normal((n_train, d + 1), dtype=np.float32)
    A @ B[:4096].T  # threads started
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        A @ B.T
        best = min(best, time.perf_counter() - t0)
    return 2 * A.shape[0] * n_train * (d + 1) / best / 1e9


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    args = parser.parse_args(argv)
    n_train = args.rows * 4 // 5

    t0 = time.perf_counter()
    NeighborIndex(np.random.default_rng(0).standard_normal((2000, 32)), K, "nndescent", recall_sample=0)
    print(f"pynndescent compilation (this process, once): {time.perf_counter() - t0:.1f} s", flush=True)

    print()
    print(f"{args.rows:,} rows ({n_train:,} indexed), k = {K}, target_recall 0.95; recall against brute force on "
          f"{SAMPLE:,} sampled queries of each kind")
    print()
    print("| data | backend | seconds | x exact | recall new rows | recall graph | ended as | escalation steps "
          "(graph / new) | decision (graph) |")
    print("|---|---|---:|---:|---:|---:|---|---|---|")
    rates = []
    for name, make in (("no cluster structure", no_cluster_structure), ("project's generator", project_generator)):
        X = make(args.rows)
        X_train, X_query = X[:n_train], X[n_train:]
        rng = np.random.default_rng(7)
        graph_rows = np.sort(rng.choice(n_train, SAMPLE, replace=False))
        query_rows = np.sort(rng.choice(len(X_query), SAMPLE, replace=False))
        kth_graph = brute_force_kth(X_train, X_train[graph_rows], graph_rows)
        kth_query = brute_force_kth(X_train, X_query[query_rows])
        exact_seconds = None
        for backend in ("exact", "nndescent", "auto"):
            seconds, graph, query = run(X_train, X_query, backend)
            if backend == "exact":
                exact_seconds = seconds
                pairs = (n_train + len(X_query)) * n_train
                rates.append((name, 2 * pairs * (X.shape[1] + 1) / seconds / 1e9,
                              blas_gflops(len(X_query), n_train, X.shape[1])))
            steps = "/".join(str((r.effort or {}).get("steps", "-")) for r in (graph, query))
            print(f"| {name} | {backend} | {seconds:.1f} | {seconds / exact_seconds:.2f} "
                  f"| {recall(query, query_rows, kth_query):.4f} | {recall(graph, graph_rows, kth_graph):.4f} "
                  f"| {graph.backend} / {query.backend} | {steps} | {graph.decision} |", flush=True)
    print()
    print("| data | exact search GFLOP/s | BLAS float32 product, same shape, GFLOP/s | exact / BLAS |")
    print("|---|---:|---:|---:|")
    for name, exact_rate, peak in rates:
        print(f"| {name} | {exact_rate:.1f} | {peak:.1f} | {exact_rate / peak:.2f} |")


if __name__ == "__main__":
    main()

"""TrustScore against the authors' approach: one scikit-learn KDTree per class.

200,000 × 32 training rows in 10 Gaussian classes, 20,000 queries.  The
baseline (written here) builds a KDTree per class set and queries every tree
for the nearest point; ``TrustScore`` runs one ``pll.neighbors.nearest_by_group``
search for all class sets (float32 BLAS screening, float64 certification).  Both must give the same scores and the same nearest
other class.  The baseline is timed on ``--baseline-queries`` queries and
extrapolated per query (KDTree query time is linear in the queries; pass
``--baseline-queries 20000`` to run it whole).  The fit with the density filter
(``alpha=0.1``) is timed the same way: the baseline queries each class tree for
the k-NN radius of a sample of that class's rows.

Run: ``.venv/bin/python benchmarks/trust_score.py [--baseline-queries 2000]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.neighbors import KDTree

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pll  # noqa: E402


def make_data(n_train, n_query, d, n_classes, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=1.5, size=(n_classes, d))
    y = rng.integers(0, n_classes, n_train + n_query)
    X = centers[y] + rng.normal(size=(y.size, d))
    # A classifier that is right 80 % of the time.
    wrong = rng.random(n_query) < 0.2
    pred = np.where(wrong, rng.integers(0, n_classes, n_query), y[n_train:])
    return X[:n_train], y[:n_train], X[n_train:], pred


def kdtree_scores(trees, X_query, pred, min_dist):
    """The authors' way: the nearest point of every class tree, then the ratio of Algorithm 2."""
    D = np.stack([tree.query(X_query, k=1)[0][:, 0] for tree in trees], axis=1)
    rows = np.arange(X_query.shape[0])
    own = D[rows, pred]
    D[rows, pred] = np.inf
    closest = np.argmin(D, axis=1)
    return D[rows, closest] / (own + min_dist), closest


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=200_000)
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--dims", type=int, default=32)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--baseline-queries", type=int, default=2_000)
    args = parser.parse_args()
    X, y, Q, pred = make_data(args.train, args.queries, args.dims, args.classes)
    m = min(args.baseline_queries, args.queries)
    print(f"{args.train} x {args.dims} training rows, {args.classes} classes, {args.queries} queries")

    # Scoring.
    t0 = time.perf_counter()
    ts = pll.TrustScore().fit(X, y)
    fit_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    score, closest = ts.score(Q, pred, return_closest=True)
    ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    trees = [KDTree(X[y == c]) for c in range(args.classes)]
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    base_score, base_closest = kdtree_scores(trees, Q[:m], pred[:m], ts.min_dist)
    base = (time.perf_counter() - t0) / m * args.queries
    np.testing.assert_allclose(score[:m], base_score, rtol=1e-9)
    assert np.array_equal(closest[:m], base_closest)
    print(
        f"score: TrustScore {ours:.2f} s (+ fit {fit_ours:.2f} s); KDTree per class {base:.1f} s "
        f"(extrapolated from {m} queries; + build {build:.2f} s); speed ratio {base / ours:.1f}x; "
        f"scores identical (rtol 1e-9) on the {m} baseline queries"
    )

    # Fitting with the density filter: each class row's k-NN radius, itself counted.
    alpha, k = 0.1, 10
    t0 = time.perf_counter()
    dense = pll.TrustScore(k=k, alpha=alpha, filtering="density").fit(X, y)
    fit_dense = time.perf_counter() - t0
    rng = np.random.default_rng(1)
    sampled, total = 0, 0.0
    for c, tree in enumerate(trees):
        rows = np.flatnonzero(y == c)
        sample = rng.choice(rows, size=max(1, m * rows.size // args.train), replace=False)
        t0 = time.perf_counter()
        radius = tree.query(X[sample], k=k)[0][:, -1]
        total += (time.perf_counter() - t0) / sample.size * rows.size
        sampled += sample.size
        # Same radii, and the same keep decision at the class's percentile.
        np.testing.assert_allclose(dense.filter_values_[sample], radius, rtol=1e-9)
        cutoff = np.percentile(dense.filter_values_[rows], 100 * (1 - alpha))
        assert np.array_equal(dense.kept_[sample], radius <= cutoff)
    print(
        f"fit (density filter, alpha={alpha}): TrustScore {fit_dense:.2f} s; KDTree per class {total:.1f} s "
        f"(extrapolated from {sampled} rows); speed ratio {total / fit_dense:.1f}x; kept {dense.kept_.mean():.3f}"
    )


if __name__ == "__main__":
    main()

"""Recall of an approximate neighbor result, measured against exact search on a seeded sample."""

from __future__ import annotations

import time

import numpy as np

from .exact import ExactIndex, pair_distances


def sample_rows(n_rows, size, random_state):
    """Sorted distinct rows, the same for the same ``(n_rows, size, random_state)``."""
    rng = np.random.default_rng(random_state)
    return np.sort(rng.choice(n_rows, size=min(size, n_rows), replace=False))


class RecallProbe:
    """The exact neighbors of a seeded sample of queries, found once and checked against any number of times.

    Escalating searches measure recall after each pass; the exact answers of
    the sample do not change between passes.  The exact search of the sample
    is timed: ``seconds_per_query`` prices exact search of all queries, which
    is what an escalating search weighs its next step against.

    Parameters
    ----------
    exact : ExactIndex
    Q : array of shape (n_queries, d)
    k : int
    self_excluded : bool
        The queries are the training rows, each excluded by index.
    sample : int
    random_state : int
    """

    def __init__(self, exact, Q, k, *, self_excluded, sample, random_state):
        self.rows = sample_rows(Q.shape[0], sample, random_state)
        t0 = time.perf_counter()
        self.indices, self.distances = exact.search(Q[self.rows], k, self.rows if self_excluded else None)
        self.seconds_per_query = (time.perf_counter() - t0) / max(self.rows.size, 1)
        self._Q, self._X = Q, exact.X_train

    def recall(self, distances):
        """Recall@k of ``distances`` (n_queries, k): a neighbor counts when no farther than the exact k-th."""
        k = distances.shape[1]
        return float((distances[self.rows] <= self.distances[:, k - 1 : k]).mean())

    def relative_contrast(self, column, random_state=0, n_random=64):
        """Median over the sample of (mean distance to random training rows) / (distance to neighbor ``column + 1``).

        Near 1 when every row is about as far as any other (no cluster
        structure): neighbor graphs then find neighbors through neighbors
        poorly, and exact search is the cheaper way to a promised recall.
        """
        rng = np.random.default_rng(random_state)
        n_train = self._X.shape[0]
        others = rng.integers(n_train, size=(self.rows.size, n_random))
        mean = pair_distances(self._X, self._Q[self.rows], others).mean(axis=1)
        kth = self.distances[:, column]
        usable = np.isfinite(kth) & (kth > 0)
        return float(np.median(mean[usable] / kth[usable])) if usable.any() else float("inf")


def measure_recall(X_train, X_query, distances, *, self_excluded, sample=1000, random_state=0, exact=None):
    """Recall@k of a neighbor result on a sample of its queries.

    Parameters
    ----------
    X_train : array of shape (n_train, d)
    X_query : array of shape (n_queries, d)
        The queries (the training rows themselves when ``self_excluded``).
    distances : array of shape (n_queries, k)
        The float64 distances of the result under test.
    self_excluded : bool
    sample : int
        Queries checked, drawn with ``random_state``.
    exact : ExactIndex, optional
        Reused when given.

    Returns
    -------
    float
        The fraction of returned neighbors that are true k-nearest neighbors:
        a neighbor counts when its distance is at most the exact k-th
        distance, so that among tied rows any choice is a hit.
    """
    exact = exact or ExactIndex(X_train)
    probe = RecallProbe(exact, X_query, distances.shape[1], self_excluded=self_excluded, sample=sample,
                        random_state=random_state)
    return probe.recall(distances)

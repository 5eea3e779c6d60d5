"""Recall of an approximate neighbor result, measured against exact search on a seeded sample."""

from __future__ import annotations

import numpy as np

from .exact import ExactIndex


def sample_rows(n_rows, size, random_state):
    """Sorted distinct rows, the same for the same ``(n_rows, size, random_state)``."""
    rng = np.random.default_rng(random_state)
    return np.sort(rng.choice(n_rows, size=min(size, n_rows), replace=False))


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
    k = distances.shape[1]
    rows = sample_rows(X_query.shape[0], sample, random_state)
    exact = exact or ExactIndex(X_train)
    _, true = exact.search(X_query[rows], k, rows if self_excluded else None)
    hits = distances[rows] <= true[:, -1:]
    return float(hits.mean())

"""PL-kNN (Hüllermeier & Beringer): distance-weighted candidate votes, Hellman reject."""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import Interval

from .._random import pick_among, seed_to_int
from .base import NeighborMethod, RejectPrediction

# Scores within this relative distance of the best count as tied.
TIE_RTOL = 1e-9


class PlKnn(NeighborMethod):
    """Partial-label k-nearest-neighbor classifier with Hellman's reject option.

    Each of the ``n_neighbors`` nearest training rows votes for every label in
    its bag with weight ``1 - d_i / sum_j d_j`` (all weights 1 when the
    distances sum to less than 1e-6).  The label with the highest vote wins;
    ties (within a relative 1e-9) are broken by a seeded random choice and
    flagged as guesses.  The score is the winner's share of all votes (a
    neighbor with three candidates votes three times); the prediction is
    accepted when the share exceeds 0.5.  A training row is disambiguated
    with the votes for labels outside its own bag dropped, from the winner
    and from the total alike.

    It is a scikit-learn classifier over candidate sets (see
    :class:`~pll.methods.NeighborMethod`): :meth:`decision_function` is the
    winner's share, :meth:`predict_proba` every class's share.

    Parameters
    ----------
    n_neighbors : int, default=10
    knn : str, default="exact"
        Neighbor backend (see :func:`pll.neighbors.kneighbors`) used when no
        precomputed neighbors are given.
    knn_params : dict, optional
        Options of the neighbor backend.
    random_state : int or None, default=None
        Seed of the tie-breaking; draws are keyed by (seed, row).  None means
        seed 0 (reproducible), not fresh randomness.

    Attributes
    ----------
    classes_ : ndarray of shape (l,)
        The class labels (``arange(l)`` when fitted on a 0/1 matrix).
    X_train_ : ndarray of shape (n, d)
    S_train_ : ndarray of shape (n, l), bool
        The candidate sets over ``classes_``.
    n_classes_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (d,)
        Only when ``X`` was a data frame with string column names.

    Notes
    -----
    Neighbors are ordered by distance, ties by lower training index.

    Examples
    --------
    >>> import numpy as np, pll
    >>> X = np.array([[0.0], [0.1], [1.0], [1.1]])
    >>> S = np.array([[1, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 1]], dtype=bool)
    >>> pll.PlKnn(n_neighbors=2).fit(X, S).predict(np.array([[0.05]]))
    array([0])
    """

    threshold = 0.5
    _expected_failed_checks = {
        **NeighborMethod._expected_failed_checks,
        "check_decision_proba_consistency": (
            "decision_function is the winner's share (the reject score), not a score of class 1"
        ),
    }
    _parameter_constraints = {
        **NeighborMethod._parameter_constraints,
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, n_neighbors=10, *, knn="exact", knn_params=None, random_state=None):
        self.n_neighbors = n_neighbors
        self.knn = knn
        self.knn_params = knn_params
        self.random_state = random_state

    def predict_proba(self, X, neighbors=None):
        """Each class's share of the neighbors' votes, shape (n, l), columns in ``classes_`` order.

        The shares the score is taken from; a row whose neighbors cast no vote
        (their bags are all empty) gets ``1/l`` for every class.
        """
        return self.conformity(X, neighbors=neighbors)

    def _conformity(self, nb, prediction):
        """Conformity of PL-kNN: each class's vote share, as :meth:`predict_proba` gives it."""
        shares = prediction.shares
        return np.where(shares.sum(axis=1, keepdims=True) > 0.0, shares, 1.0 / self.n_classes_)

    def _predict_block(self, indices, distances, candidates, rows, stream):
        total = distances.sum(axis=1, keepdims=True)
        weights = np.where(total < 1e-6, 1.0, 1.0 - distances / np.where(total < 1e-6, 1.0, total))
        votes = np.einsum("qk,qkl->ql", weights, self.S_train_[indices], dtype=np.float64)
        votes *= candidates
        best = votes.max(axis=1, keepdims=True)
        tied = candidates & (votes >= best - TIE_RTOL * np.abs(best))
        labels, n_tied = pick_among(tied, seed_to_int(self.random_state), rows, stream)
        vote_sum = votes.sum(axis=1)
        ok = vote_sum >= 1e-10
        safe = np.where(ok, vote_sum, 1.0)
        shares = np.where(ok[:, None], votes / safe[:, None], 0.0)
        score = shares[np.arange(labels.size), labels]
        return RejectPrediction(
            labels=labels,
            accept=score > self.threshold,
            score=score,
            guess=n_tied > 1,
            shares=shares,
        )

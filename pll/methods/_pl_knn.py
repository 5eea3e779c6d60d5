"""PL-kNN (Hüllermeier & Beringer): distance-weighted candidate votes, Hellman reject."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from numba import njit, types
from sklearn.utils._param_validation import Interval

from ..utils._random import pick_among, seed_to_int
from .reasons import CONFLICT, DEFAULT_SUPPORT_QUANTILE, VAGUE, assign
from ._base import NeighborMethod, RejectPrediction

# Scores within this relative distance of the best count as tied.
TIE_RTOL = 1e-9


def _read(dtype, ndim):
    """A C-contiguous array the kernel only reads: readonly arrays (a memory-mapped model) pass too."""
    return types.Array(dtype, ndim, "C", readonly=True)


# Explicit types compile the kernel on import, not on a first call inside concurrent task threads.
@njit(
    types.void(_read(types.int64, 2), _read(types.uint8, 2), _read(types.int64, 1), _read(types.boolean, 2),
               types.boolean[::1]),
    cache=True,
    nogil=True,
)
def _rival_held(indices, bags, labels, close, out):
    """``out[q]``: does a neighbor of query ``q`` hold a ``close`` label but not the winner ``labels[q]``?

    A loop that stops at the first such neighbor: the numpy form builds an
    (n, k, l) array, which cost as much as the whole vote.
    """
    n, k = indices.shape
    n_classes = bags.shape[1]
    for q in range(n):
        found = False
        for j in range(k):
            row = indices[q, j]
            if bags[row, labels[q]]:
                continue
            for y in range(n_classes):
                if close[q, y] and bags[row, y]:
                    found = True
                    break
            if found:
                break
        out[q] = found


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

    Reasons of a rejection (:mod:`pll.methods.reasons`; ``disambiguate`` gives them
    too), with ``p_ŷ`` the winner's share:

    * ``conflict`` when a close rival has neighbors of its own: some other
      candidate ``y`` with ``p_y > 0`` and ``p_ŷ − p_y < conflict_margin`` is
      held by a neighbor's bag that does not hold ``ŷ``.  Labels that always
      share the bags (full bags) tie with no neighbor pointing away from
      ``ŷ``: that is vagueness, not a conflict.  Evidence ``share_gap``:
      ``p_ŷ`` minus the largest other share;
    * ``vague`` when the neighbors' vote-weighted mean bag size
      ``b = Σ_i w_i·|s_i ∩ s̃| / Σ_i w_i`` is at least ``vague_bag_size``
      (``mean_bag_size``; the unweighted mean when every weight is 0).
      Since ``p_ŷ ≤ 1/b``, at the default 2 the winner cannot pass Hellman's
      ``> 0.5`` whatever the neighbors agree on;
    * ``no_support`` when the ``k``-th neighbor is farther than
      ``support_radius_`` (``neighbor_distance``, ``support_radius``).

    Parameters
    ----------
    n_neighbors : int, default=10
    conflict_margin : float in [0, 1], default=0.2
        At ``k = 10`` equal-weight neighbors with single-label bags: a lead of
        fewer than two votes.
    vague_bag_size : float >= 1, default=2.0
    support_quantile : float in (0, 1] or None, default=0.99
        ``q`` of the support radius (:mod:`pll.methods.reasons`); None: no
        ``no_support`` test (and no search of the training rows at ``fit``).
    knn : str, default="auto"
        Neighbor backend (see :func:`pll.neighbors.kneighbors`) used when no
        precomputed neighbors are given.
    knn_options : dict, optional
        Options of the neighbor backend.
    random_state : int or None, default=None
        Seed of the tie-breaking; draws are keyed by (seed, row).  None draws
        fresh randomness, as in scikit-learn.

    Attributes
    ----------
    classes_ : ndarray of shape (l,)
        The class labels (``arange(l)`` when fitted on a 0/1 matrix).
    X_train_ : ndarray of shape (n, d)
    S_train_ : ndarray of shape (n, l), bool
        The candidate sets over ``classes_``.
    support_radius_ : float or None
        The ``support_quantile`` of the training rows' own ``k``-th neighbor
        distances (``+inf`` with no more than ``k`` training rows).
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
    >>> X = np.array([[0.0], [0.25], [0.75], [1.0]])
    >>> S = np.array([[1, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 1]], dtype=bool)
    >>> clf = pll.PlKnn(n_neighbors=2).fit(X, S)
    >>> clf.predict(np.array([[0.125]]))
    array([0])

    Halfway between the two groups the shares tie: a conflict.

    >>> r = clf.predict_with_reject(np.array([[0.5]]))
    >>> r.reason, r.evidence["share_gap"]
    (array(['conflict'], dtype='<U10'), array([0.]))
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
        "conflict_margin": [Interval(Real, 0.0, 1.0, closed="both")],
        "vague_bag_size": [Interval(Real, 1.0, None, closed="left")],
    }

    def __init__(
        self,
        n_neighbors=10,
        *,
        conflict_margin=0.2,
        vague_bag_size=2.0,
        support_quantile=DEFAULT_SUPPORT_QUANTILE,
        knn="auto",
        knn_options=None,
        random_state=None,
    ):
        self.n_neighbors = n_neighbors
        self.conflict_margin = conflict_margin
        self.vague_bag_size = vague_bag_size
        self.support_quantile = support_quantile
        self.knn = knn
        self.knn_options = knn_options
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
        bags = self.S_train_[indices]
        votes = np.einsum("qk,qkl->ql", weights, bags, dtype=np.float64)
        votes *= candidates
        best = votes.max(axis=1, keepdims=True)
        tied = candidates & (votes >= best - TIE_RTOL * np.abs(best))
        labels, n_tied = pick_among(tied, seed_to_int(self.random_state), rows, stream)
        vote_sum = votes.sum(axis=1)
        ok = vote_sum >= 1e-10
        safe = np.where(ok, vote_sum, 1.0)
        shares = np.where(ok[:, None], votes / safe[:, None], 0.0)
        picked = np.arange(labels.size), labels
        score = shares[picked]
        accept = score > self.threshold
        others = shares.copy()
        others[picked] = 0.0  # shares are >= 0 and 0 outside the candidates: 0 also stands for "no runner-up"
        runner_up = others.max(axis=1, initial=0.0)
        close = (others > 0.0) & (score[:, None] - others < self.conflict_margin)
        conflict = np.empty(labels.size, dtype=bool)
        _rival_held(np.ascontiguousarray(indices, dtype=np.int64),
                    np.ascontiguousarray(self.S_train_, dtype=bool).view(np.uint8),
                    np.ascontiguousarray(labels, dtype=np.int64), close, conflict)
        # Σ_y votes = Σ_i w_i·|s_i ∩ s̃|, so the weighted mean bag size is the vote total over the weights.
        weight_sum = weights.sum(axis=1)
        weighted = weight_sum > 0.0
        mean_size = vote_sum / np.where(weighted, weight_sum, 1.0)
        if not weighted.all():  # k = 1: the one weight is 1 − d/d = 0
            plain = (bags[~weighted] & candidates[~weighted, None, :]).sum(axis=2).mean(axis=1)
            mean_size[~weighted] = plain
        evidence = {
            **self._support(distances),
            CONFLICT: conflict,
            VAGUE: mean_size >= self.vague_bag_size,
            "share_gap": score - runner_up,
            "mean_bag_size": mean_size,
        }
        return RejectPrediction(
            labels=labels,
            accept=accept,
            score=score,
            guess=n_tied > 1,
            shares=shares,
            reason=assign(accept, evidence),
            evidence=evidence,
        )

"""DST-PLL (Fuchs, Kalinke, Böhm): Yager-combined neighbor evidence with a belief/plausibility reject option."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval

from ..utils._random import pick_among, seed_to_int
from .reasons import CONFLICT, DEFAULT_SUPPORT_QUANTILE, VAGUE, assign
from ._yager import MAX_EXACT_NEIGHBORS, combine, pack_bags
from ._base import NeighborMethod, RejectPrediction


def decide(beliefs, plausibilities, fallback, seed, rows, stream):
    """DST-PLL's two-case prediction rule and its reject score ``Δ``.

    Parameters
    ----------
    beliefs, plausibilities : arrays of shape (n, l)
        ``m̃({y})`` and ``pl({y})``; zero outside each row's ``s̃``.
    fallback : bool array of shape (n, l)
        The focal set of largest mass, used by rows whose singletons all have
        zero mass.
    seed, rows, stream
        Tie-breaking draws are keyed by (seed, stream, row).

    Returns
    -------
    labels : int64 array of shape (n,)
        ``argmax m̃({y})`` when that maximum is positive, else a label of ``fallback``.
    score : float64 array of shape (n,)
        ``Δ = bel({ŷ}) − max_{y ∈ s̃ \\ {ŷ}} pl({y})`` (an empty max is 0).
    guess : bool array of shape (n,)
        The label was drawn among two or more tied candidates.
    """
    beliefs = np.asarray(beliefs, dtype=np.float64)
    plausibilities = np.asarray(plausibilities, dtype=np.float64)
    top = beliefs.max(axis=1, keepdims=True)
    # Masses are exact dyadic numbers, so ties are exact equalities.
    tied = np.where(top > 0.0, beliefs == top, fallback)
    labels, n_tied = pick_among(tied, seed, rows, stream)
    picked = np.arange(labels.size), labels
    others = plausibilities.copy()
    others[picked] = 0.0  # plausibilities are >= 0 and 0 outside s̃, so 0 also stands for an empty max
    score = beliefs[picked] - others.max(axis=1, initial=0.0)
    return labels, score, n_tied > 1


class DstPll(NeighborMethod):
    """Partial-label kNN classifier on Dempster-Shafer evidence, with a reject option.

    Each of the ``n_neighbors`` nearest training rows whose bag ``s_i`` splits
    the query's candidate set ``s̃`` (``∅ ≠ s̃ ∩ s_i ≠ s̃``) contributes the bpa
    ``{s̃: 1/2, s̃ ∩ s_i: 1/2}``; other neighbors (empty bags included) carry no
    evidence.  The bpas are combined exactly with Yager's rule over ``s̃``.
    The prediction is the label of largest singleton mass (ties: seeded random
    choice), or, when every singleton has zero mass, a seeded random label of
    the focal set of largest mass (ties: smallest, then lexicographically
    smallest).  The score is ``Δ = bel({ŷ}) − max_{y ≠ ŷ} pl({y})``; the
    prediction is accepted when ``Δ > 0``.

    Test rows have ``s̃ = Y``; :meth:`disambiguate` uses each training row's
    own bag (``Y`` when the bag is empty) and its neighbors other than itself.

    Reasons of a rejection (:mod:`pll.methods.reasons`; ``disambiguate`` gives them
    too).  With ``j`` of the ``k`` neighbors informative, Yager's mass on
    ``s̃`` splits exactly as ``m̃(s̃) = K + V + 2^-k``:

    * ``K = m∩(∅)``, the conflict the rule moved onto ``s̃`` (evidence
      ``conflict_mass``): ``conflict`` when ``K > conflict_margin``;
    * ``V = 2^-j − 2^-k``, the mass left on ``s̃`` because ``k − j`` neighbors
      carried no evidence (their bags hold all of ``s̃``, or none of it),
      0 when every neighbor is informative (``vague_mass``): ``vague`` when
      ``V > vague_margin``;
    * ``2^-k``, which stays on ``s̃`` however informative the neighbors;

    and ``no_support`` when the ``k``-th neighbor is farther than
    ``support_radius_`` (evidence ``neighbor_distance``, ``support_radius``).
    Rows rejected for none of these (e.g. informative neighbors that all
    carry ``{a, b}``) are ``low_score``.

    It is a scikit-learn classifier over candidate sets (see
    :class:`~pll.methods.NeighborMethod`): :meth:`decision_function` is ``Δ``,
    :meth:`predict_proba` the plausibility transform.

    Parameters
    ----------
    n_neighbors : int, default=10
        At most 52, so that every mass (a multiple of ``2^-k``) is exact in float64.
    conflict_margin, vague_margin : float in [0, 1], default=0.2
        Since ``Δ ≤ bel({ŷ}) − m̃(s̃)`` and ``bel({ŷ}) ≤ 1 − m̃(s̃)``,
        ``m̃(s̃) ≥ 1/2`` alone forces a rejection; a part above 0.2 is at
        least 40 % of that, a main cause.  At ``k = 10``: a neighbor whose bag misses the others'
        common label gives ``K ≈ 1/2``, and ``V > 0.2`` means at most two
        informative neighbors (two give 0.249, three 0.124).
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
    bag_bits_ : ndarray of shape (n, ceil(l / 64)), uint64
        The training bags as bitsets.
    support_radius_ : float or None
        The ``support_quantile`` of the training rows' own ``k``-th neighbor
        distances (``+inf`` with no more than ``k`` training rows).
    n_classes_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (d,)
        Only when ``X`` was a data frame with string column names.

    Notes
    -----
    Neighbors are ordered by distance, ties by lower training index.  The
    number of focal sets is at most ``min(2^k, 2^|s̃|)`` but in practice
    intersections collapse after a few neighbors; the combination is a
    compiled kernel (:mod:`pll.methods._yager`).

    Examples
    --------
    >>> import numpy as np, pll
    >>> X = np.array([[0.0], [0.1], [0.2], [1.0]])
    >>> S = np.array([[1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 0, 1], [0, 0, 0, 1]], dtype=bool)
    >>> r = pll.DstPll(n_neighbors=3).fit(X, S).predict_with_reject(np.array([[0.1]]))
    >>> r.labels, r.accept, r.score
    (array([0]), array([ True]), array([0.25]))
    >>> r.beliefs
    array([[0.5, 0. , 0. , 0. ]])
    >>> r.plausibilities
    array([[1.  , 0.25, 0.25, 0.25]])
    >>> r.reason, r.evidence["conflict_mass"], r.evidence["vague_mass"]
    (array(['none'], dtype='<U10'), array([0.]), array([0.]))
    """

    threshold = 0.0
    _expected_failed_checks = {
        **NeighborMethod._expected_failed_checks,
        "check_decision_proba_consistency": "decision_function is Δ (the reject score), not a score of class 1",
        "check_methods_subset_invariance": (
            "masses are multiples of 2^-k, so beliefs tie often; the draw among tied labels is keyed by "
            "the row's position, which differs between a batch and its subsets"
        ),
        "check_methods_sample_order_invariance": (
            "beliefs tie often, and the draw among tied labels is keyed by the row's position"
        ),
    }
    _parameter_constraints = {
        **NeighborMethod._parameter_constraints,
        "n_neighbors": [Interval(Integral, 1, MAX_EXACT_NEIGHBORS, closed="both")],
        "conflict_margin": [Interval(Real, 0.0, 1.0, closed="both")],
        "vague_margin": [Interval(Real, 0.0, 1.0, closed="both")],
    }

    def __init__(
        self,
        n_neighbors=10,
        *,
        conflict_margin=0.2,
        vague_margin=0.2,
        support_quantile=DEFAULT_SUPPORT_QUANTILE,
        knn="auto",
        knn_options=None,
        random_state=None,
    ):
        self.n_neighbors = n_neighbors
        self.conflict_margin = conflict_margin
        self.vague_margin = vague_margin
        self.support_quantile = support_quantile
        self.knn = knn
        self.knn_options = knn_options
        self.random_state = random_state

    def predict_proba(self, X, neighbors=None):
        """The plausibility transform of the combined evidence, shape (n, l), columns in ``classes_`` order.

        ``pl({y}) / Σ_c pl({c})`` (Cobb and Shenoy's probability of a belief
        function): conflict and ignorance, whose mass Yager's rule leaves on
        ``s̃``, raise every plausibility alike and flatten the row.  Its
        largest entry need not be the prediction, which takes the largest
        belief ``m̃({y})``.
        """
        plausibilities = self.predict_with_reject(X, neighbors=neighbors).plausibilities
        return plausibilities / plausibilities.sum(axis=1, keepdims=True)

    def _conformity(self, nb, prediction):
        """Conformity of DST-PLL: the plausibility ``pl({y})`` of each class, unnormalised.

        ``1 − pl({y}) = bel(Θ \\ {y})``, the evidence against ``y``: a class no
        neighbor's bag speaks against stays fully plausible.
        """
        return prediction.plausibilities

    def _fit_derived(self):
        self.bag_bits_ = pack_bags(self.S_train_)

    def _bytes_per_row(self, k):
        return 8 * (k + 3 * self.n_classes_)

    def _predict_block(self, indices, distances, candidates, rows, stream):
        beliefs, plausibilities, fallback, conflict, informative = combine(
            indices, self.bag_bits_, pack_bags(candidates), self.n_classes_, evidence=True
        )
        labels, score, guess = decide(
            beliefs, plausibilities, fallback, seed_to_int(self.random_state), rows, stream
        )
        accept = score > self.threshold
        vague = np.ldexp(1.0, -informative) - np.ldexp(1.0, -indices.shape[1])  # exact: powers of two
        evidence = {
            **self._support(distances),
            CONFLICT: conflict > self.conflict_margin,
            VAGUE: vague > self.vague_margin,
            "conflict_mass": conflict,
            "vague_mass": vague,
        }
        return RejectPrediction(
            labels=labels,
            accept=accept,
            score=score,
            guess=guess,
            beliefs=beliefs,
            plausibilities=plausibilities,
            reason=assign(accept, evidence),
            evidence=evidence,
        )

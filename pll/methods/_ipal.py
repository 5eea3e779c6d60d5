"""IPAL (Zhang & Yu, IJCAI 2015): label propagation over a reconstruction graph, then minimum-error reconstruction.

The estimator; its compiled kernels are in :mod:`pll.methods._ipal_kernels`.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval

from ..utils._random import seed_to_int
from .reasons import CONFLICT, DEFAULT_SUPPORT_QUANTILE, assign
from ..utils.progress import row_blocks, track
from ..utils.validation import check_X, empty_as_all, encode_bags
from ._base import NeighborMethod, RejectPrediction
from ._ipal_kernels import class_errors, decide_confidences, decide_errors, nnls_weights, propagate


class Ipal(NeighborMethod):
    """IPAL: instance-based partial-label learning by label propagation, with a reject option.

    **Fit** (Zhang and Yu 2015, Section 2).  Every training row ``x_i`` gets
    non-negative reconstruction weights over its ``k = n_neighbors`` nearest
    other training rows ``N(x_i)``: ``w_i = argmin ‖x_i − Σ_{j ∈ N(x_i)} w_ji·x_j‖²``
    subject to ``w ≥ 0`` (a non-negative least-squares problem per row, solved
    by Lawson and Hanson's active-set method in a compiled kernel).  With
    ``W = [w_ji]`` (``w_ji`` the weight of ``x_j`` for ``x_i``, 0 off the
    graph), ``D = diag(d_i)``, ``d_i = Σ_j w_ji``, the propagation matrix is
    ``H = W D⁻¹``.  The labeling confidences start at ``F⁽⁰⁾ = P`` with
    ``p_ic = 1/|S_i|`` on the bag ``S_i`` (an empty bag counts as all classes)
    and take ``max_iter`` steps ``F⁽ᵗ⁾ = α·Hᵀ F⁽ᵗ⁻¹⁾ + (1 − α)·P``, each followed
    by setting the row to zero outside its bag and rescaling it to sum to 1
    within it (``confidences_``).  A row whose weights are all zero (``d_i = 0``)
    keeps ``P``.  The disambiguation then corrects for class mass: with
    ``n_c = Σ_i p_ic`` (the class mass of the initial confidences) and
    ``n̂_c = Σ_i f_ic`` (after propagation), each row's label is
    ``ŷ_i = argmax_{c ∈ S_i} (n_c / n̂_c)·f_ic`` (``disambiguated_``).

    **Predict.**  A query ``x`` gets non-negative weights ``w`` over its ``k``
    nearest training rows, as above, and for every class ``c`` the error
    ``e_c = ‖x − Σ_{j ∈ N(x), ŷ_j = c} w_j·x_j‖`` of the reconstruction kept
    to the neighbors disambiguated as ``c``; the prediction is the candidate
    of least error.  A class that no neighbor carries has ``e_c = ‖x‖``
    (weight 0 on every neighbor), so it can still win — rarely, when the
    other partial reconstructions overshoot ``x``; the paper's rule ranges
    over all classes, so does this one (restricted to the query's candidates
    when given).

    **Ties.**  Errors within ``1e-9`` relative (plus ``1e-12·‖x‖``) of the
    least, and class-mass-normalised confidences within ``1e-9`` relative of
    the largest, are tied; the label is drawn among the tied by a seeded
    choice keyed by (seed, row), and flagged as a guess.

    **Reject option** (added by this project; the paper has none).  The
    score of a prediction is the relative margin of the two smallest errors
    among the candidates, ``(e_2 − e_1) / e_2`` in [0, 1]: 0 for a tie, 1 when
    the best class reconstructs ``x`` exactly and the others do not (or when
    there is a single candidate).  The prediction is accepted when the score
    exceeds ``threshold = 1 − 1/√2 ≈ 0.293``, i.e. when ``e_1² < e_2² / 2``:
    the best class leaves less than half the squared residual (the quantity
    the weights minimise) that the runner-up leaves.  Why the margin: the
    errors have the scale of the features, so a threshold on ``e_1`` alone
    would not carry over between data sets, while the ratio ``e_1 / e_2`` is
    scale-free and says how clearly the neighbors of one class explain the
    query better than those of any other.  On bird-song and msrc-v2
    (min-max scaled, 80/20 splits, 5 seeds) the default accepts about 80 %
    and 63 % of the test rows, whose accuracy (83 % and 66 %) is 10 to 13
    points above the overall accuracy (73 % and 53 %); lower thresholds trade
    accuracy for coverage smoothly, and the pipeline calibrates thresholds
    on a hold-out anyway.

    The per-class values behind the score are the ratios ``e_1 / e_c`` in
    [0, 1] (1 for the best class): :meth:`conformity` (for conformal
    prediction sets, every class a candidate) returns them, and the score is
    one minus the largest ratio among the other candidates — as DST-PLL's
    ``Δ`` is the belief of the winner minus the largest other plausibility.
    :meth:`predict_proba` is the ratios normalised to sum to 1, i.e.
    ``(1/e_c) / Σ_c' (1/e_c')``, the normalisation of the authors' released
    code; its argmax is the prediction, but it is not calibrated, and a
    class with no disambiguated neighbor keeps the share of ``1/‖x‖``, so
    with many classes even a clear winner has a modest share: use the score
    to reject.  :class:`RejectPrediction` ``.shares`` carries the same values
    (over the candidates).

    :meth:`disambiguate` returns the paper's training labels ``ŷ_i`` (not a
    prediction of each row from its neighbors): its score is the relative
    margin ``1 − g_2 / g_1`` of the two largest class-mass-normalised
    confidences ``g_c = (n_c / n̂_c)·f_ic`` in the bag (1 for a single-label
    bag), accepted above the same threshold; its ``.shares`` are the ``g_c``
    normalised to sum to 1.

    **Reasons** of a rejection (:mod:`pll.methods.reasons`; :meth:`disambiguate`
    gives them too): ``conflict`` when the runner-up is close by IPAL's own
    rule, ``score ≤ conflict_margin`` (at the default, the threshold: every
    rejection at the default threshold is a conflict of two classes that
    reconstruct the row about as well, unless ``no_support`` comes first);
    ``no_support`` when the ``k``-th neighbor is farther than
    ``support_radius_`` (evidence ``neighbor_distance``, ``support_radius``).
    IPAL reads disambiguated labels, not bags, so it has no ``vague``.

    It is a scikit-learn classifier over candidate sets (see
    :class:`~pll.methods.NeighborMethod`): :meth:`decision_function` is the
    score.

    Parameters
    ----------
    n_neighbors : int, default=10
        ``k``, both for the training graph and for a query's reconstruction.
        :meth:`fit` needs more than ``k`` training rows (every training row is
        reconstructed from ``k`` others).
    alpha : float in (0, 1), default=0.95
        Weight of the propagated confidences against the initial ones.
    max_iter : int, default=100
        Propagation steps (all of them are taken: no early stop).  The
        defaults of ``n_neighbors``, ``alpha`` and ``max_iter`` are those of
        the DST-PLL paper's Appendix D.2.
    conflict_margin : float in [0, 1], default=1 − 1/√2
        The reject threshold, so that ``conflict`` is IPAL's own rejection.
    support_quantile : float in (0, 1] or None, default=0.99
        ``q`` of the support radius (:mod:`pll.methods.reasons`); None: no
        ``no_support`` test.
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
    neighbor_indices_ : ndarray of shape (n, k), int64
        Each training row's neighbors (other rows), nearest first.
    weights_ : ndarray of shape (n, k), float64
        ``weights_[i, a]`` is the reconstruction weight ``w_ji`` of row
        ``j = neighbor_indices_[i, a]`` for row ``i`` (non-negative).
    confidences_ : ndarray of shape (n, l), float64
        The labeling confidences ``F`` after ``max_iter`` steps: zero outside
        each bag (all classes for an empty bag), rows summing to 1.
    class_mass_ratio_ : ndarray of shape (l,), float64
        ``n_c / n̂_c`` (0 for a class in no bag).
    disambiguated_ : ndarray of shape (n,), int64
        ``ŷ_i`` as a column index of ``classes_`` (``disambiguate().labels``
        are the class values).
    n_iter_ : int
        Propagation steps taken (always ``max_iter``).
    support_radius_ : float or None
        The ``support_quantile`` of the training rows' own ``k``-th neighbor
        distances.
    n_classes_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (d,)
        Only when ``X`` was a data frame with string column names.

    Notes
    -----
    Neighbors are ordered by distance, ties by lower training index.  Where a
    row's neighbors are linearly dependent (fewer features than neighbors,
    duplicate rows) the least-squares solution is not unique: the kernel
    returns a minimiser with the least error, not necessarily the one
    :func:`scipy.optimize.nnls` returns.  The authors' released code also
    scales every row to unit norm and stops the propagation early once
    ``‖ΔF‖₂ < 10⁻⁴``; neither is part of the paper's algorithm, nor of this
    class (scale the features in a pipeline if wanted).

    Cost: fit is ``O(n·k·(k·d + k³))`` for the weights plus ``O(max_iter·n·k·l)``
    for the propagation; a query costs one ``k``-neighbor search and one
    ``O(k·d + k³)`` problem.

    References
    ----------
    M.-L. Zhang and F. Yu. Solving the partial label learning problem: an
    instance-based approach. In *Proceedings of the 24th International Joint
    Conference on Artificial Intelligence (IJCAI)*, pages 4048–4054, 2015.

    Examples
    --------
    >>> import numpy as np, pll
    >>> from pll import Ipal
    >>> X = np.array([[0.0, 1.0], [0.1, 1.0], [0.2, 1.0], [1.0, 0.0], [1.0, 0.1], [1.0, 0.2]])
    >>> S = np.array([[1, 1], [1, 0], [1, 0], [1, 1], [0, 1], [0, 1]], dtype=bool)
    >>> clf = Ipal(n_neighbors=2, random_state=0).fit(X, S)
    >>> clf.disambiguated_
    array([0, 0, 0, 1, 1, 1])
    >>> clf.confidences_[[0, 3]].round(3)
    array([[0.975, 0.025],
           [0.025, 0.975]])

    The third query lies halfway between rows 2 and 5: both classes
    reconstruct it equally badly, so its label is a seeded guess, rejected.

    >>> r = clf.predict_with_reject(np.array([[0.05, 1.0], [1.0, 0.15], [0.5, 0.5], [0.6, 0.5]]))
    >>> r.labels, r.accept, r.guess
    (array([0, 1, 0, 1]), array([ True,  True, False,  True]), array([False, False,  True, False]))
    >>> r.score.round(3)
    array([1.   , 1.   , 0.   , 0.523])

    It is a conflict, but its second neighbor is also farther than the 99 %
    quantile of the training rows' own second-neighbor distances, and that
    reason comes first:

    >>> r.reason, r.evidence["conflict"]
    (array(['none', 'none', 'no_support', 'none'], dtype='<U10'), array([False, False,  True, False]))
    >>> clf.conformity(np.array([[0.6, 0.5]])).round(3)
    array([[0.477, 1.   ]])
    """

    threshold = 1.0 - 1.0 / np.sqrt(2.0)
    _expected_failed_checks = {
        **NeighborMethod._expected_failed_checks,
        "check_decision_proba_consistency": (
            "decision_function is the relative error margin (the reject score), not a score of class 1"
        ),
    }
    _parameter_constraints = {
        **NeighborMethod._parameter_constraints,
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "alpha": [Interval(Real, 0.0, 1.0, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "conflict_margin": [Interval(Real, 0.0, 1.0, closed="both")],
    }

    def __init__(
        self,
        n_neighbors=10,
        *,
        alpha=0.95,
        max_iter=100,
        conflict_margin=1.0 - 1.0 / math.sqrt(2.0),
        support_quantile=DEFAULT_SUPPORT_QUANTILE,
        knn="auto",
        knn_options=None,
        random_state=None,
    ):
        self.n_neighbors = n_neighbors
        self.alpha = alpha
        self.max_iter = max_iter
        self.conflict_margin = conflict_margin
        self.support_quantile = support_quantile
        self.knn = knn
        self.knn_options = knn_options
        self.random_state = random_state

    def _min_training_rows(self):
        """More than ``k``: every training row is reconstructed from ``k`` other rows."""
        return self.n_neighbors + 1

    def _fit_derived(self):
        nb = self._neighbors_for(None, None)
        self._seed = seed_to_int(self.random_state)
        self.neighbor_indices_ = nb.indices
        self.weights_ = nnls_weights(self.X_train_, self.X_train_, nb.indices, progress="Ipal weights")
        bags = self._train_bags()
        self.confidences_ = propagate(nb.indices, self.weights_, bags, self.alpha, self.max_iter)
        initial_mass = (bags / bags.sum(axis=1, keepdims=True)).sum(axis=0)
        final_mass = self.confidences_.sum(axis=0)
        safe = np.where(final_mass > 0.0, final_mass, 1.0)
        self.class_mass_ratio_ = np.where(final_mass > 0.0, initial_mass / safe, 0.0)
        self.disambiguated_ = self._disambiguation()[0]
        self.n_iter_ = self.max_iter

    def _train_bags(self):
        return empty_as_all(self.S_train_)

    def _disambiguation(self):
        values = self.confidences_ * self.class_mass_ratio_
        rows = np.arange(values.shape[0])
        return decide_confidences(values, self._train_bags(), self._seed, rows, self._train_stream)

    def disambiguate(self):
        """The paper's disambiguated labels of the training rows, with the reject option.

        ``labels`` are ``classes_[disambiguated_]``; ``score`` is the relative
        margin of the two largest class-mass-normalised confidences in the bag,
        ``accept`` is ``score > threshold``; ``shares`` are those confidences
        normalised to sum to 1 (see the class docstring).
        """
        self._check_fitted()
        labels, score, guess, ratios = self._disambiguation()
        return self._with_reasons(labels, score, guess, ratios, self._neighbors_for(None, None).distances)

    def predict_with_reject(self, X, neighbors=None, candidates=None):
        """Predictions with IPAL's minimum-error rule and the relative-margin reject option.

        Parameters
        ----------
        X : array-like of shape (n, d)
        neighbors : NeighborResult, optional
            Precomputed neighbors of ``X`` among the training rows.
        candidates : candidate sets of the n rows, optional
            Each row's candidate set (any form :meth:`fit` takes, over
            ``classes_``); the prediction stays inside it.  Default: all
            classes (an empty row also means all classes).

        Returns
        -------
        RejectPrediction
            ``labels`` are values of ``classes_``; ``shares`` (n, l) are the
            inverse-error shares over the candidates.
        """
        self._check_fitted()
        X = check_X(self, X, reset=False)
        nb = self._neighbors_for(X, neighbors)
        n = nb.n_queries
        if candidates is None:
            cand = np.ones((n, self.n_classes_), dtype=bool)
        else:
            cand, _ = encode_bags(candidates, n, self.classes_, what="query candidate sets")
            cand = empty_as_all(cand)
        labels, score, guess, ratios = self._decide(X, nb, cand)
        return self._with_reasons(labels, score, guess, ratios, nb.distances)

    def _with_reasons(self, labels, score, guess, ratios, distances):
        """The prediction of these rows, with reasons from their score and their neighbor ``distances``."""
        accept = score > self.threshold
        evidence = {**self._support(distances), CONFLICT: score <= self.conflict_margin}
        return self._labelled(
            RejectPrediction(
                labels=labels,
                accept=accept,
                score=score,
                guess=guess,
                shares=ratios / ratios.sum(axis=1, keepdims=True),
                reason=assign(accept, evidence),
                evidence=evidence,
            )
        )

    def conformity(self, X, neighbors=None):
        """``e_1 / e_c`` for every class, float64 of shape (n, l) in [0, 1]: 1 for the best class.

        The ratio of the least reconstruction error to each class's error
        (every class a candidate); see the class docstring.
        """
        self._check_fitted()
        X = check_X(self, X, reset=False)
        nb = self._neighbors_for(X, neighbors)
        return self._decide(X, nb, np.ones((nb.n_queries, self.n_classes_), dtype=bool))[3]

    def _conformity(self, nb, prediction):
        """Conformity from a prediction: its shares rescaled so that the best class has 1, i.e. ``e_1 / e_c``."""
        return prediction.shares / prediction.shares.max(axis=1, keepdims=True)

    def predict_proba(self, X, neighbors=None):
        """Inverse-error shares ``(1/e_c) / Σ_c' (1/e_c')``, shape (n, l), columns in ``classes_`` order.

        Not calibrated probabilities (see the class docstring); the largest is
        the prediction.
        """
        ratios = self.conformity(X, neighbors=neighbors)
        return ratios / ratios.sum(axis=1, keepdims=True)

    def _decide(self, X, nb, cand):
        """Labels, score, guess and error ratios of the queries ``X`` with neighbors ``nb``, block by block."""
        n = nb.n_queries
        labels = np.empty(n, dtype=np.int64)
        score = np.empty(n)
        guess = np.empty(n, dtype=bool)
        ratios = np.empty((n, self.n_classes_))
        for b in track(row_blocks(n, self._bytes_per_row(nb.k)), "Ipal predictions"):
            part = self._decide_block(X[b], nb.indices[b], cand[b], np.arange(b.start, b.stop))
            labels[b], score[b], guess[b], ratios[b] = part
        return labels, score, guess, ratios

    def _decide_block(self, queries, indices, candidates, rows):
        weights = nnls_weights(self.X_train_, queries, indices)
        errors, norms = class_errors(self.X_train_, queries, indices, weights, self.disambiguated_, self.n_classes_)
        return decide_errors(errors, norms, candidates, self._seed, rows, self._query_stream)

    def _predict_block(self, indices, distances, candidates, rows, stream):
        raise NotImplementedError(
            "Ipal reconstructs each query from its features: it predicts through predict_with_reject, "
            "which passes them, not through the base class's neighbor-only blocks"
        )

    def _bytes_per_row(self, k):
        return 8 * (2 * k + 6 * self.n_classes_)

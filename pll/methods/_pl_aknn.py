"""PL A-kNN (Errandonea, Mazuelas, Lozano, Dasgupta): adaptive label elimination, with a reject option."""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval

from .reasons import CONFLICT, DEFAULT_SUPPORT_QUANTILE, VAGUE, assign, support_evidence, support_radius
from ._aknn import eliminate
from ..utils.progress import row_blocks
from ._base import NeighborMethod, RejectPrediction


def elimination_leads(scale, max_neighbors):
    """The smallest integer lead that eliminates a label at each neighborhood size.

    A label ``y`` is eliminated at step ``k`` when ``(m1 − τ_y) / k ≥ Δ_k`` with
    ``Δ_k = scale / sqrt(k)``.  The lead ``m1 − τ_y`` is an integer in
    ``[0, k]``, so the test reduces to ``m1 − τ_y ≥ lead[k − 1]``; the table is
    built with the very floating-point expression of the definition, so both
    forms decide every case alike.  ``k + 1`` means "never".

    Returns
    -------
    ndarray of shape (max_neighbors,), int64
    """
    leads = np.empty(max_neighbors, dtype=np.int64)
    for k in range(1, max_neighbors + 1):
        delta_k = scale / np.sqrt(k)
        reached = np.arange(k + 1) / k >= delta_k
        leads[k - 1] = np.argmax(reached) if reached.any() else k + 1
    return leads


def m_values(scale, max_neighbors):
    """``M[k, y]`` for every integer ``d = τ_y − m2`` in ``[−k, k]``: row ``k − 1``, column ``d + k + 1``.

    ``M = sqrt(k)·(Δ_k − d/k)`` with ``Δ_k = scale / sqrt(k)``, evaluated by the
    very expression of the definition, so a table look-up gives the same bits.
    Column 0 holds ``+inf``, the value of every index below the range.

    Returns
    -------
    ndarray of shape (max_neighbors, 2·max_neighbors + 2)
    """
    table = np.full((max_neighbors, 2 * max_neighbors + 2), np.inf)
    for k in range(1, max_neighbors + 1):
        sqrt_k = np.sqrt(k)
        table[k - 1, 1 : 2 * k + 2] = sqrt_k * (scale / sqrt_k - np.arange(-k, k + 1) / k)
    return table


class PlAknn(NeighborMethod):
    """Partial-label adaptive k-nearest-neighbor classifier, with a reject option.

    Each query starts with a set of surviving labels (all classes; for a
    training row being disambiguated, its own bag when not empty) and counts
    ``τ_y``, the number of its first ``k`` neighbors whose bag holds ``y``.
    For ``k = 1, …, T`` (``T = max_neighbors``) it adds the ``k``-th neighbor's
    bag to the counts, takes the largest and second-largest count ``m1``,
    ``m2`` among surviving labels (with multiplicity; ``m2 = m1`` when the top
    is tied or one label survives), records ``M[k, y] = sqrt(k)·(Δ_k − (τ_y −
    m2)/k)`` for every surviving label and eliminates the labels with
    ``(m1 − τ_y)/k ≥ Δ_k``, where ``Δ_k = A / sqrt(k)`` and
    ``A = c1·sqrt(log n + log(l/δ))`` (``n`` training rows, ``l`` classes).
    It stops after the first step that leaves a single label, and predicts
    it.  When several labels survive all ``T`` steps, it predicts the survivor
    with the smallest recorded ``M`` over all steps (ties: lower label) —
    the paper's disambiguation criterion (its Appendix D.3).

    Reject option (added by this project; the paper has none): abstain when
    more than one label survives ``T`` neighbors.  The score is

    * ``(T + 1 − k*) / T`` in ``[1/T, 1]`` when a single label was left after
      ``k*`` steps: the earlier the decision, the larger the lead it needed
      (``Δ_k`` shrinks with ``k``), the more certain;
    * ``min(0, −min_k M[k, ŷ] / A)`` when labels still tie after ``T`` steps.
      Since ``−M[k, ŷ]/A = (τ_ŷ − m2) / (k·Δ_k) − 1``, this is the best ratio
      of ŷ's frequency lead over the runner-up to the elimination threshold,
      minus one: ``−1`` or less without any lead, close to 0 when ŷ nearly
      eliminated every other label.

    So ``accept == (score > 0)`` is exactly "a single label survived", and
    lower thresholds accept the undecided rows in the order of the paper's
    own disambiguation criterion.  There is no random choice: ``guess`` marks
    the undecided rows whose smallest ``M`` was tied between labels (the
    lower label wins).

    Reasons of a rejection (:mod:`pll.methods.reasons`; ``disambiguate`` gives them
    too).  Several labels surviving ``T`` neighbors (the reject rule itself)
    is ``conflict`` when some of the ``T`` neighbors separates two survivors
    (its bag holds one, not the other: the evidence points to different
    labels), and ``vague`` when none does (every bag held all survivors or
    none, e.g. neighbors with full bags: the bags are too large to tell the
    survivors apart); so at the default threshold every rejection is one of
    the two unless ``no_support`` comes first.  ``no_support`` is judged at
    the *final* neighborhood size ``K`` (``k*``, or ``T`` when labels still
    tie; evidence ``neighborhood_size``): the distance to the ``K``-th
    neighbor exceeds the ``support_quantile`` of the training rows' own
    ``K``-th neighbor distances (``support_radius_[K − 1]``).  The
    neighborhood the decision rested on is the one whose support matters: a
    query decided by its first few neighbors is judged by how near those
    are, not by its ``T``-th.

    Parameters
    ----------
    max_neighbors : int, default=50
        ``T``; the paper uses 50 for small real-world data sets and 400 for
        large ones.  :meth:`fit` needs more than ``T`` training rows, since
        every training row is disambiguated with ``T`` other rows (it raises
        an error rather than silently using fewer neighbors).
    c1 : float, default=0.5
    delta : float, default=0.1
        Confidence parameter ``δ`` in (0, 1).
    support_quantile : float in (0, 1] or None, default=0.99
        ``q`` of the support radii (:mod:`pll.methods.reasons`); None: no
        ``no_support`` test.
    knn : str, default="auto"
        Neighbor backend (see :func:`pll.neighbors.kneighbors`) used when no
        precomputed neighbors are given.  The recommended features are
        ``pll.preprocessing.PlAknnPreprocessor`` (the paper's preprocessing).
    knn_options : dict, optional
        Options of the neighbor backend.
    random_state : int or None, default=None
        Accepted for a uniform interface; PL A-kNN makes no random choice.

    It is a scikit-learn classifier over candidate sets (see
    :class:`~pll.methods.NeighborMethod`): :meth:`decision_function` is the
    score above.  It has no ``predict_proba``; its :meth:`conformity` (for
    conformal prediction sets) is the share of the final neighborhood that
    votes for each class: ``τ_y(K) / K``, where ``K`` is the step at which a
    single label was left (``k*``), or ``T`` when labels still tie — the
    counts the elimination was deciding on when it stopped.

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
    A_ : float
        ``c1·sqrt(log n + log(l/δ))``.
    support_radius_ : ndarray of shape (T,) or None
        Entry ``K − 1``: the ``support_quantile`` of the training rows' own
        ``K``-th neighbor distances.

    Notes
    -----
    Neighbors are ordered by distance, ties by lower training index.  A
    compiled kernel (:mod:`pll.methods._aknn`) walks each query's neighbors
    in order and stops at its decisive step, touching only surviving labels.

    Examples
    --------
    >>> import numpy as np, pll
    >>> X = np.arange(8.0)[:, None]
    >>> S = np.array([[1, 0]] * 4 + [[0, 1]] * 4, dtype=bool)
    >>> clf = pll.PlAknn(max_neighbors=4).fit(X, S)
    >>> r = clf.predict_with_reject(np.array([[0.0], [3.6]]))
    >>> r.labels, r.accept
    (array([0, 1]), array([ True, False]))
    >>> r.reason, r.evidence["neighborhood_size"]
    (array(['none', 'conflict'], dtype='<U10'), array([2, 4]))
    """

    threshold = 0.0
    _k_param = "max_neighbors"
    _parameter_constraints = {
        **NeighborMethod._parameter_constraints,
        "max_neighbors": [Interval(Integral, 1, None, closed="left")],
        "c1": [Interval(Real, 0.0, None, closed="neither")],
        "delta": [Interval(Real, 0.0, 1.0, closed="neither")],
    }

    def __init__(
        self,
        max_neighbors=50,
        *,
        c1=0.5,
        delta=0.1,
        support_quantile=DEFAULT_SUPPORT_QUANTILE,
        knn="auto",
        knn_options=None,
        random_state=None,
    ):
        self.max_neighbors = max_neighbors
        self.c1 = c1
        self.delta = delta
        self.support_quantile = support_quantile
        self.knn = knn
        self.knn_options = knn_options
        self.random_state = random_state

    def _min_training_rows(self):
        """More than ``T``: every training row is disambiguated with ``T`` other rows (never fewer)."""
        return self.max_neighbors + 1

    def _fit_derived(self):
        n, l = self.S_train_.shape
        self.A_ = self.c1 * math.sqrt(math.log(n) + math.log(l / self.delta))
        self._leads = elimination_leads(self.A_, self.max_neighbors)
        self._m_table = m_values(self.A_, self.max_neighbors)

    def _fit_support(self):
        """One radius per neighborhood size: the ``support_quantile`` of each column of the own-neighbor distances."""
        if self.support_quantile is None:
            return None
        distances = self._own_distances()
        if distances is None:
            return np.full(self.max_neighbors, np.inf)
        return support_radius(distances, self.support_quantile)

    def _bytes_per_row(self, k):
        # The neighbor columns and the outputs; the kernel's work arrays are (l,)-sized per call.
        return 8 * k + 32

    def _final_size(self, score):
        """``K`` per query: decided ones scored ``(T + 1 − k*) / T``, undecided ones (score ≤ 0) used all ``T``."""
        T = self.max_neighbors
        return np.where(score > 0.0, np.rint(T + 1 - score * T), T).astype(np.int64)

    def _conformity(self, nb, prediction):
        """``τ_y(K) / K``: the share of the first ``K`` neighbors whose bag holds ``y`` (see the class docstring)."""
        T = self.max_neighbors
        size = self._final_size(prediction.score)
        out = np.empty((nb.n_queries, self.n_classes_))
        for b in row_blocks(nb.n_queries, T * self.n_classes_):
            within = np.arange(T) < size[b, None]
            counts = np.einsum("qk,qkl->ql", within, self.S_train_[nb.indices[b, :T]], dtype=np.float64)
            out[b] = counts / size[b, None]
        return out

    def _predict_block(self, indices, distances, candidates, rows, stream):
        labels, score, guess, split = eliminate(
            indices, self.S_train_, candidates, self._leads, self._m_table, self.A_, evidence=True
        )
        accept = score > self.threshold
        size = self._final_size(score)
        radius = None if self.support_radius_ is None else self.support_radius_[size - 1]
        undecided = score <= 0.0  # several labels survive T neighbors
        evidence = {
            **support_evidence(distances[np.arange(size.size), size - 1], radius),
            CONFLICT: undecided & split,
            VAGUE: undecided & ~split,
            "neighborhood_size": size,
        }
        return RejectPrediction(
            labels=labels, accept=accept, score=score, guess=guess, reason=assign(accept, evidence), evidence=evidence
        )

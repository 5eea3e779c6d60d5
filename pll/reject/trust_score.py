"""Trust scores (Jiang, Kim, Guan, Gupta): a reject option for any classifier.

A prediction is trusted when the query lies much nearer to the (filtered)
training points of the predicted class than to those of any other class.
In partial-label learning the training labels come from a method's own
disambiguation of its training rows, which makes the trust score a reject
option for every method.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions

from ..errors import InvalidDataError, InvalidParameterError
from ..methods import RejectPrediction
from ..neighbors import kneighbors, nearest_by_group
from ..neighbors.grouped import nearest_own_and_other
from ..neighbors.result import check_indices
from ..methods.reasons import CONFLICT, NO_SUPPORT, assign
from ..utils.validation import check_fitted, check_params, check_X, class_positions

FILTERS = ("none", "density", "uncertainty")
SUPPORT_EVIDENCE = (NO_SUPPORT, "neighbor_distance", "support_radius")
"""The support test's entries of a method's evidence, which :func:`with_trust` carries over."""


def _codes(values, classes, what):
    """Positions of ``values`` in the sorted ``classes``; an error names the first unknown row."""
    values = np.asarray(values)
    if values.ndim != 1:
        raise InvalidDataError(f"{what} must be a 1-d array, got shape {values.shape}")
    return class_positions(values, classes, what)


def _cross_class_duplicates(X, codes):
    """Number of rows whose exact features also occur with another label."""
    if X.shape[0] == 0:
        return 0
    rows = np.ascontiguousarray(X).view(np.dtype((np.void, X.dtype.itemsize * X.shape[1]))).ravel()
    _, group = np.unique(rows, return_inverse=True)
    group = group.ravel()
    lowest = np.full(group.max() + 1, np.iinfo(np.int64).max)
    highest = np.full(group.max() + 1, -1)
    np.minimum.at(lowest, group, codes)
    np.maximum.at(highest, group, codes)
    return int((lowest[group] != highest[group]).sum())


class TrustScore(BaseEstimator):
    """Trust score of Jiang et al. (NeurIPS 2018): distance ratio to the nearest other class.

    :meth:`fit` builds, for every class ``ℓ``, a set ``Ĥ_ℓ`` of training
    points (Algorithm 1): with ``filtering="density"``, the points whose
    radius ``r_k`` (to their ``k' = min(k, class size)``-th nearest point of
    their class, themselves counted) is at most the ``100·(1 − α)``-th
    percentile (linear interpolation) of their class's radii; with
    ``"uncertainty"``, the points whose own label's share among their ``k``
    nearest training points (themselves counted) is at least the
    ``100·α``-th percentile of those shares; with ``"none"``, all points.
    :meth:`score` returns (Algorithm 2)

        ``ξ = d(x, Ĥ_h̃) / (d(x, Ĥ_h) + min_dist)``

    where ``h`` is the given prediction, ``d(x, H)`` the distance to the
    nearest point of ``H`` and ``h̃`` the other class whose set is nearest
    (ties: the lower class).  Low ``ξ`` is suspicious; reject below a threshold.

    A class whose set is empty (no training point, or all filtered out) is
    at distance ``+inf``, with a warning at :meth:`fit`: a prediction of such
    a class scores 0, and it is never the nearest other class unless every
    other class is empty too (then ``ξ = inf``).  Rows repeated under
    different labels are warned about at :meth:`fit`: a query at such a
    point is at distance 0 from both classes and scores 0.

    The two distances of a score come from
    :func:`pll.neighbors.grouped.nearest_own_and_other`: with ``knn="exact"``
    one certified pass over the training rows serves all class sets;
    ``auto`` beyond its threshold searches the cells nearest the query in the
    predicted class's set and among all other sets
    (:mod:`pll.neighbors.grouped_cells`: a distance never below the exact
    one); the other approximate backends search each class set in turn.

    Parameters
    ----------
    k : int, default=10
        Neighbors of the density and uncertainty filters.
    alpha : float, default=0.0
        Fraction to filter, in [0, 1); ignored by ``filtering="none"``.
    filtering : {"none", "density", "uncertainty"}, default="none"
    min_dist : float, default=1e-12
        Added to the denominator, so that a query on a point of its
        predicted class gets a finite score.
    knn : str, default="auto"
        Neighbor backend (see :func:`pll.neighbors.kneighbors`).
    knn_options : dict, optional
        Options of the neighbor backend.

    Attributes
    ----------
    classes_ : ndarray of shape (l,)
        Sorted class labels (``classes`` given to :meth:`fit`, else those seen).
    X_ : ndarray of shape (n, d)
        The training rows.
    labels_ : ndarray of shape (n,), int64
        Position in ``classes_`` of each training row's label.
    kept_ : ndarray of shape (n,), bool
        Rows kept by the filter: ``Ĥ_ℓ`` is ``X_[kept_ & (labels_ == ℓ)]``.
    filter_values_ : ndarray of shape (n,) or None
        What the filter thresholds: each row's radius ``r_k`` within its class
        (density) or its own label's share among its neighbors (uncertainty);
        NaN for rows outside ``members``; None when nothing is filtered
        (``"none"`` or ``alpha=0``).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (d,)
        Only when ``X`` was a data frame with string column names.

    Parameters are checked at :meth:`fit` (``_parameter_constraints``), and
    so are the rows (finite, 2-d).  :meth:`score` is not scikit-learn's
    scalar score: it gives each prediction its trust score.

    Examples
    --------
    >>> import numpy as np, pll
    >>> X = np.array([[0.0], [1.0], [10.0], [11.0]])
    >>> ts = pll.TrustScore().fit(X, np.array([0, 0, 1, 1]))
    >>> ts.score(np.array([[2.0], [2.0]]), np.array([0, 1]))
    array([8.   , 0.125])
    >>> ts.score_training(return_closest=True)
    (array([10.,  9.,  9., 10.]), array([1, 1, 0, 0]))
    """

    _expected_failed_checks = {
        "check_fit_score_takes_y": (
            "fit(X, labels) takes a method's disambiguation, score(X, predicted) the predictions to score "
            "(one trust score per row), not targets y"
        ),
        "check_n_features_in_after_fitting": (
            "it calls score(X, y=...) by keyword, and score's second argument is predicted"
        ),
    }
    """scikit-learn checks this estimator fails, and why (``tests/unit/test_estimator_checks.py`` runs them)."""
    _parameter_constraints = {
        "k": [Interval(Integral, 1, None, closed="left")],
        "alpha": [Interval(Real, 0.0, 1.0, closed="left")],
        "filtering": [StrOptions(dict.fromkeys(FILTERS).keys())],  # ordered in the message
        "min_dist": [Interval(Real, 0.0, None, closed="left")],
        "knn": [str],
        "knn_options": [dict, None],
    }

    def __init__(self, k=10, *, alpha=0.0, filtering="none", min_dist=1e-12, knn="auto", knn_options=None):
        self.k = k
        self.alpha = alpha
        self.filtering = filtering
        self.min_dist = min_dist
        self.knn = knn
        self.knn_options = knn_options

    def _nearest(self, X_set, X_query, k=1):
        """Distances to the ``k`` nearest rows of ``X_set`` (``X_query=None``: its own rows, self excluded)."""
        return kneighbors(X_set, X_query, k, self.knn, **dict(self.knn_options or {})).distances

    def fit(self, X, labels, classes=None, members=None):
        """Build each class's α-high-density set from labelled rows.

        Parameters
        ----------
        X : array of shape (n, d)
        labels : array of shape (n,)
            Each row's label, e.g. a method's disambiguation of its training rows.
        classes : array of shape (l,), optional
            All classes a prediction may name (default: those in ``labels``);
            a class without rows gets an empty set.
        members : bool array of shape (n,), optional
            Rows that may enter the class sets (default: all); the filter runs
            on these rows only.  :meth:`score_training` still scores every row.

        Returns
        -------
        self
        """
        check_params(self)
        X = check_X(self, X, reset=True)
        labels = np.asarray(labels)
        if labels.ndim == 2 or (labels.dtype == object and labels.size
                                and isinstance(labels.flat[0], (set, frozenset, list, tuple))):
            raise InvalidDataError(
                f"TrustScore.fit takes one label per row, not candidate sets: "
                "disambiguate the bags first, e.g. TrustScore().fit(X, method.disambiguate().labels) with a fitted "
                "pll method"
            )
        if labels.shape != (X.shape[0],):
            raise InvalidDataError(f"TrustScore.fit: {X.shape[0]} rows but labels of shape {labels.shape}")
        self.classes_ = np.unique(labels if classes is None else np.asarray(classes))
        if self.classes_.size < 2:
            raise InvalidDataError(
                f"TrustScore.fit: a trust score compares classes, but only {self.classes_.size} class(es) "
                f"were given: {self.classes_.tolist()}"
            )
        self.labels_ = _codes(labels, self.classes_, "TrustScore.fit labels")
        self.X_ = X
        eligible = np.ones(X.shape[0], dtype=bool) if members is None else np.asarray(members)
        if eligible.shape != (X.shape[0],) or eligible.dtype != bool:
            raise InvalidDataError(f"TrustScore.fit: members must be a bool array of shape ({X.shape[0]},)")
        self.kept_, self.filter_values_ = self._filter(np.flatnonzero(eligible))
        sizes = np.bincount(self.labels_[self.kept_], minlength=self.classes_.size)
        empty = [str(c) for c in self.classes_[sizes == 0]]
        if empty:
            warnings.warn(
                f"TrustScore: class(es) {', '.join(empty)} have no points after filtering={self.filtering!r} "
                f"(alpha={self.alpha}); their distance is +inf, so predicting them scores 0",
                stacklevel=2,
            )
        conflicts = _cross_class_duplicates(X[self.kept_], self.labels_[self.kept_])
        if conflicts:
            warnings.warn(
                f"TrustScore: {conflicts} kept training rows repeat the features of a row with another label; "
                "a query there is at distance 0 from both classes and scores 0",
                stacklevel=2,
            )
        return self

    def _filter(self, eligible):
        """Rows kept by the filter among ``eligible``, and the statistic it thresholds (None without a filter)."""
        n = self.X_.shape[0]
        keep = np.zeros(n, dtype=bool)
        if self.filtering == "none" or self.alpha == 0.0 or eligible.size == 0:
            keep[eligible] = True
            return keep, None
        value = np.full(n, np.nan)
        if self.filtering == "density":
            for c in range(self.classes_.size):
                rows = eligible[self.labels_[eligible] == c]
                k = min(self.k, rows.size)
                value[rows] = 0.0  # with k' = 1 the ball holds the point alone
                if k > 1:
                    value[rows] = self._nearest(self.X_[rows], None, k - 1)[:, -1]
                if rows.size:
                    keep[rows] = value[rows] <= np.percentile(value[rows], 100.0 * (1.0 - self.alpha))
            return keep, value
        k = min(self.k, eligible.size)
        same = np.ones(eligible.size)
        if k > 1:
            nb = kneighbors(self.X_[eligible], None, k - 1, self.knn, **dict(self.knn_options or {}))
            own = self.labels_[eligible]
            same += (own[nb.indices] == own[:, None]).sum(axis=1)
        value[eligible] = same / k
        keep[eligible] = value[eligible] >= np.percentile(value[eligible], 100.0 * self.alpha)
        return keep, value

    def _check_fitted(self):
        check_fitted(self, "kept_", "TrustScore is not fitted: call fit first")

    def distances(self, X):
        """Distance of every row to the nearest point of every class set.

        Parameters
        ----------
        X : array of shape (n, d)

        Returns
        -------
        ndarray of shape (n, l)
            ``+inf`` for classes with an empty set.
        """
        self._check_fitted()
        X = check_X(self, X, reset=False, allow_empty=True)
        return self._nearest_sets(X) if X.shape[0] else np.empty((0, self.classes_.size))

    def training_distances(self):
        """:meth:`distances` of the training rows, each excluded from its own class set by index.

        Returns
        -------
        ndarray of shape (n, l)
        """
        self._check_fitted()
        return self._nearest_sets(None)

    def _nearest_sets(self, X_query):
        """Distances from each query row (None: the training rows, each left out by index) to every class set."""
        options = dict(self.knn_options or {})
        return nearest_by_group(self.X_, self._groups(), self.classes_.size, X_query, self.knn, **options)[1]

    def _groups(self):
        """Each training row's class-set index, -1 for rows the filter left out."""
        return np.where(self.kept_, self.labels_, -1)

    def _own_and_other(self, X_query, codes, exclude=None, known_own=None, report=None):
        """Distances of each query (None: the training rows, each left out by index) to the set of its
        predicted class ``codes`` and to the nearest other set, with that set's class position
        (``known_own``: own distances already found, NaN elsewhere; ``report``: as in :meth:`score`)."""
        options = dict(self.knn_options or {})
        return nearest_own_and_other(self.X_, self._groups(), self.classes_.size, codes, X_query, self.knn,
                                     exclude=exclude, known_own=known_own, report=report, **options)

    def _ratio(self, own, other, closest, return_closest):
        """``ξ`` from the two distances; a prediction whose set is empty scores 0."""
        with np.errstate(invalid="ignore"):
            score = other / (own + self.min_dist)
        score[np.isinf(own)] = 0.0
        return (score, self.classes_[closest]) if return_closest else score

    def score(self, X, predicted, return_closest=False, neighbors=None, report=None):
        """Trust score of each prediction.

        Parameters
        ----------
        X : array of shape (n, d)
        predicted : array of shape (n,)
            Predicted labels (values of ``classes_``), e.g. from any classifier.
        return_closest : bool, default=False
            Also return ``h̃``, the nearest class other than the prediction.
        neighbors : NeighborResult, optional
            The nearest training rows of ``X`` among the rows given to
            :meth:`fit`, in the same features (e.g. those a kNN method
            already searched): rows whose lists settle both distances take
            them from there, the others are searched (see
            :meth:`_ratio_from_neighbors`).  The result is the same as without
            them when the lists are exact; approximate lists give scores as
            good as their recall.
        report : dict, optional
            Filled with how the search ended where ``auto`` searched by cells
            (:func:`~pll.neighbors.grouped.nearest_own_and_other`): the
            ``agreement`` of trust decisions with exact search on a sample,
            the cells probed (``n_probe``) and the ``decision``; left empty
            by an exact search, or when the neighbor lists settled every row.

        Returns
        -------
        score : ndarray of shape (n,)
        closest : ndarray of shape (n,)
            Only with ``return_closest``.
        """
        self._check_fitted()
        X = check_X(self, X, reset=False, allow_empty=True)
        codes = _codes(predicted, self.classes_, "predicted labels")
        if codes.size != X.shape[0]:
            raise InvalidDataError(f"{codes.size} predicted labels for {X.shape[0]} rows")
        if neighbors is not None:
            return self._ratio_from_neighbors(X, codes, neighbors, return_closest, report)
        return self._ratio(*self._own_and_other(X, codes, report=report), return_closest)

    def score_training(self, predicted=None, return_closest=False, neighbors=None, report=None):
        """Trust scores of the training rows, each excluded from its own class set.

        Parameters
        ----------
        predicted : array of shape (n,), optional
            Default: the labels given to :meth:`fit`.
        return_closest : bool, default=False
        neighbors : NeighborResult, optional
            The training rows' own neighbors (each row excluded), as in :meth:`score`.
        report : dict, optional
            As in :meth:`score`.

        Returns
        -------
        score : ndarray of shape (n,)
        closest : ndarray of shape (n,)
            Only with ``return_closest``.
        """
        self._check_fitted()
        codes = self.labels_ if predicted is None else _codes(predicted, self.classes_, "predicted labels")
        if codes.size != self.X_.shape[0]:
            raise InvalidDataError(f"{codes.size} predicted labels for {self.X_.shape[0]} training rows")
        if neighbors is not None:
            return self._ratio_from_neighbors(None, codes, neighbors, return_closest, report)
        return self._ratio(*self._own_and_other(None, codes, report=report), return_closest)

    def _ratio_from_neighbors(self, X_query, codes, neighbors, return_closest, report=None):
        """:meth:`_ratio` of each query (None: the training rows) from its neighbor list where it settles it.

        A list holds a query's ``k`` nearest training rows, nearest first, so
        the first member of a class set in it is that set's nearest row.  The
        score needs two distances, to the predicted class's set and to the
        nearest other set: a list that holds members of both settles them.
        Naming ``h̃`` also needs that other member to be nearer than the
        list's last row (beyond it a row of a lower class may lie at the same
        distance).  The queries left are searched by :meth:`_own_and_other`,
        for the other sets only where the list holds a member of the own one.
        """
        n = codes.size
        nb = neighbors.take(neighbors.k, n, self_excluded=X_query is None)
        check_indices(nb.indices, self.X_.shape[0])
        member = self._groups()[nb.indices]
        own_hit = member == codes[:, None]
        other_hit = (member >= 0) & ~own_hit
        rows = np.arange(n)
        own = nb.distances[rows, own_hit.argmax(axis=1)]
        other = nb.distances[rows, other_hit.argmax(axis=1)]
        settled = own_hit.any(axis=1) & other_hit.any(axis=1)
        with np.errstate(invalid="ignore"):
            score = other / (own + self.min_dist)
        closest = None
        if return_closest:
            settled &= other < nb.distances[:, -1]
            tied = other_hit & (nb.distances == other[:, None])
            closest = np.where(tied, member, self.classes_.size).min(axis=1)
        rest = np.flatnonzero(~settled)
        if rest.size:
            queries = self.X_[rest] if X_query is None else X_query[rest]
            known = np.where(own_hit.any(axis=1), own, np.nan)[rest]
            found = self._own_and_other(queries, codes[rest], exclude=rest if X_query is None else None,
                                        known_own=known, report=report)
            found = self._ratio(*found, return_closest)
            if return_closest:
                score[rest], closest[rest] = found[0], np.searchsorted(self.classes_, found[1])
            else:
                score[rest] = found
        return (score, self.classes_[closest]) if return_closest else score


# --- The trust score as a reject option of a partial-label method ---------------------------------

CLASS_SETS = ("all", "single", "accepted")
"""Which disambiguated training rows form the class sets: all of them, only rows whose bag holds a
single candidate, or only rows the method's own reject option accepted."""
DEFAULT_CLASS_SETS = "all"
"""Measured by benchmarks/trust_class_sets.py (bird-song and msrc-v2, three methods, 5 seeds): at
equal rejection rates the three choices give the same risk within 0.003; "all" fills every class set
and does not tie the trust score to the method's own reject option."""
DEFAULT_THRESHOLD = 1.5
"""Accept when ``ξ > 1.5``: the nearest other class is 1.5 times as far as the predicted one.  On the
real-world data it rejects about as much as the methods' own options (0.72 against 0.74) at the same
risk (R_0.10 0.103 against 0.101); ``ξ > 1`` accepts too many errors (R_0.10 0.247)."""


def class_set_rows(S, accepted, class_sets=DEFAULT_CLASS_SETS):
    """Training rows whose disambiguated labels enter the class sets (bool, shape (n,)).

    Parameters
    ----------
    S : bool array of shape (n, l)
        The training rows' candidate bags.
    accepted : bool array of shape (n,)
        The method's own reject decision on its disambiguation of those rows.
    class_sets : {"all", "single", "accepted"}
    """
    if class_sets == "all":
        return np.ones(S.shape[0], dtype=bool)
    if class_sets == "single":
        return np.asarray(S).sum(axis=1) == 1
    if class_sets == "accepted":
        return np.asarray(accepted, dtype=bool).copy()
    raise InvalidParameterError(f"class_sets must be one of {', '.join(CLASS_SETS)}, got {class_sets!r}")


def partial_label_trust(X, S, labels, accepted, class_sets=DEFAULT_CLASS_SETS, **params):
    """A :class:`TrustScore` whose class sets come from a method's disambiguation of its training rows.

    Parameters
    ----------
    X : array of shape (n, d)
        The training rows, in the features the method used.
    S : bool array of shape (n, l)
        Their candidate bags.
    labels, accepted : arrays of shape (n,)
        The method's disambiguation of these rows and its own reject decision.
    class_sets : {"all", "single", "accepted"}
    **params
        :class:`TrustScore` parameters.
    """
    members = class_set_rows(S, accepted, class_sets)
    return TrustScore(**params).fit(X, labels, classes=np.arange(S.shape[1]), members=members)


def with_trust(prediction, score, threshold=DEFAULT_THRESHOLD, *, no_support=None):
    """``prediction`` with its reject option replaced by the trust score: accept iff ``score > threshold``.

    Reasons (:mod:`pll.methods.reasons`): ``no_support`` where the row is far from the
    training data, else ``conflict``: a rejected ``ξ ≤ threshold`` says the
    nearest other class is at most ``threshold`` times as far as the
    predicted one, i.e. about as close.  "Far" is ``no_support`` when given
    (bool, shape (n,)), else the method's own support test carried in
    ``prediction.evidence`` (its ``k``-th neighbor distance in the features
    the trust score uses, with its radius); a method without one
    (:class:`~pll.PlClassifier`) gives none, and every rejection is a
    ``conflict``.

    Examples
    --------
    >>> import numpy as np, pll
    >>> X = np.array([[0.0], [0.1], [0.2], [0.3], [0.4], [0.5]])
    >>> clf = pll.PlKnn(n_neighbors=2).fit(X, [0, 0, 0, 1, 1, 1])
    >>> Q = np.array([[0.05], [0.25], [9.0]])
    >>> own = clf.predict_with_reject(Q)
    >>> ts = pll.TrustScore().fit(X, clf.disambiguate().labels)
    >>> with_trust(own, ts.score(Q, own.labels)).reason
    array(['none', 'conflict', 'no_support'], dtype='<U10')
    """
    score = np.asarray(score, dtype=np.float64)
    accept = score > threshold
    evidence = {}
    if no_support is not None:
        evidence[NO_SUPPORT] = np.asarray(no_support, dtype=bool)
    elif prediction.evidence is not None and NO_SUPPORT in prediction.evidence:
        evidence = {key: prediction.evidence[key] for key in SUPPORT_EVIDENCE if key in prediction.evidence}
    evidence[CONFLICT] = ~accept
    return RejectPrediction(
        labels=prediction.labels,
        accept=accept,
        score=score,
        guess=prediction.guess,
        reason=assign(accept, evidence),
        evidence=evidence,
    )

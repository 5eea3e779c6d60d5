"""What every partial-label method shares: the prediction type, the scikit-learn interface and neighbor plumbing."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.pipeline import Pipeline
from sklearn.utils._param_validation import Interval

from ..errors import InvalidParameterError
from ..neighbors import kneighbors
from ..utils.progress import row_blocks, track
from .reasons import assign, support_evidence, support_radius
from ..utils.validation import check_X, check_fitted, check_params, empty_as_all, encode_bags


@dataclass(frozen=True, eq=False)
class RejectPrediction:
    """Predictions with a reject option.

    Attributes
    ----------
    labels : ndarray of shape (n,)
        Predicted class of every row (also for rejected rows): a value of the
        estimator's ``classes_``, i.e. the class index when it was fitted on a
        0/1 matrix.
    accept : ndarray of shape (n,), bool
        False where the method abstains.
    score : ndarray of shape (n,), float64
        The method's confidence: higher means more certain; ``accept`` is
        ``score > threshold`` for the method's own threshold.
    guess : ndarray of shape (n,), bool
        True where the label was drawn at random among tied candidates.
    beliefs, plausibilities : ndarray of shape (n, l) or None
        DST-PLL's singleton beliefs and plausibilities.
    shares : ndarray of shape (n, l) or None
        PL-kNN's vote shares.
    sets : ndarray of shape (n, l), bool, or None
        Conformal prediction sets (:class:`pll.ConformalSets`): ``accept`` is
        "the set is a single label".
    reason : ndarray of shape (n,), str, or None
        Why each row was rejected, a code of :data:`pll.methods.reasons.REASONS`
        (``none`` exactly where accepted); see :mod:`pll.methods.reasons`.
    evidence : dict of ndarrays of shape (n,), or None
        What the reasons were decided on, for every row: each condition the
        option evaluates, under its code's name (bool), and the numbers it
        thresholds (each method documents its own).
    """

    labels: np.ndarray
    accept: np.ndarray
    score: np.ndarray
    guess: np.ndarray
    beliefs: np.ndarray | None = None
    plausibilities: np.ndarray | None = None
    shares: np.ndarray | None = None
    sets: np.ndarray | None = None
    reason: np.ndarray | None = None
    evidence: dict | None = None

    def per_class(self):
        """The per-class arrays this method fills, by column prefix."""
        named = {"belief": self.beliefs, "plausibility": self.plausibilities, "share": self.shares}
        return {k: v for k, v in named.items() if v is not None}

    def with_accept(self, accept):
        """This prediction with another accept decision (e.g. a calibrated threshold), its reasons recomputed.

        The conditions in ``evidence`` hold for every row, so only the codes
        change (:func:`pll.methods.reasons.assign`); without reasons, none are added.
        """
        accept = np.asarray(accept, dtype=bool)
        reason = None if self.reason is None else assign(accept, self.evidence)
        return replace(self, accept=accept, reason=reason)

    def to_frame(self, classes, y_true=None, rows=None):
        """A table with ``row``, ``y_true``, ``label``, ``accept``, ``score``, ``guess`` and per-class columns.

        With reasons, ``reason`` follows ``guess``, and each entry of
        ``evidence`` is a column ``evidence_<name>`` at the end.
        """
        import pandas as pd

        n = self.labels.shape[0]
        cols = {
            "row": np.arange(n) if rows is None else np.asarray(rows),
            "y_true": np.full(n, -1, dtype=np.int64) if y_true is None else np.asarray(y_true, dtype=np.int64),
            "label": self.labels,
            "accept": self.accept,
            "score": self.score,
            "guess": self.guess,
        }
        if self.reason is not None:
            cols["reason"] = self.reason
        for prefix, values in self.per_class().items():
            for j, name in enumerate(classes):
                cols[f"{prefix}_{name}"] = values[:, j]
        if self.sets is not None:
            cols["set"], cols["set_size"] = set_labels(self.sets, classes), self.sets.sum(axis=1)
        for name, values in (self.evidence or {}).items():
            cols[f"evidence_{name}"] = values
        return pd.DataFrame(cols)


def set_labels(sets, classes):
    """Each row's set of labels as one string, ``a|b`` (empty for an empty set), shape (n,), object."""
    names = np.asarray([str(c) for c in classes], dtype=object)
    return np.array(["|".join(names[row]) for row in np.asarray(sets, dtype=bool)], dtype=object)


def in_candidates(classes, labels, S):
    """Whether each predicted label lies in its row's candidate set, bool of shape (n,).

    ``labels`` are values of ``classes`` (a fitted ``classes_``); ``S`` takes any
    form ``fit`` takes (with 1-d ``y``, "in the set" is "equal to the label").
    A label the model does not know is in no set, so an empty set is never hit.
    """
    labels = np.asarray(labels)
    bags, _ = encode_bags(S, labels.size, classes, unknown="ignore")
    return bags[np.arange(labels.size), np.searchsorted(classes, labels)]


def predict_with_reject(estimator, X, **params):
    """``estimator.predict_with_reject(X, **params)``, also through a :class:`~sklearn.pipeline.Pipeline`.

    A pipeline whose last step is a pll method (e.g. ``make_pipeline(MinMaxScaler(),
    pll.DstPll())``, or a grid search's ``best_estimator_``) transforms ``X`` with
    its other steps, then asks the method.

    Examples
    --------
    >>> import numpy as np, pll
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> pipe = make_pipeline(StandardScaler(), pll.PlKnn(n_neighbors=2))
    >>> pipe = pipe.fit([[0.0], [1.0], [9.0], [10.0]], [{"a", "b"}, {"a"}, {"c"}, {"b", "c"}])
    >>> predict_with_reject(pipe, [[0.5], [9.5]]).labels
    array(['a', 'c'], dtype='<U1')
    """
    while isinstance(estimator, Pipeline):
        if len(estimator) > 1:
            X = estimator[:-1].transform(X)
        estimator = estimator[-1]
    return estimator.predict_with_reject(X, **params)


class NeighborMethod(ClassifierMixin, BaseEstimator):
    """Base of the kNN-based partial-label methods: a scikit-learn classifier whose targets are candidate sets.

    ``fit(X, S)`` takes the candidate sets ``S`` as a 0/1 or bool matrix of
    shape (n, l) (dense or scipy sparse; column ``j`` is class ``j``, so
    ``classes_`` is ``arange(l)`` and predictions are class indices), as a
    sequence of label sets (one ``set`` of hashable labels per row), or as 1-d
    labels ``y`` (one candidate per row).  ``classes_`` holds the sorted labels
    and :meth:`predict` returns them.  Parameters are checked at ``fit``
    against ``_parameter_constraints``; so are ``X`` (finite, 2-d) and ``S``.

    * :meth:`predict_with_reject` is the method's own reject option;
      :func:`predict_with_reject` reaches it through a pipeline.
    * :meth:`decision_function` is the reject score (one value per row,
      higher = more certain; the method accepts where it exceeds ``threshold``).
    * :meth:`score` is the partial-label accuracy: the share of rows whose
      prediction lies in their candidate set (accuracy, for 1-d ``y``);
      :func:`pll.evaluation.make_risk_scorer` scores the reject option.
    * ``random_state=None`` draws fresh randomness, as in scikit-learn.  A
      draw among tied labels is keyed by (seed, row position), so a tied row
      may get another label when predicted in another batch or order.

    * Every prediction carries a reason code (:mod:`pll.methods.reasons`) and its
      evidence.  The support test is shared: :meth:`fit` stores
      ``support_radius_``, the ``support_quantile`` of the training rows' own
      ``k``-th neighbor distances (their precomputed neighbors when given, else
      one search; None when ``support_quantile`` is None, ``+inf`` with no
      more than ``k`` training rows, where no row has ``k`` others), and a row
      whose ``k``-th neighbor lies farther is ``no_support``.

    Subclasses name the parameter that counts neighbors (``_k_param``) and
    implement :meth:`_predict_block`, which turns neighbor indices and
    distances of a block of queries (with their candidate sets ``s̃``) into
    predictions (class indices).
    """

    _k_param = "n_neighbors"
    _query_stream = 1
    _train_stream = 2
    _expected_failed_checks = {
        "check_fit_score_takes_y": "fit(X, S) and score(X, S) take candidate sets S, not labels y",
        "check_n_features_in_after_fitting": (
            "it calls score(X, y=...) by keyword, and score's second argument is S; predict, "
            "decision_function and predict_proba pass it before it reaches score"
        ),
        "check_supervised_y_2d": "a 2-d S is a candidate matrix (a column per class), not a column of labels",
        "check_classifiers_train": (
            "decision_function is the reject score (how sure each prediction is), which the check reads as "
            "class scores (their sign for two classes, their argmax for more)"
        ),
        "check_classifiers_classes": "decision_function is the reject score, which the check reads as class scores",
    }
    """scikit-learn checks this estimator fails, and why (``tests/unit/test_estimator_checks.py`` runs them)."""
    _parameter_constraints = {
        "knn": [str],
        "knn_options": [dict, None],
        "random_state": [Interval(Integral, 0, None, closed="left"), None],
        "support_quantile": [Interval(Real, 0.0, 1.0, closed="right"), None],
    }

    def _n_neighbors_needed(self):
        return getattr(self, self._k_param)

    def _min_training_rows(self):
        """Training rows ``fit`` needs: the ``k`` neighbors of a new query."""
        return self._n_neighbors_needed()

    def fit(self, X, S, neighbors=None):
        """Store the training rows and candidate sets (and the rows' own neighbors, when precomputed).

        Parameters
        ----------
        X : array-like of shape (n, d)
        S : candidate sets of the n rows
            A 0/1 or bool matrix of shape (n, l), dense or scipy sparse; a
            sequence of n label sets; or 1-d labels of shape (n,).
        neighbors : NeighborResult, optional
            The training rows' own neighbors (``kneighbors(X, None, k)``).

        Returns
        -------
        self
        """
        check_params(self)
        X = check_X(self, X, reset=True)
        self.S_train_, self.classes_ = encode_bags(S, X.shape[0])
        k, needed = self._n_neighbors_needed(), self._min_training_rows()
        if X.shape[0] < needed:
            raise InvalidParameterError(
                f"{type(self).__name__}: {self._k_param}={k} needs at least {needed} training rows, "
                f"got n_samples={X.shape[0]}; lower {self._k_param} to at most {max(X.shape[0] - needed + k, 0)}"
            )
        self.X_train_ = X
        self.n_classes_ = len(self.classes_)
        self._train_neighbors = None if neighbors is None else neighbors.take(k, X.shape[0], self_excluded=True)
        self._fit_derived()
        self.support_radius_ = self._fit_support()
        return self

    def _fit_derived(self):
        """Compute fitted state that follows from ``X_train_`` and ``S_train_`` (subclasses)."""

    def _own_distances(self):
        """The training rows' distances to their ``k`` nearest other rows, or None when there are no ``k`` others.

        Precomputed (or already searched) neighbors serve; otherwise one search,
        not kept: a fitted model does not carry ``n × k`` neighbors just for a
        radius.
        """
        k = self._n_neighbors_needed()
        if self._train_neighbors is not None:
            return self._train_neighbors.distances
        if self.X_train_.shape[0] <= k:
            return None
        return kneighbors(self.X_train_, None, k, self.knn, **self._knn_options()).distances

    def _fit_support(self):
        """``support_radius_``: the ``support_quantile`` of the training rows' own ``k``-th neighbor distances."""
        if self.support_quantile is None:
            return None
        distances = self._own_distances()
        return np.inf if distances is None else support_radius(distances[:, -1], self.support_quantile)

    def _support(self, distances):
        """The support evidence of a block of queries from their neighbor distances (:mod:`pll.methods.reasons`)."""
        return support_evidence(distances[:, -1], self.support_radius_)

    def __setstate__(self, state):
        """Models pickled by earlier code load and predict as they did.

        Before ``classes_`` existed a model was always fitted on a 0/1 matrix
        and predicts indices; before reasons, it lacks the margin parameters
        (they take their defaults) and ``support_radius_`` (None: no row is
        ``no_support``).
        """
        if "S_train_" in state and "classes_" not in state:
            state = {
                **state,
                "classes_": np.arange(state["S_train_"].shape[1]),
                "n_features_in_": state["X_train_"].shape[1],
            }
        state = {**missing_defaults(type(self), state), **state}
        if "S_train_" in state and "support_radius_" not in state:
            state["support_radius_"] = None
        super().__setstate__(state)

    def _check_fitted(self):
        check_fitted(self, "S_train_")

    def _knn_options(self):
        return dict(self.knn_options or {})

    def _neighbors_for(self, X, neighbors):
        k = self._n_neighbors_needed()
        if neighbors is not None:
            return neighbors.take(k, None if X is None else len(X), self_excluded=X is None)
        if X is None:
            if self._train_neighbors is None:
                self._train_neighbors = kneighbors(self.X_train_, None, k, self.knn, **self._knn_options())
            return self._train_neighbors
        return kneighbors(self.X_train_, X, k, self.knn, **self._knn_options())

    def predict(self, X, neighbors=None):
        """Predicted class of every row: values of ``classes_``, shape (n,)."""
        return self.predict_with_reject(X, neighbors=neighbors).labels

    def decision_function(self, X, neighbors=None):
        """The reject score of every row, shape (n,): higher = more certain (see the method's docstring)."""
        return self.predict_with_reject(X, neighbors=neighbors).score

    def score(self, X, S, sample_weight=None):
        """Partial-label accuracy: the (weighted) share of rows whose prediction lies in their candidate set.

        ``S`` takes any form :meth:`fit` takes; with 1-d labels this is the
        accuracy.  Labels the model never saw are in no set.
        """
        return float(np.average(in_candidates(self.classes_, self.predict(X), S), weights=sample_weight))

    def conformity(self, X, neighbors=None):
        """How well each class fits each row, float64 of shape (n, l) in [0, 1]: higher = more conforming.

        The per-class score that conformal prediction sets are built from
        (:class:`pll.ConformalSets`); each method says what it is.  Every
        class is a candidate here: sets are restricted to a row's own
        candidates afterwards.
        """
        self._check_fitted()
        X = check_X(self, X, reset=False)
        nb = self._neighbors_for(X, neighbors)
        cand = np.ones((nb.n_queries, self.n_classes_), dtype=bool)
        return self._conformity(nb, self._predict(nb, cand, self._query_stream, "conformity"))

    def _conformity(self, nb, prediction):
        raise NotImplementedError

    def predict_with_reject(self, X, neighbors=None, candidates=None):
        """Predictions with the method's reject option.

        Parameters
        ----------
        X : array-like of shape (n, d)
        neighbors : NeighborResult, optional
            Precomputed neighbors of ``X`` among the training rows.
        candidates : candidate sets of the n rows, optional
            Each row's candidate set ``s̃`` (any form :meth:`fit` takes, over
            ``classes_``); the prediction stays inside it.  Default: all
            classes (an empty row also means all classes).

        Returns
        -------
        RejectPrediction
            ``labels`` are values of ``classes_``.
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
        return self._labelled(self._predict(nb, cand, self._query_stream, "predictions"))

    def disambiguate(self):
        """Predictions for the training rows, each restricted to its own bag.

        Each row's neighbors exclude the row itself; a row with an empty bag
        is treated as if every class were a candidate.
        """
        self._check_fitted()
        nb = self._neighbors_for(None, None)
        cand = empty_as_all(self.S_train_)
        return self._labelled(self._predict(nb, cand, self._train_stream, "disambiguation"))

    def _labelled(self, prediction):
        """``prediction`` with its class indices replaced by the values of ``classes_``."""
        return replace(prediction, labels=self.classes_[prediction.labels])

    def _predict(self, nb, cand, stream, what):
        out = None
        for b in track(row_blocks(nb.n_queries, self._bytes_per_row(nb.k)), f"{type(self).__name__} {what}"):
            part = self._predict_block(nb.indices[b], nb.distances[b], cand[b], np.arange(b.start, b.stop), stream)
            if out is None:  # allocate once, then fill block by block: no concatenated copies
                out = {name: _allocate(v, nb.n_queries) for name, v in vars(part).items()}
            for name, values in out.items():
                _fill(values, getattr(part, name), b)
        return RejectPrediction(**out)

    def _bytes_per_row(self, k):
        return 8 * k * self.n_classes_

    def _predict_block(self, indices, distances, candidates, rows, stream):
        raise NotImplementedError


def without_support_test(estimator):
    """``estimator`` with the ``no_support`` test off (``support_quantile=None``), if it has one.

    For models fitted only to calibrate (the validation hold-out, conformal
    sets): the test would cost a neighbor search of their training rows at
    ``fit``, and nothing they report depends on it.
    """
    if "support_quantile" in estimator.get_params():
        estimator.set_params(support_quantile=None)
    return estimator


def _allocate(value, n):
    """An empty array (or dict of arrays) of ``n`` rows shaped like one block's ``value``; None stays None."""
    if value is None:
        return None
    if isinstance(value, dict):
        return {name: _allocate(v, n) for name, v in value.items()}
    return np.empty((n, *value.shape[1:]), dtype=value.dtype)


def _fill(out, value, rows):
    if isinstance(out, dict):
        for name, values in out.items():
            _fill(values, value[name], rows)
    elif out is not None:
        out[rows] = value


def missing_defaults(cls, state):
    """The constructor defaults of the parameters ``state`` lacks (a model pickled before they existed)."""
    params = inspect.signature(cls.__init__).parameters.values()
    return {p.name: p.default for p in params if p.default is not p.empty and p.name not in state}

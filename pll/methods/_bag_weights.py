"""What PlClassifier and Proden share: weights over each bag, where they start, and the base class that predicts from them.

Not in :mod:`pll.methods._base`: the kNN starts (:data:`INITIALISATIONS`)
are PL-kNN and IPAL, whose modules import that one.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from ..utils._random import pick_among, seed_to_int
from ..errors import InvalidParameterError
from .reasons import CONFLICT, assign
from ..utils.validation import check_X, check_fitted, empty_as_all, encode_bags
from ._base import NeighborMethod, RejectPrediction, in_candidates, missing_defaults, without_support_test
from ._ipal import Ipal
from ._pl_knn import PlKnn

# Probabilities within this relative distance of the best count as tied.
TIE_RTOL = 1e-9
# Neighbors of the kNN initialisations (PL-kNN's votes, IPAL's propagation): 10 of each row, the row itself
# excluded, so they need at least 11 training rows.
INIT_NEIGHBORS = 10
# The initial weights by ``init`` name: the kNN method whose disambiguation gives them (None: uniform);
# "auto" is IPAL's where there are rows enough for its neighbors, else uniform.
INITIALISATIONS = {"uniform": None, "pl_knn": PlKnn, "ipal": Ipal, "auto": Ipal}


def _rows_normalised(W, fallback):
    """Each row of ``W`` divided by its sum; a row that sums to 0 becomes the same row of ``fallback``."""
    total = W.sum(axis=1, keepdims=True)
    ok = total > 0.0
    return np.where(ok, W / np.where(ok, total, 1.0), fallback)


def restricted(P, bags):
    """``P`` restricted to each row's bag and renormalised; a row whose bag gets no probability: uniform over the bag."""
    return _rows_normalised(np.where(bags, P, 0.0), bags / bags.sum(axis=1, keepdims=True))


def class_balance_factors(y, weights, n_classes):
    """Factors that give every class of the copies ``y`` the same total weight, and the classes' shares before.

    Returns the factor of every copy, shape (m,), and the prior: each class's
    share of ``weights``, shape (n_classes,).
    """
    mass = np.bincount(y, weights=weights, minlength=n_classes)
    present = mass > 0.0
    factor = np.where(present, mass.sum() / (present.sum() * np.where(present, mass, 1.0)), 0.0)
    return factor[y], mass / mass.sum()


def prior_corrected(P, prior):
    """Probabilities of a model fitted on class-balanced weights, moved back to the class shares ``prior`` (Bayes' rule).

    ``prior`` None (a model pickled before class balancing) leaves ``P`` as
    it is; a row that the correction leaves without probability keeps ``P``.
    """
    return P if prior is None else _rows_normalised(P * prior, P)


def initial_weights(init, X, bags, seed):
    """Weights to start a disambiguation from, float64 of shape (n, l): see ``init`` in :class:`PlClassifier`.

    ``X`` is standardized (the kNN starts search its neighbors); ``bags`` has
    no empty row (an empty bag already stands for all classes).
    """
    if init == "uniform" or (init == "auto" and X.shape[0] <= INIT_NEIGHBORS):
        return bags / bags.sum(axis=1, keepdims=True)
    method = INITIALISATIONS[init](n_neighbors=INIT_NEIGHBORS, knn="auto", random_state=seed)
    method = without_support_test(method)
    return restricted(method.fit(X, bags).disambiguate().shares, bags)


def standardization(X):
    """Each column's mean and standard deviation, shape (d,) each; a constant column gets scale 1."""
    spread = X.std(axis=0)
    return X.mean(axis=0), np.where(spread > 0.0, spread, 1.0)


def bag_probability(P, bags):
    """Mean over rows of ``Σ_{c ∈ S_i} P_ic``: the share of probabilities ``P`` (n, l) that falls in the bags ``S``.

    How well a model's held-out predictions agree with the candidate sets:
    the expected partial-label accuracy of drawing a label from ``P``.
    Bounded, unlike the log-likelihood, so that one held-out row whose bag
    gets no probability does not decide a comparison.
    """
    return float(np.where(bags, P, 0.0).sum(axis=1).mean())


def check_init_rows(estimator, n):
    """Refuse a kNN ``init`` on too few rows for its neighbors, naming the fix."""
    if estimator.init not in ("uniform", "auto") and n <= INIT_NEIGHBORS:
        raise InvalidParameterError(
            f"{type(estimator).__name__}: init={estimator.init!r} needs at least {INIT_NEIGHBORS + 1} training rows, "
            f"got n_samples={n}; use init='uniform'"
        )


class BagWeightClassifier(ClassifierMixin, BaseEstimator):
    """Base of the methods that learn class probabilities from weights over each bag: PlClassifier, Proden.

    What they share is how they predict: :meth:`predict_proba` (from the
    subclass's ``_proba``), the native reject option on the top probability
    (``threshold``, ``conflict_margin``), and :meth:`disambiguate` from the
    final ``weights_``.  They need no neighbors: the ``neighbors`` arguments
    are accepted, so that the pipeline can pass every method the same
    arguments, and ignored.
    """

    _k_param = None
    _query_stream = 1
    _train_stream = 2
    _expected_failed_checks = {
        **NeighborMethod._expected_failed_checks,
        "check_decision_proba_consistency": (
            "decision_function is the top probability (the reject score), not a score of class 1"
        ),
    }
    """scikit-learn checks these estimators fail, and why (``tests/unit/test_estimator_checks.py`` runs them)."""

    def __setstate__(self, state):
        """A model pickled before a parameter existed gets its default; one fitted before class balancing, no prior.

        Its probabilities then need no correction (``class_prior_`` None).
        """
        if "weights_" in state and "class_prior_" not in state:
            state = {**state, "class_prior_": None}
        super().__setstate__({**missing_defaults(type(self), state), **state})

    def _n_neighbors_needed(self):
        """Neighbors this method needs from the pipeline's kNN stage: none."""
        return 0

    def predict_proba(self, X, neighbors=None):
        """Class probabilities, float64 of shape (n, l), columns in ``classes_`` order.

        A class no training row had as a candidate gets probability 0.
        ``neighbors`` is ignored.
        """
        self._check_fitted()
        return self._proba(check_X(self, X, reset=False))

    def _check_fitted(self):
        check_fitted(self, "weights_")

    def conformity(self, X, neighbors=None):
        """Conformity for conformal sets (:class:`pll.ConformalSets`): :meth:`predict_proba`, shape (n, l)."""
        return self.predict_proba(X, neighbors=neighbors)

    def predict_with_reject(self, X, neighbors=None, candidates=None):
        """Predictions with the native reject option: accept iff the top probability is ``>= threshold``.

        Parameters
        ----------
        X : array-like of shape (n, d)
        neighbors : NeighborResult, optional
            Ignored.
        candidates : candidate sets of the n rows, optional
            Each row's candidate set ``s̃`` (any form :meth:`fit` takes, over
            ``classes_``): the prediction stays inside it and the
            probabilities are renormalised within it.  Default: all classes
            (an empty row also means all classes).

        Returns
        -------
        RejectPrediction
            ``labels`` are values of ``classes_``; ``score`` is the top
            (renormalised) probability, ``accept`` is ``score >= threshold``;
            ``guess`` flags rows whose label was drawn among tied top
            probabilities (seeded, keyed by row position).
        """
        P = self.predict_proba(X)
        n = P.shape[0]
        if candidates is None:
            cand = np.ones_like(P, dtype=bool)
        else:
            cand, _ = encode_bags(candidates, n, self.classes_, what="query candidate sets")
            cand = empty_as_all(cand)
            P = restricted(P, cand)
        return self._top(P, cand, self._query_stream)

    def disambiguate(self):
        """The training rows' labels from the final weights, each restricted to its own bag.

        ``labels`` is the candidate with the largest weight (ties drawn, seeded,
        and flagged in ``guess``), ``score`` that weight, ``accept`` is
        ``score >= threshold``.  An empty bag counts as all classes.
        """
        self._check_fitted()
        bags = empty_as_all(self.S_train_)
        return self._top(self.weights_, bags, self._train_stream)

    def _top(self, P, cand, stream):
        P = np.where(cand, P, 0.0)
        best = P.max(axis=1, keepdims=True)
        tied = cand & (P >= best - TIE_RTOL * np.abs(best))
        labels, n_tied = pick_among(tied, seed_to_int(self.random_state), np.arange(P.shape[0]), stream)
        picked = np.arange(labels.size), labels
        score = P[picked]
        accept = score >= self.threshold
        others = P.copy()
        others[picked] = 0.0  # probabilities are >= 0 and 0 outside the candidates
        runner_up = others.max(axis=1, initial=0.0)
        evidence = {CONFLICT: (runner_up > 0.0) & (score - runner_up < self.conflict_margin),
                    "probability_gap": score - runner_up}
        return RejectPrediction(
            labels=self.classes_[labels],
            accept=accept,
            score=score,
            guess=n_tied > 1,
            reason=assign(accept, evidence),
            evidence=evidence,
        )

    def predict(self, X, neighbors=None):
        """Predicted class of every row: values of ``classes_``, shape (n,)."""
        return self.predict_with_reject(X).labels

    def decision_function(self, X, neighbors=None):
        """The reject score of every row, shape (n,): the top probability."""
        return self.predict_with_reject(X).score

    def score(self, X, S, sample_weight=None):
        """Partial-label accuracy: the (weighted) share of rows whose prediction lies in their candidate set.

        ``S`` takes any form :meth:`fit` takes; with 1-d labels this is the
        accuracy.  Labels the model never saw are in no set.
        """
        return float(np.average(in_candidates(self.classes_, self.predict(X), S), weights=sample_weight))


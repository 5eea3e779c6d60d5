"""PlClassifier: any scikit-learn classifier trained from candidate sets by cross-fitted disambiguation."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import has_fit_parameter

from ..utils._random import pick_among, seed_to_int
from ..errors import InvalidParameterError
from ..reject.reasons import CONFLICT, assign
from ..utils.validation import check_fitted, check_params, check_X, encode_bags
from ._base import NeighborMethod, RejectPrediction, _missing_defaults, in_candidates, without_support_test
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


def _logistic_regression(random_state):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=1000)


def _hist_gradient_boosting(random_state):
    """Boosting with ``l2_regularization=1``: unregularised leaves break on the disambiguated weights.

    A leaf's value is ``-G / H`` (sums of gradients and hessians of the
    weighted copies).  Once the weights have all but left a class, its
    copies' hessians are near zero and its trees' leaf values explode:
    on bird-song (seed 0), fitted on the weights of one round from PL-kNN's
    initialisation, the default model reached 32 % test accuracy and does
    not even fit its training copies; with ``l2_regularization=1`` 71 %.
    """
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(l2_regularization=1.0, random_state=random_state)


def _random_forest(random_state):
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(random_state=random_state)


def _sgd(random_state):
    from sklearn.linear_model import SGDClassifier

    return SGDClassifier(loss="log_loss", random_state=random_state)


# Where a warm start refits from the previous solution (so that the next round starts near it): linear
# models and neural networks.  Ensembles also have ``warm_start``, but there it *adds* trees to the old
# ones, which would keep the old weights' trees: never warm-started.
WARM_START_MODULES = ("sklearn.linear_model", "sklearn.neural_network")


ESTIMATORS = {
    "logistic_regression": _logistic_regression,
    "hist_gradient_boosting": _hist_gradient_boosting,
    "random_forest": _random_forest,
    "sgd": _sgd,
}
"""Inner estimators by name: name -> factory taking the seed (``PlClassifier``'s ``random_state``)."""


def _warm_startable(template):
    """Whether ``template`` refits from its previous solution when its ``warm_start`` is on (see :data:`WARM_START_MODULES`)."""
    return type(template).__module__.startswith(WARM_START_MODULES) and "warm_start" in template.get_params()


def _fit_inner(template, X, y, weights, previous=None):
    """A clone of ``template`` fitted on ``(X, y)`` with ``sample_weight``, and the classes of its columns.

    ``previous``: the model this fit continues (a warm start, refitted in
    place) or None for a fresh clone.  Fewer than two distinct labels (a fold
    whose rows all share one class) get a prior-predicting
    :class:`~sklearn.dummy.DummyClassifier`, since most classifiers refuse a
    single class.
    """
    from sklearn.dummy import DummyClassifier

    labels = np.unique(y)
    if labels.size < 2:
        model = DummyClassifier(strategy="prior")
    elif previous is not None and not isinstance(previous, DummyClassifier) and np.array_equal(previous.classes_, labels):
        model = previous
    else:
        model = clone(template, safe=False)
    model.fit(X, y, sample_weight=weights)
    classes = getattr(model, "classes_", None)
    return model, np.unique(y) if classes is None else np.asarray(classes)


def _inner_proba(model, classes, X, n_classes):
    """``model.predict_proba(X)`` with its columns placed at their class indices, float64 of shape (n, n_classes)."""
    P = np.zeros((X.shape[0], n_classes))
    P[:, classes.astype(np.int64)] = model.predict_proba(X)
    return P


def _rows_normalised(W, fallback):
    """Each row of ``W`` divided by its sum; a row that sums to 0 becomes the same row of ``fallback``."""
    total = W.sum(axis=1, keepdims=True)
    ok = total > 0.0
    return np.where(ok, W / np.where(ok, total, 1.0), fallback)


def _restricted(P, bags):
    """``P`` restricted to each row's bag and renormalised; a row whose bag gets no probability: uniform over the bag."""
    return _rows_normalised(np.where(bags, P, 0.0), bags / bags.sum(axis=1, keepdims=True))


def _class_balance(y, weights, n_classes):
    """Factors that give every class of the copies ``y`` the same total weight, and the classes' shares before.

    Returns the factor of every copy, shape (m,), and the prior: each class's
    share of ``weights``, shape (n_classes,).
    """
    mass = np.bincount(y, weights=weights, minlength=n_classes)
    present = mass > 0.0
    factor = np.where(present, mass.sum() / (present.sum() * np.where(present, mass, 1.0)), 0.0)
    return factor[y], mass / mass.sum()


def _prior_corrected(P, prior):
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
    return _restricted(method.fit(X, bags).disambiguate().shares, bags)


def standardization(X):
    """Each column's mean and standard deviation, shape (d,) each; a constant column gets scale 1."""
    spread = X.std(axis=0)
    return X.mean(axis=0), np.where(spread > 0.0, spread, 1.0)


def _standardized(X):
    """``X`` at zero mean and unit variance per column, for the kNN start's neighbor search.

    Distances on raw features are ruled by the widest column (bird-song's
    reach 10^5 beside columns below 1).
    """
    mean, scale = standardization(X)
    return (X - mean) / scale


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
        super().__setstate__({**_missing_defaults(type(self), state), **state})

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
            cand = np.where(cand.any(axis=1, keepdims=True), cand, True)
            P = _restricted(P, cand)
        return self._top(P, cand, self._query_stream)

    def disambiguate(self):
        """The training rows' labels from the final weights, each restricted to its own bag.

        ``labels`` is the candidate with the largest weight (ties drawn, seeded,
        and flagged in ``guess``), ``score`` that weight, ``accept`` is
        ``score >= threshold``.  An empty bag counts as all classes.
        """
        self._check_fitted()
        bags = np.where(self.S_train_.any(axis=1, keepdims=True), self.S_train_, True)
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


class PlClassifier(BagWeightClassifier):
    """Any scikit-learn classifier trained from candidate sets by iterative, cross-fitted disambiguation.

    In the spirit of PRODEN (Lv et al., ICML 2020): every training row ``i`` is
    expanded into one copy per candidate label ``c`` of its bag ``S_i``, with
    weight ``w_ic`` (the weights of a row sum to 1).  The inner ``estimator``
    is fitted on the copies with ``sample_weight=w``; the new weights are its
    predicted probabilities restricted to the bag and renormalised; and so on
    until the weights settle.  A row whose bag gets zero probability falls
    back to uniform weights over its bag.  An empty bag counts as all classes.

    **Cross-fitting.**  The probabilities that re-estimate a row's weights come
    from a model that never saw the row: the rows (not the copies: a row's
    copies stay together) are split once, seeded, into ``n_folds`` folds; in
    every round, for each fold a model is fitted on the other folds' copies
    and predicts the fold's rows.  Without it, an estimator that fits its
    training rows exactly (a deep forest, boosting with many trees) would
    return the weights it was given and the iteration would stop where it
    started.  The folds stay the same from round to round, so that a round
    changes the weights, not which models see which rows: with folds drawn
    afresh each round, the weights of boosting kept moving by as much in
    round 20 as in round 2.  After the last round a final clone,
    :attr:`estimator_`, is fitted on all copies with the final weights; it
    makes the predictions.

    Rounds stop when the weights settle: when the mean over rows of the
    total-variation distance between a row's old and new weights (the share
    of a row's label mass that moved, ``weight_changes_``) is below ``tol``
    (``converged_``), or after ``max_rounds``.  The mean, not the largest
    change: a few rows whose candidates the estimator cannot tell apart
    flip between rounds for as long as it runs.  Rounds also end when they
    stop helping: a round's out-of-fold probabilities are scored by the
    share of them that falls in the held-out rows' bags
    (:func:`bag_probability`; the class shares of the initial weights score
    the start), and when the models fitted on a round's weights score worse
    than those fitted on the weights before, those weights are dropped and
    the final estimator is fitted on the ones before
    (``bag_probabilities_``).  So an inner estimator that breaks on
    sharpened weights cannot carry its failure into the final model.

    It is a scikit-learn classifier over candidate sets like the kNN methods
    (see :class:`~pll.methods.NeighborMethod` for the forms of ``S``,
    ``classes_`` and :meth:`score`), but needs no neighbors: the ``neighbors``
    arguments of its methods are accepted, so that the pipeline can pass
    every method the same arguments, and ignored.

    Parameters
    ----------
    estimator : estimator, str or None, default=None
        The inner classifier: an unfitted scikit-learn classifier whose
        ``fit`` takes ``sample_weight`` and that has ``predict_proba``
        (cloned, never fitted itself); the name of one in :data:`ESTIMATORS`
        (``"logistic_regression"``, ``"hist_gradient_boosting"``,
        ``"random_forest"``, ``"sgd"`` — ``SGDClassifier(loss="log_loss")``),
        built at ``fit`` with ``random_state`` as its seed, so that
        :meth:`get_params` and :func:`~sklearn.base.clone` keep the name; or
        None for ``LogisticRegression(max_iter=1000)``.  A given estimator's
        own ``random_state`` is left as it is.  A pipeline is refused (its
        ``fit`` routes ``sample_weight`` only to named steps).  The inner
        estimator is fitted on class indices ``0..l-1``.
    max_rounds : int, default=1
        Most disambiguation rounds (each fits ``n_folds`` models); 0 fits
        the final estimator on the initial weights (no disambiguation).
        After IPAL's start one round keeps most of what more rounds gain
        and loses little where they lose (test accuracy, 80/20, seeds 0–2,
        ``benchmarks/pl_classifier_defaults.py``): on ecoli with uniform
        noise (two extra candidates) logistic regression reached 86.3 %,
        87.7 % and 88.2 % after 0, 1 and 5 rounds, boosting 78.9 %, 80.4 %
        and 80.4 %; on bird-song boosting 72.4 %, 71.3 % and (2 rounds)
        70.6 %.  From a uniform start, rounds are the disambiguation: raise
        ``max_rounds`` (boosting and forests gained most in the first two
        rounds on bird-song and nothing after the third).
    tol : float, default=0.01
        Stop when the weights moved by less: the mean total-variation
        distance of a round's change (see above).
    n_folds : int, default=5
        Folds of the cross-fitting, at least 2; ``fit`` needs at least as
        many rows.
    init : {"auto", "ipal", "pl_knn", "uniform"}, default="auto"
        Initial weights: ``1/|S_i|`` on every candidate (``"uniform"``); or a
        kNN method's disambiguation of the training rows, restricted to the
        bag and renormalised: the vote shares of :class:`pll.PlKnn`
        (``"pl_knn"``), or the class-mass-normalised confidences of
        :class:`pll.Ipal` after its label propagation (``"ipal"``, the shares
        of its :meth:`~pll.Ipal.disambiguate`); ``"auto"`` is ``"ipal"`` on
        more than 10 rows and ``"uniform"`` on fewer.  The kNN starts search
        10 neighbors of each row, the row itself excluded (so ``"ipal"`` and
        ``"pl_knn"`` need at least 11 rows), in ``X`` standardized to zero
        mean and unit variance per column, since raw distances are ruled by
        the widest column; the search is the ``auto`` backend's: exact up to
        100,000 rows, pynndescent beyond.  A kNN start is closer than
        uniform: on bird-song (seed 0) 79 % of the training rows' largest
        initial weights were on the true label with ``"pl_knn"`` against
        63 % for uniform.  IPAL's propagation carries the evidence of
        unambiguous rows along the kNN graph, beyond a row's own neighbors,
        and boosting learns from it: over seeds 0–4 (80/20 splits, two
        rounds) boosting reached 73.5 % test accuracy on bird-song from
        ``"ipal"`` against 71.2 % from ``"pl_knn"``, and on msrc-v2 (seed 0)
        48.9 % against 45.7 %.  With a uniform start,
        ``HistGradientBoostingClassifier()`` reached 29.8 % on bird-song
        (seeds 0–2).
    class_balance : bool, default=True
        Fit every inner model on weights that give each class the same
        total, and move its probabilities back to the classes' shares of the
        weights by Bayes' rule (``class_prior_``).  A disambiguation can
        leave a class rare (after IPAL's start, one of bird-song's classes
        led the weights of 11 of the 3,999 training rows, seed 1, though 26
        hold it as their true label), and an unregularised booster's Newton
        leaves grow without bound on a class whose copies' hessians are near
        zero:
        ``HistGradientBoostingClassifier()`` fitted on IPAL's weights reached
        9.9 % test accuracy on msrc-v2 (seed 1), 48.9 % with the balance.
        It costs a forest a little (bird-song, seeds 0–2, no rounds: 72.5 %
        against 74.2 % without).
    threshold : float in [0, 1], default=0.9
        The native reject rule: a prediction is accepted iff its probability
        is ``>= threshold`` (0.9: the rule the DST-PLL paper applies to its
        competitors).
    conflict_margin : float in [0, 1], default=0.2
        Reasons of a rejection (:mod:`pll.reject.reasons`; :meth:`disambiguate`
        gives them too, from the weights): ``conflict`` when the runner-up's
        probability among the candidates is within ``conflict_margin`` of the
        top one (evidence ``probability_gap``; the margin of PL-kNN, whose
        shares are on the same scale).  No ``no_support``: this method uses
        no neighbors, so it has no distance to the training rows to judge
        by; no ``vague``: it sees no bags at prediction time.  Other
        rejections are ``low_score``.
    warm_start : bool, default=True
        Refit each fold's model from its solution of the previous round
        where that is what the estimator's ``warm_start`` means (linear
        models and neural networks of scikit-learn, :data:`WARM_START_MODULES`):
        the weights move little between rounds, so the solver starts near
        its answer.  Ensembles are always refitted from scratch, since
        their warm start adds members to the old ones.  The final estimator
        is always a fresh clone.
    random_state : int or None, default=None
        Seed of the folds, of named estimators and of tie-breaking (draws keyed
        by (seed, row position)); None draws fresh randomness, as in scikit-learn.

    Attributes
    ----------
    classes_ : ndarray of shape (l,)
        The class labels (``arange(l)`` when fitted on a 0/1 matrix).
    n_classes_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (d,)
        Only when ``X`` was a data frame with string column names.
    S_train_ : ndarray of shape (n, l), bool
        The candidate sets over ``classes_`` (empty bags stay empty here).
    weights_ : ndarray of shape (n, l), float64
        The final weights: each row's distribution over its bag (zero outside
        it); :meth:`disambiguate` reads them.
    estimator_ : estimator
        The final clone, fitted on all copies with ``weights_`` (a
        :class:`~sklearn.dummy.DummyClassifier` when every copy has the same
        label).
    n_rounds_ : int
        Rounds whose weights were kept.
    converged_ : bool
        Whether the rounds stopped because the weights settled (``< tol``).
    weight_changes_ : list of float
        Each kept round's change of the weights: the mean over rows of the
        total-variation distance between old and new weights.
    bag_probabilities_ : list of float
        The class prior's score of the bags, then every round's: the
        :func:`bag_probability` of its out-of-fold probabilities.
    class_prior_ : ndarray of shape (l,) or None
        The classes' shares of the final weights that the final estimator's
        probabilities are corrected to; None without ``class_balance``.

    Notes
    -----
    Memory and time: the expansion has ``sum_i |S_i|`` rows (an empty bag
    counts ``l``).  Each round fits ``n_folds`` clones on about
    ``(n_folds - 1) / n_folds`` of them, then one final fit on all, so a fit
    costs ``max_rounds * n_folds + 1`` inner fits (warm-started ones are cheaper).  At 1M rows with mean bag
    size 2–3 that is 2–3M rows × ``d`` features per fit (float64: 16–24 MB
    per feature, e.g. 1.6–2.4 GB at ``d = 100``, copied anew for each fit
    beside ``X``, plus what the estimator allocates), and 26 such fits
    with the defaults.  Only estimators whose fit is near-linear in rows
    scale to that.  Measured at 1,000,000 rows × 32 features, 20 classes
    (2,500,837 expanded rows, ``benchmarks/pl_classifier_fit.py``):
    ``LogisticRegression`` (lbfgs, the default) took 311 s for 11 inner fits
    (``max_rounds=2``, warm starts) and 3.1 GiB at peak on two cores;
    ``SGDClassifier`` (one-vs-rest, up to 1,000 epochs) did not finish within
    25 minutes.  ``HistGradientBoostingClassifier`` is linear in rows too
    (binned features, multithreaded; above 10,000 rows it turns on early
    stopping, whose validation split may hold copies of rows it trains on)
    but builds a tree per class and iteration; random forests grow deep
    trees over all copies and become slow and large.  The kNN
    initialisations add one 10-neighbor search of the training rows.  Lower
    ``max_rounds`` or ``n_folds`` to trade accuracy for time.

    Examples
    --------
    >>> import numpy as np, pll
    >>> from pll.methods._pl_classifier import PlClassifier
    >>> X = np.array([[0.0], [0.2], [0.4], [0.6], [1.0], [1.2], [1.4], [1.6]])
    >>> S = [{"a", "b"}, {"a"}, {"a", "c"}, {"a"}, {"b", "c"}, {"c"}, {"c"}, {"a", "c"}]
    >>> clf = PlClassifier(n_folds=2, random_state=0).fit(X, S)
    >>> clf.classes_.tolist(), clf.predict([[0.1], [1.5]]).tolist()
    (['a', 'b', 'c'], ['a', 'c'])
    >>> r = clf.predict_with_reject([[0.1], [1.5]])
    >>> bool(((r.score >= clf.threshold) == r.accept).all())
    True
    """

    _parameter_constraints = {
        "estimator": "no_validation",  # checked by _resolve_estimator
        "max_rounds": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "n_folds": [Interval(Integral, 2, None, closed="left")],
        "init": [StrOptions(set(INITIALISATIONS))],
        "warm_start": ["boolean"],
        "class_balance": ["boolean"],
        "threshold": [Interval(Real, 0, 1, closed="both")],
        "conflict_margin": [Interval(Real, 0, 1, closed="both")],
        "random_state": [Interval(Integral, 0, None, closed="left"), None],
    }

    def __init__(
        self,
        estimator=None,
        *,
        max_rounds=1,
        tol=0.01,
        n_folds=5,
        init="auto",
        threshold=0.9,
        conflict_margin=0.2,
        warm_start=True,
        class_balance=True,
        random_state=None,
    ):
        self.estimator = estimator
        self.max_rounds = max_rounds
        self.tol = tol
        self.n_folds = n_folds
        self.init = init
        self.threshold = threshold
        self.conflict_margin = conflict_margin
        self.warm_start = warm_start
        self.class_balance = class_balance
        self.random_state = random_state

    def _resolve_estimator(self):
        """The inner estimator template ``estimator`` stands for, or an InvalidParameterError naming it."""
        name = type(self).__name__
        est = self.estimator
        if est is None:
            return ESTIMATORS["logistic_regression"](seed_to_int(self.random_state))
        if isinstance(est, str):
            if est not in ESTIMATORS:
                raise InvalidParameterError(
                    f"The 'estimator' parameter of {name} must be a classifier or one of "
                    f"{', '.join(map(repr, ESTIMATORS))}; got unknown name {est!r}"
                )
            return ESTIMATORS[est](seed_to_int(self.random_state))
        if isinstance(est, type):
            raise InvalidParameterError(
                f"The 'estimator' parameter of {name} must be an estimator instance, "
                f"got the class {est.__name__} (call it: {est.__name__}())"
            )
        what = f"The 'estimator' parameter of {name}: {type(est).__name__}"
        if not callable(getattr(est, "fit", None)):
            raise InvalidParameterError(f"{what} has no fit method")
        if not hasattr(est, "predict_proba"):
            raise InvalidParameterError(f"{what} has no predict_proba (it must predict class probabilities)")
        if not has_fit_parameter(est, "sample_weight"):
            raise InvalidParameterError(f"{what}.fit takes no sample_weight")
        return est

    def fit(self, X, S, neighbors=None):
        """Disambiguate the candidate sets by cross-fitted rounds, then fit :attr:`estimator_` on the final weights.

        Parameters
        ----------
        X : array-like of shape (n, d)
        S : candidate sets of the n rows
            A 0/1 or bool matrix of shape (n, l), dense or scipy sparse; a
            sequence of n label sets; or 1-d labels of shape (n,).
        neighbors : NeighborResult, optional
            Ignored (accepted so that the pipeline can pass every method its
            precomputed neighbors; this one needs none).

        Returns
        -------
        self
        """
        check_params(self)
        template = self._resolve_estimator()
        X = check_X(self, X, reset=True)
        n = X.shape[0]
        if n < self.n_folds:
            raise InvalidParameterError(
                f"{type(self).__name__}: n_folds={self.n_folds} needs at least {self.n_folds} training rows, "
                f"got n_samples={n}" + (f"; lower n_folds to at most {n}" if n >= 2 else "")
            )
        check_init_rows(self, n)
        S_train, classes = encode_bags(S, n)
        l = len(classes)
        bags = np.where(S_train.any(axis=1, keepdims=True), S_train, True)
        rows, cols = np.nonzero(bags)  # the expansion, grouped by row
        seed = seed_to_int(self.random_state)

        W = initial_weights(self.init, _standardized(X), bags, seed)
        folds = self._folds(n, seed)
        warm = self.warm_start and _warm_startable(template)
        fold_template = clone(template, safe=False).set_params(warm_start=True) if warm else template
        fold_models = [None] * self.n_folds
        changes, converged = [], False
        scores = [bag_probability(np.broadcast_to(W.mean(axis=0), W.shape), bags)]
        W_before = W
        for _ in range(self.max_rounds):
            P = np.zeros((n, l))
            for f in range(self.n_folds):
                held = folds == f
                train = ~held[rows]
                weights, prior = self._balanced(cols[train], W[rows[train], cols[train]], l)
                fold_models[f], inner = _fit_inner(fold_template, X[rows[train]], cols[train], weights,
                                                   previous=fold_models[f] if warm else None)
                P[held] = _prior_corrected(_inner_proba(fold_models[f], inner, X[held], l), prior)
            scores.append(bag_probability(P, bags))
            if scores[-1] < scores[-2]:  # W was a worse target than the weights before it
                W, changes = W_before, changes[:-1]
                break
            W_new = _restricted(P, bags)
            changes.append(float(0.5 * np.abs(W_new - W).sum(axis=1).mean()))
            W_before, W = W, W_new
            if changes[-1] < self.tol:
                converged = True
                break

        weights, self.class_prior_ = self._balanced(cols, W[rows, cols], l)
        self.estimator_, self._inner_classes = _fit_inner(template, X[rows], cols, weights)
        self.S_train_, self.classes_, self.n_classes_ = S_train, classes, l
        self.weights_ = W
        self.n_rounds_, self.converged_, self.weight_changes_ = len(changes), converged, changes
        self.bag_probabilities_ = scores
        return self

    def _balanced(self, y, weights, n_classes):
        """The copies' weights for an inner fit, and the prior its probabilities are corrected to (None: no correction)."""
        if not self.class_balance:
            return weights, None
        factor, prior = _class_balance(y, weights, n_classes)
        return weights * factor, prior

    def fit_summary(self):
        """How the disambiguation ended, for a run's log: rounds run, whether it converged, the last weight change."""
        self._check_fitted()
        last = self.weight_changes_[-1] if self.weight_changes_ else float("nan")
        return {"rounds": self.n_rounds_, "converged": self.converged_, "weight_change": last}

    def _folds(self, n, seed):
        """Fold of every row, the same in every round: balanced, a seeded permutation."""
        folds = np.empty(n, dtype=np.int64)
        folds[np.random.default_rng([seed, 0]).permutation(n)] = np.arange(n) % self.n_folds
        return folds

    def _proba(self, X):
        """The final estimator's probabilities for checked ``X`` (:meth:`BagWeightClassifier.predict_proba`)."""
        return _prior_corrected(_inner_proba(self.estimator_, self._inner_classes, X, self.n_classes_), self.class_prior_)


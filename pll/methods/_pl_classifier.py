"""PlClassifier: any scikit-learn classifier trained from candidate sets by cross-fitted disambiguation."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import clone
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import has_fit_parameter

from ..utils._random import seed_to_int
from ..errors import InvalidParameterError
from ..utils.validation import check_X, check_params, empty_as_all, encode_bags
from ._bag_weights import (
    INITIALISATIONS,
    BagWeightClassifier,
    bag_probability,
    check_init_rows,
    class_balance_factors,
    initial_weights,
    prior_corrected,
    restricted,
    standardization,
)
from ._inner import ESTIMATORS, fit_inner, inner_proba, warm_startable


def _standardized(X):
    """``X`` at zero mean and unit variance per column, for the kNN start's neighbor search.

    Distances on raw features are ruled by the widest column (bird-song's
    reach 10^5 beside columns below 1).
    """
    mean, scale = standardization(X)
    return (X - mean) / scale


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
        Reasons of a rejection (:mod:`pll.methods.reasons`; :meth:`disambiguate`
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
    >>> from pll import PlClassifier
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
        bags = empty_as_all(S_train)
        rows, cols = np.nonzero(bags)  # the expansion, grouped by row
        seed = seed_to_int(self.random_state)

        W = initial_weights(self.init, _standardized(X), bags, seed)
        folds = self._folds(n, seed)
        warm = self.warm_start and warm_startable(template)
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
                fold_models[f], inner = fit_inner(fold_template, X[rows[train]], cols[train], weights,
                                                   previous=fold_models[f] if warm else None)
                P[held] = prior_corrected(inner_proba(fold_models[f], inner, X[held], l), prior)
            scores.append(bag_probability(P, bags))
            if scores[-1] < scores[-2]:  # W was a worse target than the weights before it
                W, changes = W_before, changes[:-1]
                break
            W_new = restricted(P, bags)
            changes.append(float(0.5 * np.abs(W_new - W).sum(axis=1).mean()))
            W_before, W = W, W_new
            if changes[-1] < self.tol:
                converged = True
                break

        weights, self.class_prior_ = self._balanced(cols, W[rows, cols], l)
        self.estimator_, self._inner_classes = fit_inner(template, X[rows], cols, weights)
        self.S_train_, self.classes_, self.n_classes_ = S_train, classes, l
        self.weights_ = W
        self.n_rounds_, self.converged_, self.weight_changes_ = len(changes), converged, changes
        self.bag_probabilities_ = scores
        return self

    def _balanced(self, y, weights, n_classes):
        """The copies' weights for an inner fit, and the prior its probabilities are corrected to (None: no correction)."""
        if not self.class_balance:
            return weights, None
        factor, prior = class_balance_factors(y, weights, n_classes)
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
        return prior_corrected(inner_proba(self.estimator_, self._inner_classes, X, self.n_classes_), self.class_prior_)


"""Soft voting: the mean class probabilities of several partial-label learners, with the reject option of one."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from contextvars import copy_context
from numbers import Integral, Real

import numpy as np
from joblib import effective_n_jobs
from sklearn.base import clone
from sklearn.utils._param_validation import Interval
from sklearn.utils.metaestimators import _BaseComposition

from ..errors import InvalidParameterError
from ..utils.validation import check_X, check_params, empty_as_all, encode_bags
from ._bag_weights import BagWeightClassifier, restricted


def default_members():
    """The members of ``SoftVoting(estimators=None)``: PRODEN and VI-PLL with their defaults."""
    from ._proden import Proden
    from ._vi_pll import ViPll

    return [("proden", Proden()), ("vi_pll", ViPll())]


def one_torch_thread():
    """PyTorch held on one thread while members fit side by side, where PyTorch is installed.

    Each deep learner sets one thread for its fit and restores the setting it
    found; two at once would restore each other's, and the later one would go on
    with the process's setting, which is neither deterministic nor faster.
    """
    try:
        from ..utils._mlp import cpu_settings
    except ModuleNotFoundError:
        return nullcontext()
    return cpu_settings(1)


def fit_side_by_side(members, X, S, n_workers):
    """``member.fit(X, S)`` for each member, ``n_workers`` at a time in threads, in the caller's context.

    The networks train one thread each and spend most of a step in PyTorch,
    outside the interpreter lock, so two members on two cores fit in about 0.7
    of the time of one after the other, to the same weights.  The caller's
    context (its progress listener) goes with each member.
    """
    if n_workers == 1:
        return [member.fit(X, S) for member in members]
    with one_torch_thread(), ThreadPoolExecutor(n_workers) as pool:
        futures = [pool.submit(copy_context().run, member.fit, X, S) for member in members]
        return [future.result() for future in futures]


class SoftVoting(_BaseComposition, BagWeightClassifier):
    """The mean of several learners' class probabilities, with the reject option on the mean's top probability.

    Each member is fitted on the same rows and bags; a query's probabilities
    are the members' mean, and its label is the top one.  Learners that err
    on different rows correct each other where their probabilities are
    averaged.  The default pair is PRODEN (a three-layer network trained on
    its own disambiguated weights) and VI-PLL (a one-layer Dirichlet
    posterior held to a generative model of the features): of the pairs of
    PRODEN, CroSel and VI-PLL, and of all three, their mean measured best,
    and it is the project's most accurate deep learner
    (``docs/deep-learners.md``).  Test accuracy
    (%) of the pair's mean against its better member on the real-world sets
    bird-song, msrc-v2 and lost (the last not shipped with the project),
    ``benchmarks/proden.py --method soft_voting``:

    * Fuchs & Klein's protocol (``--protocol vi-pll``): 76.5 / 56.3 / 82.6
      against 74.4 / 53.9 / 80.6 (Proden); that study's VI-PLL, tuned per
      data set, reports 76.15 / 60.24 / 78.52;
    * Fuchs & Kalinke's protocol (``--protocol uai-2025``): 77.2 / 57.2 /
      81.4 against 74.9 / 54.4 / 79.1 (Proden); that study's best methods
      report 77.76 / 54.82 / 81.24.

    On the data as loaded and on UCI sets under four noise generators it
    gained 1.0 point over Proden on average (15 comparisons) and lost twice,
    on first-order-theorem, where VI-PLL alone is far below Proden (under
    instance-dependent noise 48.5 against 53.3 %).  It costs the members'
    fits one after the other (bird-song: 20 s and 30 s; 1,000,000 rows ×
    32 features × 20 classes: 164 s, 2.35 GiB peak), or side by side with
    ``n_jobs=2`` (0.68 of the time on bird-song, 0.65 at 1,000,000 rows).

    The reject option is that of the other probability models: accept iff
    the mean's top probability is ``>= threshold``; reasons ``conflict``
    (the runner-up within ``conflict_margin``) or ``low_score``.
    :meth:`disambiguate` reads ``weights_``, the members' final weights
    averaged and restricted to each bag.  It needs no neighbors (the
    ``neighbors`` arguments are accepted and ignored).

    Parameters
    ----------
    estimators : list of (str, estimator) or None, default=None
        The members, each a learner of this package with ``predict_proba``
        and ``weights_`` (:class:`Proden`, :class:`CroSel`, :class:`ViPll`,
        :class:`PlClassifier`), named for ``get_params``/``set_params``
        (``proden__max_epochs``).  None: ``[("proden", Proden()),
        ("vi_pll", ViPll())]``.
    threshold : float in [0, 1], default=0.9
        Accept iff the top mean probability is ``>= threshold``.
    conflict_margin : float in [0, 1], default=0.2
        ``conflict`` when the runner-up's mean probability is within this margin.
    device : str or None, default=None
        Given to every member that has a ``device`` parameter (``"cpu"``,
        ``"cuda"``, ``"auto"``: see :class:`Proden`); None leaves each its own.
    n_jobs : int or None, default=None
        Members fitted at once, each in a thread of its own (None: one, -1:
        as many as there are cores); the result is the same.  Two members on
        two cores fit in about 0.7 of the time of one after the other, with
        both members' memory at once.
    random_state : int or None, default=None
        Given to every member whose own ``random_state`` is None; the seed of
        drawn ties.

    Attributes
    ----------
    estimators_ : list of estimator
        The fitted members (clones), in the order of ``estimators``.
    named_estimators_ : dict
        The fitted members by name.
    classes_ : ndarray of shape (l,)
    n_classes_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (d,)
        Only when ``X`` was a data frame with string column names.
    S_train_ : ndarray of shape (n, l), bool
        The candidate sets over ``classes_`` (empty bags stay empty here).
    weights_ : ndarray of shape (n, l), float64
        The members' final weights, averaged and restricted to each bag.

    Examples
    --------
    >>> import numpy as np, pll
    >>> X = np.array([[0.0], [0.2], [0.4], [0.6], [1.0], [1.2], [1.4], [1.6]])
    >>> S = [{"a", "b"}, {"a"}, {"a", "c"}, {"a"}, {"b", "c"}, {"c"}, {"c"}, {"a", "c"}]
    >>> members = [("proden", pll.Proden(max_epochs=30)), ("crosel", pll.CroSel(max_epochs=30))]
    >>> clf = pll.SoftVoting(members, random_state=0).fit(X, S)
    >>> clf.classes_.tolist(), clf.predict([[0.1], [1.5]]).tolist()
    (['a', 'b', 'c'], ['a', 'c'])
    """

    _parameter_constraints = {
        "estimators": [list, None],
        "threshold": [Interval(Real, 0, 1, closed="both")],
        "conflict_margin": [Interval(Real, 0, 1, closed="both")],
        "device": [str, None],
        "n_jobs": [Interval(Integral, 1, None, closed="left"), Interval(Integral, None, -1, closed="right"), None],
        "random_state": [Interval(Integral, 0, None, closed="left"), None],
    }

    def __init__(self, estimators=None, *, threshold=0.9, conflict_margin=0.2, device=None, n_jobs=None,
                 random_state=None):
        self.estimators = estimators
        self.threshold = threshold
        self.conflict_margin = conflict_margin
        self.device = device
        self.n_jobs = n_jobs
        self.random_state = random_state

    @property
    def _members(self):
        """``estimators``, or the default pair for None: what the checks and the fit read."""
        return default_members() if self.estimators is None else self.estimators

    def get_params(self, deep=True):
        """The parameters; with ``deep``, each member (the default pair for None) and its own (``proden__alpha``)."""
        params = super().get_params(deep=False)
        try:
            members = dict(self._members) if deep else {}
        except (TypeError, ValueError):  # not (name, estimator) pairs: the fit's checks say so
            members = {}
        for name, member in members.items():
            params[name] = member
            if hasattr(member, "get_params"):
                params.update({f"{name}__{key}": value for key, value in member.get_params(deep=True).items()})
        return params

    def set_params(self, **params):
        """Set parameters, a member's by ``name__parameter`` or a whole member by its name; returns self.

        With ``estimators=None``, naming a default member (``vi_pll__likelihood_weight``)
        first sets ``estimators`` to the default pair, so that its members can be changed.
        """
        if params.get("estimators", self.estimators) is None:
            defaults = default_members()
            names = {name for name, _ in defaults}
            if any(key.split("__")[0] in names for key in params):
                self.estimators = defaults
        self._set_params("estimators", **params)
        return self

    def _validate_params(self):
        """scikit-learn's checks, then the members: (name, learner) pairs, unique names, each member's own checks."""
        super()._validate_params()
        members = self._members
        if not members:
            raise InvalidParameterError("SoftVoting: 'estimators' is empty; give at least one (name, estimator) pair")
        for member in members:
            if not (isinstance(member, tuple) and len(member) == 2 and isinstance(member[0], str)):
                raise InvalidParameterError(
                    f"SoftVoting: each of 'estimators' must be a (name, estimator) pair, got {member!r}"
                )
            name, estimator = member
            if not isinstance(estimator, BagWeightClassifier):
                raise InvalidParameterError(
                    f"SoftVoting: member {name!r} ({type(estimator).__name__}) is not a partial-label learner with "
                    "predict_proba (Proden, CroSel, ViPll, PlClassifier)"
                )
        try:
            self._validate_names([name for name, _ in members])
        except ValueError as error:
            raise InvalidParameterError(f"SoftVoting: {error}") from None
        for name, estimator in members:
            try:
                check_params(estimator)
            except InvalidParameterError as error:
                raise InvalidParameterError(f"SoftVoting member {name!r}: {error}") from None

    def fit(self, X, S, neighbors=None):
        """Fit a clone of every member on the same rows and bags.

        Parameters
        ----------
        X : array-like of shape (n, d)
        S : candidate sets of the n rows
            A 0/1 or bool matrix of shape (n, l), dense or scipy sparse; a
            sequence of n label sets; or 1-d labels of shape (n,).
        neighbors : NeighborResult, optional
            Ignored.

        Returns
        -------
        self
        """
        check_params(self)
        X = check_X(self, X, reset=True)
        S_train, classes = encode_bags(S, X.shape[0])
        names, members = [], []
        for name, estimator in self._members:
            member = clone(estimator)
            own = member.get_params(deep=False)
            if own["random_state"] is None:
                member.set_params(random_state=self.random_state)
            if self.device is not None and "device" in own:
                member.set_params(device=self.device)
            names.append(name)
            members.append(member)
        n_workers = min(effective_n_jobs(self.n_jobs), len(members))
        self.estimators_ = fit_side_by_side(members, X, S_train, n_workers)  # over columns 0..l-1: classes_ maps them
        self.named_estimators_ = dict(zip(names, self.estimators_))
        self.S_train_, self.classes_, self.n_classes_ = S_train, classes, len(classes)
        bags = empty_as_all(S_train)
        self.weights_ = restricted(np.mean([m.weights_ for m in self.estimators_], axis=0), bags)
        return self

    def _proba(self, X):
        """The members' mean probabilities for checked ``X``, shape (n, l)."""
        return np.mean([member.predict_proba(X) for member in self.estimators_], axis=0)

    def fit_summary(self):
        """How each member's training ended, for a run's log: its summary's entries prefixed with its name."""
        self._check_fitted()
        return {f"{name}.{key}": value for name, member in self.named_estimators_.items()
                if hasattr(member, "fit_summary") for key, value in member.fit_summary().items()}

"""PlClassifier's inner estimators: the named factories, and fitting and reading one on a disambiguation's weights.

Apart from the disambiguation itself, so that what an inner estimator needs
(a seed, a warm start, a single-class fold, its columns placed at class
indices) is read in one place.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import clone


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


def warm_startable(template):
    """Whether ``template`` refits from its previous solution when its ``warm_start`` is on (see :data:`WARM_START_MODULES`)."""
    return type(template).__module__.startswith(WARM_START_MODULES) and "warm_start" in template.get_params()


def fit_inner(template, X, y, weights, previous=None):
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


def inner_proba(model, classes, X, n_classes):
    """``model.predict_proba(X)`` with its columns placed at their class indices, float64 of shape (n, n_classes)."""
    P = np.zeros((X.shape[0], n_classes))
    P[:, classes.astype(np.int64)] = model.predict_proba(X)
    return P

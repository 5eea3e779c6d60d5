"""Partial-label noise models: make candidate bags from true labels.

Each model returns a bool candidate matrix ``S`` of shape (n, l).
Definitions and defaults: ALGORITHMS.md, "Partial-label noise".  Every random
draw is keyed by (seed, row) or (seed, row, label) through
:mod:`pll.utils._random`, so a row's bag does not depend on which other rows are
noised with it, and no Python loop runs over rows.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np

from ..utils._random import row_uniform, seed_to_int
from ..data.dataset import one_hot
from ..errors import InvalidDataError, InvalidParameterError
from ..utils.validation import check_bags, check_class_indices, check_features

# Independent random streams, one per kind of draw.
_COIN, _WRONG, _PAIRING, _ANCHOR, _ANCHOR_LABEL, _ALPHA, _MEMBER, _REMOVE = range(1, 9)
_IDN_SCALE = 0.3  # Zhang et al.: mean flip probability of a row's entries


def _check_labels(y, n_classes):
    y = np.asarray(y)
    if y.ndim != 1 or y.size == 0:
        raise InvalidDataError(f"true labels must be a non-empty 1-d array, got shape {y.shape}")
    if n_classes < 3:
        raise InvalidParameterError(f"noise models need at least three classes, got n_classes={n_classes}")
    return check_class_indices(y, n_classes)


def _check_features(X, n_rows):
    X = np.asarray(check_features(X, "features"), dtype=np.float64)
    if X.shape[0] != n_rows:
        raise InvalidDataError(f"features must have shape ({n_rows}, d) to match the labels, got {X.shape}")
    return X


def _check_probability(name, value):
    if not 0.0 <= value <= 1.0:
        raise InvalidParameterError(f"{name} must be in [0, 1], got {value}")


def _cap_r(r, n_classes):
    if r < 1:
        raise InvalidParameterError(f"r (wrong labels per row) must be at least 1, got {r}")
    if r > n_classes - 1:
        warnings.warn(f"r={r} exceeds the {n_classes - 1} wrong labels available; capped", stacklevel=3)
        return n_classes - 1
    return int(r)


def _cell_uniform(seed, n_rows, n_classes, stream):
    """Uniform numbers of shape (n_rows, n_classes), keyed by (seed, stream, row, label)."""
    keys = np.arange(n_rows, dtype=np.uint64)[:, None] * np.uint64(n_classes) + np.arange(n_classes, dtype=np.uint64)
    return row_uniform(seed, keys, stream)


def _partial_rows(seed, n_rows, p):
    """The per-row coin flip: True where a row is partially labelled (probability ``p``)."""
    return row_uniform(seed, np.arange(n_rows), _COIN) < p


def _add_weighted(S, weights, r, seed):
    """Add ``r`` labels to the rows with positive weights, drawn without replacement.

    Vectorized weighted sampling without replacement (Efraimidis-Spirakis):
    the ``r`` largest keys ``log(u) / w`` form the sample.  Rows whose
    weights are all zero are left alone; callers give the true label weight 0.
    """
    rows = np.flatnonzero(weights.any(axis=1))
    if rows.size == 0:
        return S
    w = weights[rows]
    u = 1.0 - _cell_uniform(seed, S.shape[0], S.shape[1], _WRONG)[rows]  # in (0, 1]: log is finite
    keys = np.where(w > 0, np.log(u) / np.where(w > 0, w, 1.0), -np.inf)
    top = np.argpartition(-keys, r - 1, axis=1)[:, :r]
    S[rows[:, None], top] = True
    return S


def uniform(y, n_classes, p=0.7, r=3, random_state=None):
    """Uniform noise: with probability ``p`` a row gets ``r`` distinct wrong labels, uniformly.

    Parameters
    ----------
    y : int array of shape (n,)
    n_classes : int
    p : float in [0, 1]
    r : int, capped at ``n_classes - 1`` with a warning
    random_state : int or None

    Returns
    -------
    S : bool ndarray of shape (n, n_classes)

    Examples
    --------
    >>> S = uniform([0, 1, 2, 3], n_classes=5, p=1.0, r=2, random_state=0)
    >>> S.sum(axis=1).tolist(), S[[0, 1, 2, 3], [0, 1, 2, 3]].all()
    ([3, 3, 3, 3], np.True_)
    """
    y = _check_labels(y, n_classes)
    _check_probability("p", p)
    r = _cap_r(r, n_classes)
    seed = seed_to_int(random_state)
    weights = np.ones((y.size, n_classes))
    weights[np.arange(y.size), y] = 0.0
    weights[~_partial_rows(seed, y.size, p)] = 0.0
    return _add_weighted(one_hot(y, n_classes), weights, r, seed)


def partner_classes(n_classes, random_state=None):
    """A random pairing of the classes: ``partner[c]`` is c's partner, or -1 for the odd one out.

    Examples
    --------
    >>> partner = partner_classes(5, random_state=0)
    >>> int((partner == -1).sum()), all(partner[partner[c]] == c for c in range(5) if partner[c] >= 0)
    (1, True)
    """
    perm = np.random.default_rng([seed_to_int(random_state), _PAIRING]).permutation(n_classes)
    partner = np.full(n_classes, -1, dtype=np.int64)
    a, b = perm[0 : n_classes - 1 : 2], perm[1:n_classes:2]
    partner[a], partner[b] = b, a
    return partner


def class_dependent(y, n_classes, p=0.7, eps=0.7, r=1, random_state=None):
    """Cour et al.'s model: wrong labels favour each class's random partner.

    Classes are paired at random (:func:`partner_classes`; with an odd count
    one class has no partner).  With probability ``p`` a row gets ``r`` wrong
    labels drawn without replacement, with weight ``eps`` (raised to at least
    ``1/(l-1)``) for the partner and ``(1 - eps)/(l - 2)`` for each other
    wrong label; a row without partner draws uniformly.

    Parameters
    ----------
    y : int array of shape (n,)
    n_classes : int
    p, eps : float in [0, 1]
    r : int, capped at ``n_classes - 1`` with a warning
    random_state : int or None

    Returns
    -------
    S : bool ndarray of shape (n, n_classes)

    Examples
    --------
    >>> S = class_dependent([0, 0, 0, 0], n_classes=4, p=1.0, eps=1.0, random_state=0)
    >>> partner = partner_classes(4, random_state=0)
    >>> S[:, partner[0]].all(), S.sum(axis=1).tolist()
    (np.True_, [2, 2, 2, 2])
    """
    y = _check_labels(y, n_classes)
    _check_probability("p", p)
    _check_probability("eps", eps)
    r = _cap_r(r, n_classes)
    eps = max(eps, 1.0 / (n_classes - 1))
    if eps >= 1.0 and r > 1:
        raise InvalidParameterError(f"eps=1 gives weight only to the partner, so r must be 1, got r={r}")
    seed = seed_to_int(random_state)
    partner = partner_classes(n_classes, seed)
    n = y.size
    weights = np.full((n, n_classes), (1.0 - eps) / (n_classes - 2))
    has_partner = partner[y] >= 0
    weights[~has_partner] = 1.0
    weights[np.flatnonzero(has_partner), partner[y[has_partner]]] = eps
    weights[np.arange(n), y] = 0.0
    weights[~_partial_rows(seed, n, p)] = 0.0
    return _add_weighted(one_hot(y, n_classes), weights, r, seed)


def instance_flip_probabilities(proba, y):
    """Zhang et al.'s per-label flip probabilities from a classifier's class probabilities.

    ``xi[i, c] = proba[i, c] / max_{c' != y_i} proba[i, c']`` for ``c != y_i``
    and 0 for the true label (a row is all 0 when that maximum is 0); the
    result is ``0.3 * xi / mean(xi)`` over the row's ``l`` entries, clipped to
    [0, 1].

    Parameters
    ----------
    proba : array of shape (n, l)
    y : int array of shape (n,)

    Returns
    -------
    q : ndarray of shape (n, l)
    """
    proba = np.asarray(proba, dtype=np.float64)
    n = proba.shape[0]
    rows = np.arange(n)
    others = proba.copy()
    others[rows, y] = -np.inf
    top = others.max(axis=1)
    xi = np.where(top[:, None] > 0, proba / np.where(top > 0, top, 1.0)[:, None], 0.0)
    xi[rows, y] = 0.0
    mean = xi.mean(axis=1)
    q = np.where(mean[:, None] > 0, _IDN_SCALE * xi / np.where(mean > 0, mean, 1.0)[:, None], 0.0)
    return np.clip(q, 0.0, 1.0)


def default_noise_classifier(random_state=None):
    """The small neural network of instance-dependent noise (standardized inputs, one hidden layer)."""
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(
        StandardScaler(),
        MLPClassifier(hidden_layer_sizes=(64,), max_iter=200, random_state=seed_to_int(random_state)),
    )


def authors_noise_classifier(random_state=None):
    """The DST-PLL authors' noise network: min-max scaled inputs, d-300-300-300-l, 10 epochs of SGD on a squared loss.

    It barely leaves its initialisation (:mod:`pll.noise._network`), so the
    bags it yields are close to uniform noise with about ``0.3 l / (l - 1)``
    per wrong label.
    """
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler

    from ._network import SquaredLossMLP

    return make_pipeline(MinMaxScaler(), SquaredLossMLP(random_state=seed_to_int(random_state)))


NOISE_CLASSIFIERS = {"mlp": default_noise_classifier, "authors_sgd": authors_noise_classifier}
"""The classifiers instance-dependent noise can be made with, by name (its parameter ``classifier``)."""


def class_probabilities(X, y, n_classes, estimator=None, random_state=None, classifier="mlp"):
    """Fit a probabilistic classifier on (X, y) and return its probabilities, shape (n, n_classes).

    ``estimator`` (cloned) takes precedence over the named ``classifier`` of :data:`NOISE_CLASSIFIERS`.
    """
    from sklearn.base import clone
    from sklearn.exceptions import ConvergenceWarning

    if estimator is None and classifier not in NOISE_CLASSIFIERS:
        raise InvalidParameterError(f"unknown noise classifier {classifier!r}: choose from {', '.join(NOISE_CLASSIFIERS)}")
    model = NOISE_CLASSIFIERS[classifier](random_state) if estimator is None else clone(estimator)
    if not hasattr(model, "predict_proba"):
        raise InvalidParameterError(f"estimator {type(model).__name__} has no predict_proba")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    proba = np.zeros((y.size, n_classes))
    proba[:, np.asarray(model.classes_, dtype=np.int64)] = model.predict_proba(X)
    return proba


def instance_dependent(X, y, n_classes, classifier="mlp", random_state=None, *, estimator=None):
    """Instance-dependent noise (Zhang et al. 2021): confusable labels join the bag more often.

    A probabilistic classifier ``g`` is fitted on the true labels
    (:func:`class_probabilities`; by default a small neural network trained
    to fit them; ``classifier="authors_sgd"``: the DST-PLL authors' network,
    which they train for only 10 epochs of SGD); each wrong label then joins
    the bag independently with the probability
    :func:`instance_flip_probabilities` gives it.

    Parameters
    ----------
    X : array of shape (n, d)
    y : int array of shape (n,)
    n_classes : int
    classifier : {"mlp", "authors_sgd"}, default "mlp"
        The classifier ``g`` by name (:data:`NOISE_CLASSIFIERS`).
    random_state : int or None
    estimator : scikit-learn classifier with ``predict_proba``, optional
        Replaces the named classifier (it is cloned, not modified).

    Returns
    -------
    S : bool ndarray of shape (n, n_classes)
    """
    y = _check_labels(y, n_classes)
    X = _check_features(X, y.size)
    seed = seed_to_int(random_state)
    q = instance_flip_probabilities(class_probabilities(X, y, n_classes, estimator, seed, classifier), y)
    S = _cell_uniform(seed, y.size, n_classes, _MEMBER) < q
    S[np.arange(y.size), y] = True
    return S


def cluster_assignments(X, n_clusters=5, random_state=None):
    """k-means cluster of each row (the clusters of cluster-dependent noise), int array (n,)."""
    from sklearn.cluster import KMeans

    X = np.asarray(X, dtype=np.float64)
    if not isinstance(n_clusters, (int, np.integer)) or not 1 <= n_clusters <= X.shape[0]:
        raise InvalidParameterError(f"n_clusters must be an integer in [1, {X.shape[0]}], got {n_clusters!r}")
    km = KMeans(n_clusters=int(n_clusters), n_init=10, random_state=seed_to_int(random_state))
    return km.fit_predict(X).astype(np.int64)


def cluster_alpha(n_clusters, n_classes, random_state=None):
    """Inclusion probability per (cluster, anchor label), drawn from U[0, 0.8]; shape (n_clusters, n_classes)."""
    rng = np.random.default_rng([seed_to_int(random_state), _ALPHA])
    return rng.uniform(0.0, 0.8, size=(n_clusters, n_classes))


def cluster_bags(y, n_classes, clusters, alpha, nu=0.0, random_state=None):
    """Bags of cluster-dependent noise for given clusters and inclusion probabilities.

    With probability ``nu`` a row's anchor is a random wrong label, else its
    true label; every label joins the bag independently with probability
    ``alpha[cluster, anchor]``, and the anchor always does.

    Parameters
    ----------
    y : int array of shape (n,)
    n_classes : int
    clusters : int array of shape (n,)
    alpha : array of shape (n_clusters, n_classes), values in [0, 1]
    nu : float in [0, 1]
    random_state : int or None

    Returns
    -------
    S : bool ndarray of shape (n, n_classes)
    """
    y = _check_labels(y, n_classes)
    _check_probability("nu", nu)
    seed = seed_to_int(random_state)
    rows = np.arange(y.size)
    wrong = row_uniform(seed, rows, _ANCHOR) < nu
    shift = 1 + np.floor(row_uniform(seed, rows, _ANCHOR_LABEL) * (n_classes - 1)).astype(np.int64)
    anchor = np.where(wrong, (y + shift) % n_classes, y)
    S = _cell_uniform(seed, y.size, n_classes, _MEMBER) < np.asarray(alpha)[clusters, anchor][:, None]
    S[rows, anchor] = True
    return S


def cluster_dependent(X, y, n_classes, n_clusters=5, nu=0.0, random_state=None):
    """Cluster-dependent noise (PL A-kNN paper, section 4.1).

    k-means splits the rows into ``n_clusters`` clusters
    (:func:`cluster_assignments`); per (cluster, label) an inclusion
    probability is drawn from U[0, 0.8] (:func:`cluster_alpha`); then
    :func:`cluster_bags`.  With ``nu > 0`` the true label can be missing.

    Parameters
    ----------
    X : array of shape (n, d)
    y : int array of shape (n,)
    n_classes, n_clusters : int
    nu : float in [0, 1]
    random_state : int or None

    Returns
    -------
    S : bool ndarray of shape (n, n_classes)
    """
    y = _check_labels(y, n_classes)
    X = _check_features(X, y.size)
    seed = seed_to_int(random_state)
    clusters = cluster_assignments(X, n_clusters, seed)
    return cluster_bags(y, n_classes, clusters, cluster_alpha(n_clusters, n_classes, seed), nu, seed)


def remove_true_label(S, y, nu, random_state=None):
    """With probability ``nu`` drop each row's true label from its bag (noisy real partial labels).

    A bag that held only its true label becomes empty.

    Parameters
    ----------
    S : bool array of shape (n, l)
    y : int array of shape (n,)
    nu : float in [0, 1]
    random_state : int or None

    Returns
    -------
    S : bool ndarray of shape (n, l), a new array

    Examples
    --------
    >>> S = remove_true_label([[1, 1, 0], [0, 1, 1]], [0, 2], nu=1.0)
    >>> S.astype(int).tolist()
    [[0, 1, 0], [0, 1, 0]]
    """
    S = check_bags(S).copy()
    y = _check_labels(y, S.shape[1])
    if y.size != S.shape[0]:
        raise InvalidDataError(f"{S.shape[0]} bags but {y.size} true labels (row counts differ)")
    _check_probability("nu", nu)
    drop = np.flatnonzero(row_uniform(seed_to_int(random_state), np.arange(y.size), _REMOVE) < nu)
    S[drop, y[drop]] = False
    return S


NOISE_MODELS = {
    "uniform": uniform,
    "class_dependent": class_dependent,
    "instance_dependent": instance_dependent,
    "cluster_dependent": cluster_dependent,
    "remove_true_label": remove_true_label,
}
# The positional arguments each model takes from a data set.
_ARGUMENTS = {
    "uniform": lambda ds: (ds.y, ds.n_classes),
    "class_dependent": lambda ds: (ds.y, ds.n_classes),
    "instance_dependent": lambda ds: (ds.X, ds.y, ds.n_classes),
    "cluster_dependent": lambda ds: (ds.X, ds.y, ds.n_classes),
    "remove_true_label": lambda ds: (ds.S, ds.y),
}
# The models' arguments that come from the data set, not from the user.
_FROM_DATA = frozenset({"X", "y", "S", "n_classes"})
# (may empty a bag, may leave the true label outside) for the models that can.
_NOISY = {"cluster_dependent": (False, True), "remove_true_label": (True, True)}


def check_noise(model, params=None):
    """Refuse an unknown noise model, parameter name or a missing parameter before any data is read.

    A model takes the parameters of its function that the data does not
    supply (:data:`_FROM_DATA`), but the seed; ``none`` takes none, and
    ``auto`` those of ``class_dependent``, the model it picks when it adds noise.
    """
    params = dict(params or {})
    if model == "none" and params:
        raise InvalidParameterError(f"noise model 'none' takes no parameters, got {', '.join(params)}")
    name = "class_dependent" if model in ("auto", "none") else model
    if name not in NOISE_MODELS:
        raise InvalidParameterError(f"unknown noise model {model!r}: choose from auto, none, {', '.join(NOISE_MODELS)}")
    own = _own_parameters(name)
    unknown = [key for key in params if key not in own]
    if unknown:
        raise InvalidParameterError(f"noise model {model!r} has no parameter {unknown[0]!r}; "
                                    f"its parameters: {', '.join(own) or 'none'}")
    if name == "instance_dependent" and params.get("classifier", "mlp") not in NOISE_CLASSIFIERS:
        raise InvalidParameterError(f"noise model {model!r}: unknown classifier {params['classifier']!r}; "
                                    f"choose from {', '.join(NOISE_CLASSIFIERS)}")
    missing = [key for key, p in own.items() if p.default is p.empty and key not in params]
    if missing:
        raise InvalidParameterError(f"noise model {model!r} needs the parameter {missing[0]!r}")


def check_noise_applies(ds, model):
    """Refuse a noise model that needs true labels (every one but ``auto`` and ``none``) on data without them."""
    if model not in ("auto", "none") and ds.y is None:
        raise InvalidDataError(f"{ds.name}: noise model {model!r} needs true labels, and the data has none")


def _own_parameters(model):
    """The parameters of noise ``model``'s function that the user sets: not the data's, not the seed."""
    return {key: p for key, p in inspect.signature(NOISE_MODELS[model]).parameters.items()
            if key not in _FROM_DATA and key != "random_state"}


def noise_parameters(model, params=None):
    """The parameters noise ``model`` ran with: ``params`` over its function's defaults (data and seed aside)."""
    defaults = {key: p.default for key, p in _own_parameters(model).items()
                if p.default is not p.empty and p.default is not None}
    return {**defaults, **dict(params or {})}


def describe_noise(model, params=None):
    """What a run did to the labels, in words: the noise model and every parameter it used, or bags as loaded.

    ``model`` as :func:`apply_noise` records it in the data set's summary
    (``auto`` already resolved).
    """
    if model in (None, "none"):
        return "bags as loaded (no noise added)"
    used = ", ".join(f"{key}={value}" for key, value in noise_parameters(model, params).items())
    return f"{model} noise ({used}) added to the true labels"


def apply_noise(ds, model="auto", params=None, random_state=None):
    """The data set ``ds`` with bags from noise ``model``.

    ``"none"`` keeps the bags as loaded; ``"auto"`` means ``class_dependent``
    for fully labelled data (every bag a single label) and ``"none"`` for data
    that already has partial labels.  Models that may drop the true label
    (``cluster_dependent``, ``remove_true_label``) mark the result as noisy
    partial labels, which the summary then counts.
    """
    params = dict(params or {})
    check_noise(model, params)
    if model == "auto":
        model = "class_dependent" if ds.y is not None and (ds.S.sum(axis=1) == 1).all() else "none"
    if model == "none":
        if params:
            raise InvalidParameterError(f"noise model 'none' takes no parameters, got {', '.join(params)}")
        return ds.with_bags(ds.S, noise="none")
    check_noise_applies(ds, model)
    S = NOISE_MODELS[model](*_ARGUMENTS[model](ds), **params, random_state=random_state)
    empty, outside = _NOISY.get(model, (False, False))
    return ds.with_bags(
        S,
        allow_empty_bags=ds.allow_empty_bags or empty,
        allow_true_label_outside=ds.allow_true_label_outside or outside,
        noise=model,
        noise_params=params,
    )

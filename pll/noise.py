"""Partial-label noise models: make candidate bags from true labels.

Each model returns a bool candidate matrix ``S`` of shape (n, l).  Every row
is partially labelled independently with probability ``p``; the models differ
in which wrong labels join the bag.  Definitions: ALGORITHMS.md.
"""

from __future__ import annotations

import warnings

import numpy as np

from .errors import InvalidDataError, InvalidParameterError


def _check_labels(y, n_classes):
    y = np.asarray(y)
    if y.ndim != 1 or y.size == 0:
        raise InvalidDataError(f"true labels must be a non-empty 1-d array, got shape {y.shape}")
    if not np.issubdtype(y.dtype, np.integer):
        raise InvalidDataError("true labels must be class indices (integers)")
    if n_classes < 3:
        raise InvalidParameterError(f"noise models need at least three classes, got n_classes={n_classes}")
    bad = (y < 0) | (y >= n_classes)
    if bad.any():
        raise InvalidDataError(
            f"true label {int(y[bad][0])} at row {int(np.argmax(bad))} is outside [0, {n_classes})"
        )
    return y.astype(np.int64)


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


def _one_hot(y, n_classes):
    S = np.zeros((y.size, n_classes), dtype=bool)
    S[np.arange(y.size), y] = True
    return S


def _add_weighted(S, rows, weights, r, rng):
    """Add ``r`` labels per row in ``rows``, drawn without replacement with ``weights``.

    Vectorized weighted sampling without replacement (Efraimidis-Spirakis):
    the ``r`` largest keys ``log(u) / w`` form the sample.
    """
    if rows.size == 0:
        return S
    u = rng.random(weights.shape)
    with np.errstate(divide="ignore"):
        keys = np.where(weights > 0, np.log(u) / np.where(weights > 0, weights, 1.0), -np.inf)
    top = np.argpartition(-keys, r - 1, axis=1)[:, :r]
    S[rows[:, None], top] = True
    return S


def uniform(y, n_classes, p=0.7, r=3, random_state=None):
    """With probability ``p`` a row gets ``r`` distinct wrong labels, uniformly."""
    y = _check_labels(y, n_classes)
    _check_probability("p", p)
    r = _cap_r(r, n_classes)
    rng = np.random.default_rng(random_state)
    S = _one_hot(y, n_classes)
    rows = np.flatnonzero(rng.random(y.size) < p)
    weights = np.ones((rows.size, n_classes))
    weights[np.arange(rows.size), y[rows]] = 0.0
    return _add_weighted(S, rows, weights, r, rng)


def class_dependent(y, n_classes, p=0.7, eps=0.7, r=1, random_state=None):
    """Cour et al.'s model: wrong labels favour each class's random partner.

    Classes are paired at random (with an odd count one class has no partner).
    With probability ``p`` a row gets ``r`` wrong labels drawn without
    replacement, with weight ``eps`` (raised to at least ``1/(l-1)``) for the
    partner and ``(1 - eps)/(l - 2)`` for each other wrong label.
    """
    y = _check_labels(y, n_classes)
    _check_probability("p", p)
    _check_probability("eps", eps)
    r = _cap_r(r, n_classes)
    rng = np.random.default_rng(random_state)
    partner = partner_classes(n_classes, rng)
    eps = max(eps, 1.0 / (n_classes - 1))
    S = _one_hot(y, n_classes)
    rows = np.flatnonzero(rng.random(y.size) < p)
    yr = y[rows]
    weights = np.full((rows.size, n_classes), (1.0 - eps) / (n_classes - 2))
    has_partner = partner[yr] >= 0
    weights[np.flatnonzero(has_partner), partner[yr[has_partner]]] = eps
    weights[~has_partner] = 1.0
    weights[np.arange(rows.size), yr] = 0.0
    return _add_weighted(S, rows, weights, r, rng)


def partner_classes(n_classes, rng):
    """A random pairing of the classes: ``partner[c]`` is c's partner, or -1 for the odd one out."""
    perm = rng.permutation(n_classes)
    partner = np.full(n_classes, -1, dtype=np.int64)
    a, b = perm[0 : n_classes - 1 : 2], perm[1:n_classes:2]
    partner[a], partner[b] = b, a
    return partner


NOISE_MODELS = {"uniform": uniform, "class_dependent": class_dependent}


def apply_noise(ds, model="auto", params=None, random_state=None):
    """The data set ``ds`` with bags from noise ``model``.

    ``"none"`` keeps the bags as loaded; ``"auto"`` means ``class_dependent``
    for fully labelled data (every bag a single label) and ``"none"`` for data
    that already has partial labels.
    """
    params = dict(params or {})
    if model == "auto":
        model = "class_dependent" if ds.y is not None and (ds.S.sum(axis=1) == 1).all() else "none"
    if model == "none":
        if params:
            raise InvalidParameterError(f"noise model 'none' takes no parameters, got {', '.join(params)}")
        return ds.with_bags(ds.S, noise="none")
    if model not in NOISE_MODELS:
        raise InvalidParameterError(
            f"unknown noise model {model!r}: choose from auto, none, {', '.join(NOISE_MODELS)}"
        )
    if ds.y is None:
        raise InvalidDataError(f"{ds.name}: noise model {model!r} needs true labels, and the data has none")
    try:
        S = NOISE_MODELS[model](ds.y, ds.n_classes, **params, random_state=random_state)
    except TypeError as exc:
        raise InvalidParameterError(f"noise model {model!r}: {exc}") from None
    return ds.with_bags(S, noise=model, noise_params=params)

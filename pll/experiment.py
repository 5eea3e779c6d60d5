"""The evaluation protocol of one run: which rows train, test and calibrate.

The papers split 80/20 at random.  On top of that a seeded validation
hold-out is carved from the training rows: a model fitted on the remaining
training rows scores it exactly like test rows, so that reject thresholds
can be calibrated without looking at the test rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .data import split_indices
from .errors import InvalidParameterError


@dataclass(frozen=True, eq=False)
class SplitRows:
    """Row indices of one run.

    Attributes
    ----------
    train, test : ndarray of int
        Data set rows, sorted.
    val, fit : ndarray of int
        Positions *within* ``train``: the validation hold-out and the rest.
    """

    train: np.ndarray
    test: np.ndarray
    val: np.ndarray
    fit: np.ndarray


def make_split(n_rows, seed=0, test_size=0.2, val_fraction=0.2) -> SplitRows:
    """A seeded train/test split with a validation hold-out inside the training rows."""
    train, test = split_indices(n_rows, test_size, seed)
    if not 0.0 < val_fraction < 1.0:
        raise InvalidParameterError(f"val_fraction must be in (0, 1), got {val_fraction}")
    n_val = int(round(val_fraction * train.size))
    if n_val < 1 or n_val >= train.size:
        raise InvalidParameterError(
            f"val_fraction={val_fraction} leaves no validation or no fitting rows among {train.size} training rows"
        )
    perm = np.random.default_rng([seed, 1]).permutation(train.size)
    return SplitRows(train, test, np.sort(perm[:n_val]), np.sort(perm[n_val:]))


def group_by_features(methods, features, method_features=None):
    """Map each feature pipeline to the methods that use it (methods sharing features share kNN)."""
    groups = {}
    for method in methods:
        groups.setdefault((method_features or {}).get(method, features), []).append(method)
    return groups


def check_run(
    *,
    dataset,
    mat_variables=None,
    protocol="none",
    noise="auto",
    noise_params=None,
    methods,
    method_params=None,
    features="minmax",
    method_features=None,
    knn_backend="auto",
    knn_options=None,
    val_fraction=0.2,
):
    """Refuse a run whose parameters cannot work, before any data is read or any stage starts.

    Names the first bad parameter: the data set (a built-in name or an
    existing file of a known type) and the names of its ``.mat`` variables, protocol, noise model and its parameter
    names, methods and their parameters, feature pipelines, kNN backend and
    its options, validation fraction.
    """
    from .data import PROTOCOLS, check_source
    from .features import FEATURE_PIPELINES
    from .methods import METHODS, make_method
    from .neighbors.index import check_backend
    from .noise import check_noise

    check_source(dataset, variables=mat_variables)
    if protocol not in PROTOCOLS:
        raise InvalidParameterError(f"unknown protocol {protocol!r}: choose from {', '.join(PROTOCOLS)}")
    check_noise(noise, noise_params)
    if not methods:
        raise InvalidParameterError("no method to run: name at least one of " + ", ".join(METHODS))
    strays = sorted(set(method_params or {}) - set(methods))
    if strays:
        raise InvalidParameterError(f"parameters given for {strays[0]!r}, which the run does not run")
    for method in methods:
        make_method(method, (method_params or {}).get(method))
    for method, name in {**(method_features or {}), "": features}.items():
        if name not in FEATURE_PIPELINES:
            where = f"features of {method!r}" if method else "features"
            raise InvalidParameterError(f"{where}: unknown feature pipeline {name!r}; "
                                        f"choose from {', '.join(FEATURE_PIPELINES)}")
    check_backend(knn_backend, knn_options)
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, (int, float)) or not 0 < val_fraction < 1:
        raise InvalidParameterError(f"val_fraction must be a number in (0, 1), got {val_fraction!r}")

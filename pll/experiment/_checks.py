"""Refuse a run whose parameters cannot work, before any data is read or any stage starts."""

from __future__ import annotations

from . import catalog
from ..errors import InvalidParameterError
from ..utils.validation import check_fraction
from ..neighbors.registry import DEFAULT_BACKEND, check_backend


def check_run(
    *,
    dataset,
    mat_variables=None,
    protocol=catalog.DEFAULT_PROTOCOL,
    noise=catalog.DEFAULT_NOISE,
    noise_params=None,
    methods,
    method_params=None,
    features=catalog.DEFAULT_FEATURES,
    method_features=None,
    knn=DEFAULT_BACKEND,
    knn_options=None,
    val_fraction=0.2,
    conformal_alpha=catalog.DEFAULT_CONFORMAL_ALPHA,
    seed=0,
):
    """Refuse a run of the pipeline whose parameters cannot work.

    Names the first bad parameter: those :func:`check_data` checks, then
    those :func:`check_protocol` checks.
    """
    check_data(dataset=dataset, mat_variables=mat_variables, protocol=protocol, noise=noise, noise_params=noise_params,
               seed=seed)
    check_protocol(methods=methods, method_params=method_params, features=features, method_features=method_features,
                   knn=knn, knn_options=knn_options, val_fraction=val_fraction,
                   conformal_alpha=conformal_alpha)


def check_data(*, dataset, mat_variables=None, protocol=catalog.DEFAULT_PROTOCOL, noise=catalog.DEFAULT_NOISE,
               noise_params=None, seed=0):
    """Refuse data that cannot be read as asked: the data set (a built-in name or an existing file of a known
    type) and the names of its ``.mat`` variables, the protocol, the noise model and its parameter names, and the
    seed of the noise and the split."""
    from ..data import PROTOCOLS, check_source
    from ..noise import check_noise
    from ..utils._random import check_seed

    check_seed(seed)
    check_source(dataset, variables=mat_variables)
    if protocol not in PROTOCOLS:
        raise InvalidParameterError(f"unknown protocol {protocol!r}: choose from {', '.join(PROTOCOLS)}")
    check_noise(noise, noise_params)


def check_data_content(*, dataset, mat_variables=None, protocol=catalog.DEFAULT_PROTOCOL, noisy_bags=False,
                       noise=catalog.DEFAULT_NOISE):
    """Read the data as a run does and refuse what the run would: the file's content (cells, columns, bags,
    labels) and a noise model that needs true labels the data lacks.

    A full read: the command line calls it before it starts a server, so that bad content is one line at
    once; a flow does not (its first task reads the data).
    """
    from ..data import load_run_data
    from ..noise import check_noise_applies

    check_noise_applies(load_run_data(dataset, protocol, noisy_bags, mat_variables), noise)


def check_feature_pipeline(name, what="features"):
    """Refuse an unknown feature pipeline or bad parameters in its spec, naming ``what`` it was given for."""
    from ..preprocessing import make_features

    try:
        make_features(name)
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"{what}: {exc}") from None


def check_protocol(
    *,
    methods,
    method_params=None,
    features=catalog.DEFAULT_FEATURES,
    method_features=None,
    knn=DEFAULT_BACKEND,
    knn_options=None,
    val_fraction=0.2,
    conformal_alpha=catalog.DEFAULT_CONFORMAL_ALPHA,
):
    """Refuse run protocol parameters that cannot work, naming the first bad one.

    Methods and their parameters (a mapping, or a list of settings), feature pipelines, kNN backend and its
    options, validation fraction, the conformal sets' α (None: no sets).
    """
    from ..methods import METHODS, make_method
    from ._plan import method_settings, plan_run

    if not methods:
        raise InvalidParameterError("no method to run: name at least one of " + ", ".join(METHODS))
    strays = sorted(set(method_params or {}) - set(methods))
    if strays:
        raise InvalidParameterError(f"parameters given for {strays[0]!r}, which the run does not run")
    for method, params in method_settings(methods, method_params):
        make_method(method, params)
    plan_run(methods, method_params, features, method_features)  # two settings with one name
    for method, name in {**(method_features or {}), "": features}.items():
        check_feature_pipeline(name, f"features of {method!r}" if method else "features")
    check_backend(knn, knn_options)
    check_fraction(val_fraction, "val_fraction")
    check_fraction(conformal_alpha, "conformal_alpha", allow_none=True)

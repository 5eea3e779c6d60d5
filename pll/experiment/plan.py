"""Which methods of a run share features, and so one neighbor computation."""

from __future__ import annotations

from dataclasses import dataclass

from .. import catalog

# The run's defaults, of which the catalog holds the only copy.
DEFAULT_METHODS = catalog.DEFAULT_METHODS
DEFAULT_METHOD_FEATURES = catalog.DEFAULT_METHOD_FEATURES


@dataclass(frozen=True)
class FeatureGroup:
    """Methods that run on the same ``features``, and ``k``, the most neighbors any of them needs."""

    features: str
    methods: tuple
    k: int


@dataclass(frozen=True)
class RunPlan:
    """The methods of a run with their parameters and features, grouped by features.

    ``method_params``: method -> its parameters (``{}`` when none were
    given); ``method_features``: method -> feature pipeline, with
    :data:`DEFAULT_METHOD_FEATURES` under what the caller gave.
    """

    method_params: dict
    method_features: dict
    groups: tuple


def group_by_features(methods, features, method_features=None):
    """Map each feature pipeline to the methods that use it (methods sharing features share kNN)."""
    groups = {}
    for method in methods:
        groups.setdefault((method_features or {}).get(method, features), []).append(method)
    return groups


def neighbors_needed(methods: dict) -> int:
    """The largest number of neighbors any of ``methods`` (name -> params) needs."""
    from ..methods import make_method

    return max(make_method(name, params)._n_neighbors_needed() for name, params in methods.items())


def plan_run(methods=DEFAULT_METHODS, method_params=None, features=catalog.DEFAULT_FEATURES, method_features=None) -> RunPlan:
    """The :class:`RunPlan` of ``methods`` with ``method_params`` on ``features`` (``method_features`` per method)."""
    params = {m: dict((method_params or {}).get(m, {})) for m in methods}
    method_features = {**DEFAULT_METHOD_FEATURES, **(method_features or {})}
    groups = tuple(
        FeatureGroup(name, tuple(group), neighbors_needed({m: params[m] for m in group}))
        for name, group in group_by_features(methods, features, method_features).items()
    )
    return RunPlan(params, method_features, groups)

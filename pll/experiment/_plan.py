"""What a run evaluates: its method runs (a method with one setting of its parameters), grouped by features.

A run may evaluate one method with several settings (``method_params``
maps the method to a list of parameter mappings): each setting is a *method
run*, the unit people compare, with a name unique in the run that says the
method and the parameters given, e.g. ``dst_pll`` or ``pl_knn k=5``.
Method runs on the same features share one neighbor computation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import PurePath

from . import catalog
from ..errors import InvalidParameterError

# The run's defaults, of which the catalog holds the only copy.
DEFAULT_METHODS = catalog.DEFAULT_METHODS
DEFAULT_METHOD_FEATURES = catalog.DEFAULT_METHOD_FEATURES
# Short names of parameters in method run names, as the papers write them.
PARAMETER_ABBREVIATIONS = {"n_neighbors": "k"}


@dataclass(frozen=True)
class MethodRun:
    """One method with one setting of its parameters, on one feature pipeline.

    ``name`` is unique in the run and readable (:func:`method_run_name`);
    ``params`` holds the parameters given (``{}``: the method's defaults).
    """

    name: str
    method: str
    params: dict
    features: str


@dataclass(frozen=True)
class FeatureGroup:
    """Method runs on the same ``features``, and ``k``, the most neighbors any of them needs."""

    features: str
    runs: tuple
    k: int


@dataclass(frozen=True)
class RunPlan:
    """The method runs of a run, in order, and the same grouped by features.

    ``method_features``: method -> feature pipeline, with
    :data:`DEFAULT_METHOD_FEATURES` under what the caller gave.
    """

    runs: tuple
    method_features: dict
    groups: tuple

    @property
    def method_params(self) -> dict:
        """Method -> its parameters as given: a mapping, or a list of them for a method with several settings."""
        settings = {}
        for run in self.runs:
            settings.setdefault(run.method, []).append(dict(run.params))
        return {m: s[0] if len(s) == 1 else s for m, s in settings.items()}


def method_run_name(method: str, params: dict) -> str:
    """``method`` followed by the parameters given, e.g. ``pl_knn k=5 weights=distance``.

    Examples
    --------
    >>> method_run_name("dst_pll", {"n_neighbors": 10})
    'dst_pll k=10'
    >>> method_run_name("pl_aknn", {})
    'pl_aknn'
    """
    parts = [method] + [f"{PARAMETER_ABBREVIATIONS.get(k, k)}={_value(v)}" for k, v in params.items()]
    return " ".join(parts)


def noise_label(noise: str, params: dict | None = None) -> str:
    """The noise model with its parameters, e.g. ``class_dependent(p=0.7, eps=0.7)``."""
    return noise + (f"({', '.join(f'{k}={v}' for k, v in params.items())})" if params else "")


def pipeline_run_name(dataset: str, noise: str, noise_params: dict | None, seed: int, *extra: str) -> str:
    """A pipeline run's name: data set (a file by its stem), noise and seed, then any ``extra`` parts.

    Examples
    --------
    >>> pipeline_run_name("data/bird-song.mat", "auto", None, 3)
    'bird-song / auto / seed 3'
    """
    return " / ".join([dataset_label(dataset), noise_label(noise, noise_params), f"seed {seed}", *extra])


def dataset_label(dataset: str) -> str:
    """A data set as run names show it: a built-in name as it is, a file by its stem."""
    return PurePath(dataset).stem if PurePath(dataset).suffix else dataset


def _value(v):
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))


def method_settings(methods, method_params=None) -> list:
    """``(method, params)`` of every method run: a method's parameters are a mapping or a list of mappings."""
    settings = []
    for method in methods:
        given = (method_params or {}).get(method)
        values = given if isinstance(given, list) else [given or {}]
        if not values:
            raise InvalidParameterError(f"parameters of {method!r}: an empty list leaves no run of it")
        for params in values:
            if not isinstance(params, dict):
                raise InvalidParameterError(
                    f"parameters of {method!r}: expected a mapping of parameter names to values (or a list of "
                    f"them), got {params!r}")
            settings.append((method, dict(params)))
    return settings


def neighbors_needed(runs) -> int:
    """The largest number of neighbors any of the method ``runs`` needs."""
    from ..methods import make_method

    return max(make_method(run.method, run.params)._n_neighbors_needed() for run in runs)


def plan_run(methods=DEFAULT_METHODS, method_params=None, features=catalog.DEFAULT_FEATURES, method_features=None) -> RunPlan:
    """The :class:`RunPlan` of ``methods`` with ``method_params`` on ``features`` (``method_features`` per method).

    Raises :class:`~pll.errors.InvalidParameterError` when two method runs
    would have the same name (a setting listed twice).
    """
    method_features = {**DEFAULT_METHOD_FEATURES, **(method_features or {})}
    runs, names = [], set()
    for method, params in method_settings(methods, method_params):
        name = method_run_name(method, params)
        if name in names:
            raise InvalidParameterError(f"method run {name!r} is listed twice")
        names.add(name)
        runs.append(MethodRun(name, method, params, method_features.get(method, features)))
    by_features = {}
    for run in runs:
        by_features.setdefault(run.features, []).append(run)
    groups = tuple(FeatureGroup(name, tuple(group), neighbors_needed(group)) for name, group in by_features.items())
    return RunPlan(tuple(runs), method_features, groups)

"""Benchmark grids: a YAML file describing many pipeline runs, expanded into cells.

A *cell* is one pipeline run: one method with one setting of its parameters
on one data set, noise configuration, seed, feature pipeline and kNN backend.
The grid is the cross product of the lists in the file::

    name: smoke                  # required; letters, digits, '.', '_' and '-'
    description: free text       # optional
    experiment: pll-benchmark    # MLflow experiment of the grid's runs (default: pll-benchmark)
    max_concurrency: 2           # cells running at once (default: 2)
    datasets: [iris, wine]       # required; built-in names or file paths
    protocol: none               # data preparation: none or dst-pll (real-world data as the paper)
    preset: authors_code         # optional: noise parameters the entries below leave out, from the
                                 #   DST-PLL paper's text or its authors' code (pll.experiment.presets);
                                 #   `pll report` also takes its risk aggregation and t-test from it
    noisy_bags: false            # accept empty bags and true labels outside their bags
    noise:                       # default: [auto]; an entry is a model name or a mapping
      - class_dependent          #   whose 'model' names the model and whose other keys
      - {model: uniform, p: [0.3, 0.7]}   # are its parameters
    seeds: [0, 1]                # required; integers
    methods:                     # required; method name -> its parameters
      pl_knn: {n_neighbors: [5, 10]}
      dst_pll: {}
    method_features: {}          # optional; method name -> its feature pipeline, over the
                                 #   defaults of every run (pll.experiment.catalog.DEFAULT_METHOD_FEATURES)
    features: minmax             # default: minmax; one pipeline or a list; parameters in
                                 #   parentheses, e.g. pl_aknn_real(density_k=100)
    knn: auto            # default: auto; one backend or a list
    knn_options: {}              # options of the kNN backend (not expanded)
    val_fraction: 0.2            # validation hold-out inside the training rows

Wherever a parameter's value is a list (noise and method parameters,
``datasets``, ``seeds``, ``features``, ``knn``), the grid holds one
cell per value; lists in several places multiply.  The example above has
2 data sets x 3 noise settings x 2 seeds x 3 method settings = 36 cells.

Cells that differ only in their method settings share one pipeline
execution (:class:`Execution`): one data set, noise, split, feature fit and
neighbor search, and a method run per cell.  The example above runs 12
executions of 3 method runs each.

Every cell has a stable key, a hash of its pipeline parameters: the same
cell in any grid, on any machine, has the same key; an execution's key
hashes its cells' keys, a grid's its name and its cells' keys.

Examples
--------
>>> grid = parse_grid({"name": "tiny", "datasets": ["iris"], "seeds": [0, 1],
...                    "methods": {"pl_knn": {"n_neighbors": [3, 5]}}})
>>> len(grid.cells)
4
>>> grid.cells[0].label
'iris / auto / pl_knn k=3 / seed 0'
>>> grid.cells[0].pipeline_parameters()["method_params"]
{'pl_knn': {'n_neighbors': 3}}
>>> [(e.run_name, e.pipeline_parameters()["method_params"]) for e in grid.executions]
[('iris / auto / seed 0', {'pl_knn': [{'n_neighbors': 3}, {'n_neighbors': 5}]}), \
('iris / auto / seed 1', {'pl_knn': [{'n_neighbors': 3}, {'n_neighbors': 5}]})]
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from . import catalog
from ..data import PROTOCOLS
from ..errors import DataFileError, InvalidParameterError, PllError
from ..evaluation import compare_methods
from ._evaluate import LABEL_METRICS, SHARED_LABEL_OPTIONS
from ._plan import method_run_name, noise_label, pipeline_run_name
from ..preprocessing import make_features
from ..methods import METHODS, make_method
from ..evaluation.metric_names import risk_name
from ..neighbors.registry import BACKENDS, DEFAULT_BACKEND, check_backend
from ..noise import check_noise
from .presets import PRESETS, preset_noise_params
from ..utils.validation import check_fraction, is_positive_int

DEFAULT_MAX_CONCURRENCY = 2
KEYS = (
    "name", "description", "experiment", "max_concurrency", "datasets", "protocol", "preset", "noisy_bags", "noise",
    "seeds",
    "methods", "method_features", "features", "knn", "knn_options", "val_fraction",
)
REQUIRED = ("name", "datasets", "seeds", "methods")
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def stable_hash(obj, length=12) -> str:
    """A hash of a JSON-able object that does not depend on dict order, process or machine."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:length]


@dataclass(frozen=True, eq=False)
class Cell:
    """One method setting on one data set, noise, seed, features and kNN backend: a method run of a grid.

    ``features`` is the method's feature pipeline, ``run_features`` the
    grid's, which the other methods of its execution run on.
    """

    dataset: str
    protocol: str
    noisy_bags: bool
    noise: str
    noise_params: dict
    seed: int
    method: str
    method_params: dict
    features: str
    knn: str
    knn_options: dict
    val_fraction: float
    run_features: str

    def pipeline_parameters(self) -> dict:
        """Keyword arguments of a pipeline flow that runs this cell alone."""
        return {
            "dataset": self.dataset,
            "protocol": self.protocol,
            "noisy_bags": self.noisy_bags,
            "noise": self.noise,
            "noise_params": dict(self.noise_params),
            "seed": self.seed,
            "methods": [self.method],
            "method_params": {self.method: dict(self.method_params)},
            "features": self.features,
            "knn": self.knn,
            "knn_options": dict(self.knn_options),
            "val_fraction": self.val_fraction,
        }

    @property
    def key(self) -> str:
        return stable_hash(self.pipeline_parameters())

    @property
    def noise_label(self) -> str:
        return noise_label(self.noise, self.noise_params)

    @property
    def variant(self) -> str:
        """The method with its parameters, its method run's name, e.g. ``pl_knn k=5``."""
        return method_run_name(self.method, self.method_params)

    @property
    def execution_settings(self) -> tuple:
        """What its execution shares: everything but the method setting (hashable)."""
        return (self.dataset, self.protocol, self.noisy_bags, self.noise, stable_hash(self.noise_params), self.seed,
                self.run_features, self.knn, stable_hash(self.knn_options), self.val_fraction)

    @property
    def label(self) -> str:
        """A short human-readable name: data set / noise / method(params) / seed."""
        return f"{self.dataset} / {self.noise_label} / {self.variant} / seed {self.seed}"


@dataclass(frozen=True, eq=False)
class Execution:
    """The cells of a grid that share one pipeline execution; ``run_name`` is unique in the grid."""

    cells: tuple
    run_name: str

    @property
    def key(self) -> str:
        return stable_hash([c.key for c in self.cells])

    def pipeline_parameters(self) -> dict:
        """Keyword arguments of the pipeline flow: one method run per cell, named by :attr:`Cell.variant`."""
        first = self.cells[0]
        settings = {}
        for cell in self.cells:
            settings.setdefault(cell.method, []).append(dict(cell.method_params))
        params = first.pipeline_parameters()
        params.update(
            methods=list(settings),
            method_params={m: s[0] if len(s) == 1 else s for m, s in settings.items()},
            features=first.run_features,
            method_features={c.method: c.features for c in self.cells},
            run_name=self.run_name,
        )
        return params


def _executions(cells) -> tuple:
    """Cells grouped by what they share, in order of first appearance; names say what differs between groups."""
    groups = {}
    for cell in cells:
        groups.setdefault(cell.execution_settings, []).append(cell)
    varying = [(attr, label) for attr, label in (("run_features", "features"), ("knn", "knn"))
               if len({getattr(c, attr) for c in cells}) > 1]
    stems = {}
    for cell in cells:
        stems.setdefault(Path(cell.dataset).stem, set()).add(cell.dataset)
    executions = []
    for group in groups.values():
        c = group[0]
        # A file by its stem, or by its path without the suffix when stems clash.
        dataset = str(Path(c.dataset).with_suffix("")) if len(stems[Path(c.dataset).stem]) > 1 else c.dataset
        extra = [f"{label}={getattr(c, attr)}" for attr, label in varying]
        executions.append(Execution(tuple(group), pipeline_run_name(dataset, c.noise, c.noise_params, c.seed, *extra)))
    return tuple(executions)


@dataclass(frozen=True, eq=False)
class Grid:
    """A validated grid: its settings and its cells in a fixed order."""

    name: str
    cells: tuple
    experiment: str = catalog.DEFAULT_GRID_EXPERIMENT
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    description: str = ""
    source: str = "<grid>"
    spec: dict = field(default_factory=dict)
    preset: str | None = None

    @property
    def key(self) -> str:
        return stable_hash({"name": self.name, "cells": [c.key for c in self.cells]})

    @property
    def executions(self) -> tuple:
        """The grid's :class:`Execution` s: its cells grouped by all but their method settings."""
        return _executions(self.cells)


def load_grid(path, preset=None) -> Grid:
    """Read and validate the grid file at ``path``; ``preset`` (a name) replaces the file's own."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read the grid file ({exc.strerror or exc})") from None
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DataFileError(f"{path}: not valid YAML ({exc})") from None
    return parse_grid(spec, source=str(path), preset=preset)


def parse_grid(spec, source="<grid>", preset=None) -> Grid:
    """Validate a grid given as a mapping (the parsed YAML) and expand it into cells.

    ``preset`` (a name of :data:`pll.experiment.presets.PRESETS`) replaces the grid's own ``preset``.

    Raises
    ------
    InvalidParameterError
        Naming ``source`` and the offending key and value.
    """

    def bad(where, message):
        return InvalidParameterError(f"{source}: {where}: {message}")

    if not isinstance(spec, dict):
        raise InvalidParameterError(f"{source}: a grid must be a mapping of keys, got {type(spec).__name__}")
    if preset is not None:
        spec = {**spec, "preset": preset}
    unknown = [k for k in spec if k not in KEYS]
    if unknown:
        raise bad(f"key {unknown[0]!r}", f"unknown key; the keys are {', '.join(KEYS)}")
    missing = [k for k in REQUIRED if k not in spec]
    if missing:
        raise bad(f"key {missing[0]!r}", "required key is missing")

    name = spec["name"]
    if not isinstance(name, str) or not _NAME.match(name):
        raise bad("name", f"must be letters, digits, '.', '_' or '-', got {name!r}")
    experiment = _string(spec.get("experiment", catalog.DEFAULT_GRID_EXPERIMENT), "experiment", bad)
    description = _string(spec.get("description", ""), "description", bad, allow_empty=True)
    max_concurrency = spec.get("max_concurrency", DEFAULT_MAX_CONCURRENCY)
    if not is_positive_int(max_concurrency):
        raise bad("max_concurrency", f"must be a positive integer, got {max_concurrency!r}")
    val_fraction = spec.get("val_fraction", 0.2)
    try:
        check_fraction(val_fraction, "val_fraction")
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"{source}: {exc}") from None

    datasets = [_string(d, f"datasets[{i}]", bad) for i, d in enumerate(_values(spec["datasets"], "datasets", bad))]
    protocol = spec.get("protocol", catalog.DEFAULT_PROTOCOL)
    if protocol not in PROTOCOLS:
        raise bad("protocol", f"unknown value {protocol!r}; choose from {', '.join(PROTOCOLS)}")
    noisy_bags = spec.get("noisy_bags", False)
    if not isinstance(noisy_bags, bool):
        raise bad("noisy_bags", f"must be true or false, got {noisy_bags!r}")
    seeds = _values(spec["seeds"], "seeds", bad)
    for i, seed in enumerate(seeds):
        if not _is_int(seed) or seed < 0:
            raise bad(f"seeds[{i}]", f"must be a non-negative integer, got {seed!r}")
    features = _values(spec.get("features", catalog.DEFAULT_FEATURES), "features", bad)
    for i, feature in enumerate(features):
        _feature_spec(feature, f"features[{i}]" if isinstance(spec.get("features"), list) else "features", bad)
    backends = _choices(spec.get("knn", DEFAULT_BACKEND), "knn", BACKENDS, bad)
    knn_options = spec.get("knn_options") or {}
    if not isinstance(knn_options, dict):
        raise bad("knn_options", f"must be a mapping of option names to values, got {knn_options!r}")
    for backend in backends:
        try:
            check_backend(backend, knn_options)
        except PllError as exc:
            raise bad("knn_options", str(exc)) from None
    preset = spec.get("preset")
    if preset is not None and preset not in PRESETS:
        raise bad("preset", f"unknown value {preset!r}; choose from {', '.join(PRESETS)}")
    noises = [(model, preset_noise_params(preset, model, params))
              for model, params in _noise_settings(spec.get("noise", catalog.DEFAULT_NOISE), bad)]
    methods = _method_settings(spec["methods"], bad)
    method_features = _method_features(spec.get("method_features") or {}, methods, bad)

    cells = []
    for dataset, (noise, noise_params), feature, backend, (method, params), seed in itertools.product(
        datasets, noises, features, backends, methods, seeds
    ):
        cells.append(
            Cell(dataset, protocol, noisy_bags, noise, noise_params, int(seed), method, params,
                 method_features.get(method, feature), backend, knn_options, float(val_fraction), feature)
        )
    seen = {}
    for cell in cells:
        if cell.key in seen:
            raise bad("cells", f"{cell.label!r} appears twice (a value is listed twice)")
        seen[cell.key] = cell
    return Grid(name, tuple(cells), experiment, int(max_concurrency), description, source, dict(spec), preset)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _string(value, where, bad, allow_empty=False):
    if not isinstance(value, str) or not (value or allow_empty):
        raise bad(where, f"must be a non-empty string, got {value!r}")
    return value


def _values(value, where, bad):
    """A scalar or a non-empty list, as a list."""
    values = value if isinstance(value, list) else [value]
    if not values:
        raise bad(where, "an empty list leaves no cells")
    return values


def _choices(value, where, allowed, bad):
    values = _values(value, where, bad)
    for i, v in enumerate(values):
        if v not in allowed:
            raise bad(f"{where}[{i}]" if isinstance(value, list) else where,
                      f"unknown value {v!r}; choose from {', '.join(allowed)}")
    return values


def _expand(params, where, bad):
    """All settings of a parameter mapping: the cross product of its list values."""
    if not isinstance(params, dict):
        raise bad(where, f"must be a mapping of parameter names to values, got {params!r}")
    names = [str(k) for k in params]
    choices = [_values(v, f"{where}.{k}", bad) for k, v in params.items()]
    return [dict(zip(names, combo)) for combo in itertools.product(*choices)]


def _noise_settings(value, bad):
    settings = []
    entries = value if isinstance(value, list) else [value]
    if not entries:
        raise bad("noise", "an empty list leaves no cells")
    for i, entry in enumerate(entries):
        where = f"noise[{i}]" if isinstance(value, list) else "noise"
        if isinstance(entry, str):
            model, params = entry, {}
        elif isinstance(entry, dict):
            params = dict(entry)
            model = params.pop("model", None)
            if not isinstance(model, str):
                raise bad(where, "a noise mapping needs a 'model' key naming the noise model")
        else:
            raise bad(where, f"must be a noise model name or a mapping with 'model', got {entry!r}")
        for setting in _expand(params, where, bad):
            try:
                check_noise(model, setting)
            except PllError as exc:
                raise bad(where, str(exc)) from None
            settings.append((model, setting))
    return settings


def _method_settings(value, bad):
    if not isinstance(value, dict) or not value:
        raise bad("methods", f"must be a non-empty mapping of method names to parameters, got {value!r}")
    settings = []
    for method, params in value.items():
        where = f"methods.{method}"
        if method not in METHODS:
            raise bad(where, f"unknown method {method!r}; choose from {', '.join(METHODS)}")
        for setting in _expand(params or {}, where, bad):
            try:
                make_method(method, setting)
            except PllError as exc:
                raise bad(where, str(exc)) from None
            settings.append((method, setting))
    return settings


def _feature_spec(value, where, bad):
    """A feature pipeline's name or spec (``pl_aknn_real(density_k=100)``), checked."""
    try:
        make_features(value)
    except PllError as exc:
        raise bad(where, str(exc)) from None


def _method_features(value, methods, bad):
    """Each method's own feature pipeline: the grid's over the defaults the pipeline applies, so that a cell names what runs."""
    if not isinstance(value, dict):
        raise bad("method_features", f"must be a mapping of method names to feature pipelines, got {value!r}")
    names = {m for m, _ in methods}
    for method, features in value.items():
        if method not in names:
            raise bad(f"method_features.{method}", "names a method the grid does not run")
        _feature_spec(features, f"method_features.{method}", bad)
    return {**{m: f for m, f in catalog.DEFAULT_METHOD_FEATURES.items() if m in names}, **value}


# Results of a grid ---------------------------------------------------------------------------

CELL_COLUMNS = ("cell", "dataset", "noise", "seed", "variant", "features", "knn")
# Metrics shown in the papers' table layout, in percent (risks: of the test rows).
TABLE_METRICS = {"accuracy": 100, "covered_accuracy": 100, "rejection_rate": 100, risk_name(0.10): 100}


def results_table(executions, tables) -> pd.DataFrame:
    """One table of every finished cell's metrics, with the cell's settings in front.

    ``tables`` maps an execution key to its metrics table (one row per
    method run, column ``method``, and reject option); executions without
    one are left out.  ``noise`` and ``variant`` (method and parameters,
    the method run's name) are the labels used in :attr:`Cell.label`.
    """
    frames = []
    for execution in executions:
        if execution.key not in tables:
            continue
        table = tables[execution.key]
        for cell in execution.cells:
            values = (cell.key, cell.dataset, cell.noise_label, cell.seed, cell.variant, cell.features,
                      cell.knn)
            rows = table[table["method"] == cell.variant]
            frames.append(rows.assign(**dict(zip(CELL_COLUMNS, values))))
    if not frames:
        return pd.DataFrame(columns=list(CELL_COLUMNS))
    table = pd.concat(frames, ignore_index=True)
    return table[list(CELL_COLUMNS) + [c for c in table.columns if c not in CELL_COLUMNS]]


def summarize(table, alpha=0.05) -> pd.DataFrame:
    """Mean ± std across seeds and paired t-tests against the best, per data set, noise and metric.

    What is compared is a method setting with one reject option (``variant
    [reject]``, plus the feature pipeline or kNN backend when one method
    setting runs with several); seeds pair the observations
    (:func:`pll.evaluation.compare_methods`).  The label metrics
    (:data:`~pll.experiment._evaluate.LABEL_METRICS`) of the options that keep the method's
    labels are one comparison per method setting (``variant``), not one per
    option: those rows would repeat each other by construction.
    """
    columns = ["dataset", "noise", "metric", "method", "mean", "std", "n", "best", "p_value", "marked"]
    if table.empty:
        return pd.DataFrame(columns=columns)
    ids = set(CELL_COLUMNS) | {"method", "reject"}
    metrics = [c for c in table.columns if c not in ids and pd.api.types.is_numeric_dtype(table[c])]
    setting = table["variant"]
    for column in ("features", "knn"):
        if table.groupby("variant")[column].nunique().max() > 1:
            setting = setting + f" {column}=" + table[column].astype(str)
    compared = setting.str.cat(" [" + table["reject"].astype(str) + "]")
    long = table.assign(method=compared, _reject=table["reject"], _setting=setting).melt(
        id_vars=["dataset", "noise", "seed", "method", "_reject", "_setting"], value_vars=metrics, var_name="metric"
    )
    shared = long["metric"].isin(LABEL_METRICS) & long["_reject"].isin(SHARED_LABEL_OPTIONS)
    keep = ~shared | (long["_reject"] == "native")  # the method's own labels, once
    long, shared = long[keep], shared[keep]
    long.loc[shared, "method"] = long.loc[shared, "_setting"]
    long = long.drop(columns=["_reject", "_setting"])
    long = long[np.isfinite(long["value"].astype(float))]
    if long.empty:
        return pd.DataFrame(columns=columns)
    return compare_methods(long, by=("dataset", "noise"), pair=("seed",), alpha=alpha)

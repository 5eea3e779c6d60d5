"""The neighbor stage: one kNN computation per split and feature pipeline, shared by every method."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..neighbors import NeighborIndex, NeighborResult


@dataclass(frozen=True)
class NeighborSet:
    """Neighbors of one split: training rows' own, test rows', and validation rows' among the fitting rows.

    ``val`` is the hold-out split's (:func:`~pll.experiment.calibration_split`), in its features.
    """

    train: NeighborResult
    test: NeighborResult
    val: NeighborResult


def query_set(neighbors: NeighborSet | None, name: str) -> NeighborResult | None:
    """The ``train``, ``test`` or ``val`` result of ``neighbors``; None when the run searched none (``k = 0``)."""
    return None if neighbors is None else getattr(neighbors, name)


def find_neighbors(split, calibration, k: int, backend: str, options: dict | None = None) -> NeighborSet | None:
    """``k`` neighbors for every query set of the featurized ``split``.

    One index over the training rows serves both their own neighbors and the
    test rows'.  The validation rows' are those of the hold-out split
    ``calibration`` (a :class:`~pll.experiment.CalibrationSplit`): among the
    fitting rows, in features fitted on them, where the hold-out models
    predict them; no second index here.  ``k = 0`` (methods that need no
    neighbors) searches nothing: None.
    """
    if k == 0:
        return None
    with NeighborIndex(split.X_train, k, backend, **dict(options or {})) as index:
        train, test = index.kneighbors(None), index.kneighbors(split.X_test)
    return NeighborSet(train=train, test=test, val=calibration.val)


def metric_prefix(features: str) -> str:
    """``knn.<features>``, the spec's parameters spelled in the characters MLflow allows in keys.

    Examples
    --------
    >>> metric_prefix("pl_aknn_real(density_k=100)")
    'knn.pl_aknn_real_density_k_100'
    """
    return "knn." + re.sub(r"_+$", "", re.sub(r"[^\w.\- /]+", "_", features))


def neighbor_metrics(features: str, neighbors: NeighborSet | None) -> dict:
    """The metrics of a neighbor set, as a run logs them: seconds spent, and recall for approximate backends.

    ``knn.<features>.build_seconds`` and ``.query_seconds`` sum over the two
    indexes and three query sets; ``.recall`` is the lowest recall of the three
    (each also as ``.<set>.recall``); ``.effort`` the most escalation steps
    any of them took toward its target recall (0: default settings met it),
    each also as ``.<set>.effort``.  The settings and why each search ended
    so are text: :func:`neighbor_params`.  No neighbor set, no metrics.
    """
    if neighbors is None:
        return {}
    results = {"train": neighbors.train, "test": neighbors.test, "val": neighbors.val}
    prefix = metric_prefix(features)
    metrics = {
        f"{prefix}.build_seconds": neighbors.train.timings.get("build", 0.0) + neighbors.val.timings.get("build", 0.0),
        f"{prefix}.query_seconds": sum(r.timings.get("query", 0.0) for r in results.values()),
    }
    recalls = {name: r.recall for name, r in results.items() if r.recall is not None}
    if recalls:
        metrics[f"{prefix}.recall"] = min(recalls.values())
        metrics.update({f"{prefix}.{name}.recall": value for name, value in recalls.items()})
    efforts = {name: r.effort["steps"] for name, r in results.items() if r.effort and "steps" in r.effort}
    if efforts:
        metrics[f"{prefix}.effort"] = max(efforts.values())
        metrics.update({f"{prefix}.{name}.effort": value for name, value in efforts.items()})
    return metrics


def neighbor_params(features: str, neighbors: NeighborSet | None) -> dict:
    """The text a run logs of a neighbor set beside :func:`neighbor_metrics`: its backend, and per query set
    why the search ended as it did (``.<set>.decision``) and with what settings (``.<set>.effort``, JSON)."""
    if neighbors is None:
        return {}
    prefix = metric_prefix(features)
    params = {f"{prefix}.backend": neighbors.train.backend}
    for name in ("train", "test", "val"):
        result = getattr(neighbors, name)
        if result.decision:
            params[f"{prefix}.{name}.decision"] = result.decision
        if result.effort:
            params[f"{prefix}.{name}.effort"] = json.dumps(result.effort, sort_keys=True, default=str)
    return params

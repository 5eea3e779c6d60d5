"""Fitted models pickled before version 0.2 load: their classes are looked up where they live now.

Version 0.2 regrouped ``pll/`` by concern (``pll.scoring`` became :mod:`pll.serving`, ``pll.conformal``
:mod:`pll.reject.conformal`, each estimator's module private, ...), and a pickle names the module of
every class and function in it.  :func:`load_fitted` reads such a pickle with the old names mapped to
the new ones: a model trained before the move scores as it did, without retraining.
"""

from __future__ import annotations

import pickle
import pkgutil
from importlib import import_module

MOVED_MODULES = {
    "pll._lazy": "pll.utils._lazy",
    "pll._random": "pll.utils._random",
    "pll.atomic_files": "pll.utils.atomic_files",
    "pll.provenance": "pll.utils.provenance",
    "pll.progress": "pll.utils.progress",
    "pll.validation": "pll.utils.validation",
    "pll.features": "pll.preprocessing",
    "pll.noise_network": "pll.noise._network",
    "pll.conformal": "pll.reject.conformal",
    "pll.trust_score": "pll.reject.trust_score",
    "pll.reasons": "pll.methods.reasons",
    "pll.bag_bounds": "pll.evaluation.bag_bounds",
    "pll.metric_names": "pll.evaluation.metric_names",
    "pll.grid": "pll.experiment.grid",
    "pll.paper_protocols": "pll.experiment.presets",
    "pll.catalog": "pll.experiment.catalog",
    "pll.scoring": "pll.serving._scoring",
    "pll.report": "pll.reporting.report",
    "pll.reproduction": "pll.reporting.reproduction",
    "pll.tables": "pll.reporting.tables",
    "pll.plots": "pll.reporting.plots",
    "pll.experiment.calibration": "pll.experiment._calibration",
    "pll.experiment.checks": "pll.experiment._checks",
    "pll.experiment.conformal": "pll.experiment._conformal_stage",
    "pll.experiment.evaluation": "pll.experiment._evaluate",
    "pll.experiment.methods": "pll.experiment._method_stage",
    "pll.experiment.neighbors": "pll.experiment._neighbor_stage",
    "pll.experiment.plan": "pll.experiment._plan",
    "pll.experiment.predictions": "pll.experiment._predictions",
    "pll.experiment.protocol": "pll.experiment._protocol",
    "pll.experiment.split": "pll.experiment._split",
    "pll.experiment.stages": "pll.experiment._stages",
    "pll.experiment.trust": "pll.experiment._trust_stage",
    "pll.methods.base": "pll.methods._base",
    "pll.methods.dst_pll": "pll.methods._dst_pll",
    "pll.methods.ipal": "pll.methods._ipal",
    "pll.methods.perceptron": "pll.utils._mlp",
    "pll.methods._perceptron": "pll.utils._mlp",
    "pll.methods.pl_aknn": "pll.methods._pl_aknn",
    "pll.methods.pl_classifier": "pll.methods._pl_classifier",
    "pll.methods.pl_knn": "pll.methods._pl_knn",
    "pll.methods.proden": "pll.methods._proden",
}
"""Each module of version 0.1 or 0.2 that no longer exists, and the module that holds its names now (Proden's numpy
network of 0.2 became the PyTorch one of :mod:`pll.utils._mlp`, which reads its pickled buffers)."""


def load_fitted(file):
    """Unpickle a fitted model from the binary ``file``, whichever version of the layout pickled it."""
    return _Unpickler(file).load()


class _Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module not in MOVED_MODULES:
            return super().find_class(module, name)
        return _moved(MOVED_MODULES[module], name)


def _moved(module, name):
    """``name`` from ``module``, else from a sibling module of its package (a name that moved again later)."""
    found = import_module(module)
    if hasattr(found, name):
        return getattr(found, name)
    package = import_module(module.rpartition(".")[0])
    for sibling in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
        found = import_module(sibling.name)
        if hasattr(found, name):
            return getattr(found, name)
    raise pickle.UnpicklingError(f"{module}.{name} no longer exists: retrain the model with pll train")

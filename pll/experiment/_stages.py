"""The run protocol, declared once: its stages, what each reads and what it writes.

A stage is plain data — its kind, the value it writes, the values it reads,
its constant parameters — so one declaration serves every way of running
it: :func:`run_stages` in a loop (notebooks, small runs, the pipeline's
one-task mode) and the pipeline flow, which submits each stage as a Prefect
task once the values it reads exist.  A stage's cache key follows from its
declaration and the keys of what it reads (``cache.policy.lineage_keys``).

Values are named ``<what>`` or ``<what>:<of>``: ``raw`` (the loaded data
set, the one input), ``data`` (with the noise model's bags), ``rows``;
per feature pipeline ``split:<f>``, ``calibration:<f>``, ``neighbors:<f>``;
per method run ``holdout:<run>`` (the model fitted on the fitting rows,
read by the conformal option and by ``validation:<run>``, its predictions
of the validation rows, which calibrate the method's own option),
``native:<run>``, ``trust:<run>``, ``conformal:<run>``; and ``result``.
The method's stage, which waits for the neighbor search, reads those
predictions only, so a hold-out model (a strong learner's may be large) is
let go once its two readers have run, early in a run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from . import catalog
from ..evaluation import DEFAULT_LAMBDAS
from ..preprocessing import featurize, shares_fit_neighbors
from ..neighbors.registry import DEFAULT_BACKEND
from ..noise import apply_noise
from ._conformal_stage import DEFAULT_ALPHA, conformal_option
from ._evaluate import evaluate
from ._holdout import calibration_split, make_split
from ._method_stage import run_method
from ._neighbor_stage import find_neighbors
from ._result import RunResult
from ._trust_stage import trust_option

OPTIONS = ("native", "trust", "conformal")
"""The reject options of every method run, in the order a run's outputs list them."""


@dataclass(frozen=True)
class Stage:
    """``writes = FUNCTIONS[kind](*(values[r] for r in reads), **params)``.

    ``label`` names the stage's task runs (``method-dst_pll``).
    """

    kind: str
    writes: str
    reads: tuple
    params: dict

    @property
    def label(self) -> str:
        target = self.writes.partition(":")[2]
        return f"{LABELS.get(self.kind, self.kind)}-{target}" if target else LABELS.get(self.kind, self.kind)

    def run(self, *values):
        """Compute the stage from the values it reads, in the order of :attr:`reads`."""
        return FUNCTIONS[self.kind](*values, **self.params)


@dataclass(frozen=True)
class Protocol:
    """The stages of one run, each after the stages whose values it reads; ``result`` is the last one's."""

    stages: tuple

    def readers(self) -> Counter:
        """How many stages read each value: a runner drops a value once they have all run."""
        return Counter(name for stage in self.stages for name in stage.reads)

    def values(self, raw) -> StageValues:
        """The values a runner of this protocol holds, starting from the loaded data set ``raw``."""
        return StageValues(self, raw)


class StageValues:
    """The stage values a runner holds, each dropped once every stage that reads it has run.

    Both runners (:func:`run_stages` and the pipeline flow's scheduler) keep
    their values here: at scale a feature split is hundreds of MB.
    """

    def __init__(self, protocol: Protocol, raw):
        self._values, self._readers = {"raw": raw}, protocol.readers()
        self._result_name = protocol.stages[-1].writes

    def ready(self, stage: Stage) -> bool:
        return all(name in self._values for name in stage.reads)

    def inputs(self, stage: Stage) -> tuple:
        """What ``stage`` reads, in the order of its :attr:`~Stage.reads`."""
        return tuple(self._values[name] for name in stage.reads)

    def record(self, stage: Stage, value) -> None:
        """Keep ``stage``'s value; let go of the values it read that no stage still to run reads."""
        self._values[stage.writes] = value
        for name in stage.reads:
            self._readers[name] -= 1
            if not self._readers[name]:
                del self._values[name]

    @property
    def held(self) -> frozenset:
        """The names of the values still held."""
        return frozenset(self._values)

    @property
    def result(self):
        """The last stage's value."""
        return self._values[self._result_name]


def declare_protocol(plan, *, seed: int = 0, noise: str = catalog.DEFAULT_NOISE, noise_params: dict | None = None,
                     val_fraction: float = 0.2, knn: str = DEFAULT_BACKEND, knn_options: dict | None = None,
                     conformal_alpha: float | None = DEFAULT_ALPHA, lambdas=DEFAULT_LAMBDAS) -> Protocol:
    """The :class:`Protocol` of a run of ``plan`` (:func:`~pll.experiment.plan_run`) with these options.

    Noise and split, then per feature pipeline: the features fitted on the
    training rows, the hold-out split (:func:`~pll.experiment.calibration_split`;
    its feature fit reads the full split's search when the pipeline searches
    neighbors in a projection fitted on nothing), the neighbors; per method
    run: the hold-out model, the method with its own reject option, the
    trust score's and (unless ``conformal_alpha`` is None) the conformal
    sets'; last the evaluation of every output (:func:`~pll.experiment.evaluate`).
    """
    knn_args = {"knn": knn, "knn_options": dict(knn_options or {})}
    stages = [Stage("noise", "data", ("raw",), {"model": noise, "params": noise_params, "seed": seed}),
              Stage("split", "rows", ("data",), {"seed": seed, "val_fraction": val_fraction})]
    outputs = {option: [] for option in OPTIONS}
    for group in plan.groups:
        f = group.features
        split, calibration, neighbors = f"split:{f}", f"calibration:{f}", f"neighbors:{f}"
        shared = (split,) if shares_fit_neighbors(f) else ()
        stages += [
            Stage("features", split, ("data", "rows"), {"features": f, **knn_args}),
            Stage("calibration", calibration, ("data", "rows", *shared), {"features": f, "k": group.k, **knn_args}),
            Stage("neighbors", neighbors, (split, calibration), {"k": group.k, **knn_args}),
        ]
        for run in group.runs:
            holdout, validation, native = f"holdout:{run.name}", f"validation:{run.name}", f"native:{run.name}"
            stages += [
                Stage("holdout", holdout, (calibration,), {"run": run, "seed": seed}),
                Stage("validation", validation, (calibration, holdout), {}),
                Stage("method", native, (split, neighbors, validation), {"run": run, "seed": seed}),
                Stage("trust", f"trust:{run.name}", (native, split, "rows", neighbors, calibration), knn_args),
            ]
            outputs["native"].append(native)
            outputs["trust"].append(f"trust:{run.name}")
            if conformal_alpha is not None:
                stages.append(Stage("conformal", f"conformal:{run.name}", (calibration, holdout),
                                    {"run": run, "alpha": conformal_alpha}))
                outputs["conformal"].append(f"conformal:{run.name}")
    searched = tuple(f"neighbors:{g.features}" for g in plan.groups)
    ordered = tuple(name for option in OPTIONS for name in outputs[option])
    stages.append(Stage("result", "result", ("data", "rows", *searched, *ordered),
                        {"features": tuple(g.features for g in plan.groups), "lambdas": tuple(lambdas)}))
    return Protocol(tuple(stages))


def run_stages(protocol: Protocol, raw):
    """Run every stage of ``protocol`` in order on the loaded data set ``raw``; the last stage's value."""
    values = protocol.values(raw)
    for stage in protocol.stages:
        values.record(stage, stage.run(*values.inputs(stage)))
    return values.result


def _noise(raw, *, model, params, seed):
    return apply_noise(raw, model, params, seed)


def _split(ds, *, seed, val_fraction):
    return make_split(ds.n_rows, seed, val_fraction=val_fraction)


def _features(ds, rows, *, features, knn, knn_options):
    """The pipeline fitted on the training rows; it keeps the fitting rows' share of its search (``subset``)."""
    return featurize(ds, rows.train, rows.test, features, knn=knn, knn_options=knn_options, subset=rows.fit)


def _calibration(ds, rows, split=None, *, features, k, knn, knn_options):
    fit_neighbors = None if split is None else split.subset_neighbors
    return calibration_split(ds, rows, features, k, knn, knn_options, fit_neighbors)


def _neighbors(split, calibration, *, k, knn, knn_options):
    return find_neighbors(split, calibration, k, knn, knn_options)


def _holdout(calibration, *, run, seed):
    return calibration.fit_holdout(run, seed)


def _validation(calibration, holdout):
    return calibration.predict_validation(holdout)


def _method(split, neighbors, validation, *, run, seed):
    return run_method(run, split, neighbors, seed, validation)


def _trust(output, split, rows, neighbors, calibration, *, knn, knn_options):
    return trust_option(output, split, rows, neighbors, calibration, knn=knn, knn_options=knn_options)


def _conformal(calibration, holdout, *, run, alpha):
    return conformal_option(run, calibration, holdout, alpha)


def _result(ds, rows, *values, features, lambdas):
    neighbors, outputs = dict(zip(features, values[: len(features)])), values[len(features):]
    return RunResult(ds, rows, neighbors, tuple(outputs), evaluate(outputs, ds, rows, lambdas))


FUNCTIONS = {"noise": _noise, "split": _split, "features": _features, "calibration": _calibration,
             "neighbors": _neighbors, "holdout": _holdout, "validation": _validation, "method": _method, "trust": _trust,
             "conformal": _conformal, "result": _result}
LABELS = {"calibration": "calibration-split", "result": "evaluate"}
"""Task run names that differ from the stage's kind (kept from the stage tasks the runs showed before)."""

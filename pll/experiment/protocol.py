"""One run of the protocol in plain Python: what the pipeline computes, without Prefect or MLflow."""

from __future__ import annotations

from dataclasses import dataclass

from .. import catalog
from ..evaluation import DEFAULT_LAMBDAS
from ..features import featurize
from ..neighbors.registry import DEFAULT_BACKEND
from ..noise import apply_noise
from .checks import check_protocol
from .calibration import calibration_split
from .conformal import DEFAULT_ALPHA, conformal_option
from .evaluation import Evaluation, evaluate
from .methods import run_method
from .neighbors import find_neighbors, neighbor_metrics
from .plan import DEFAULT_METHODS, plan_run
from .predictions import prediction_frames
from .split import SplitRows, make_split
from .trust import trust_option


@dataclass(frozen=True)
class RunResult:
    """What one run computed.

    ``data``: the data set with the noise model's bags; ``rows``: its split;
    ``neighbors``: feature pipeline -> :class:`~pll.experiment.NeighborSet`;
    ``outputs``: the :class:`~pll.experiment.MethodOutput` of every method
    run and reject option; ``evaluation``: their :class:`~pll.experiment.Evaluation`.
    """

    data: object
    rows: SplitRows
    neighbors: dict
    outputs: tuple
    evaluation: Evaluation

    @property
    def metrics(self) -> dict:
        """Method run name -> the metrics its MLflow run logs, by the names it logs them under."""
        return self.evaluation.metrics

    @property
    def neighbor_metrics(self) -> dict:
        """The neighbor searches' metrics, which the pipeline run (the method runs' parent) logs."""
        return {k: v for features, nb in self.neighbors.items() for k, v in neighbor_metrics(features, nb).items()}

    def prediction_frames(self) -> dict:
        """The predictions tables a pipeline run logs (:func:`~pll.experiment.prediction_frames`)."""
        return prediction_frames(self.outputs, self.data, self.rows)


def run_protocol(
    ds,
    *,
    seed: int = 0,
    noise: str = catalog.DEFAULT_NOISE,
    noise_params: dict | None = None,
    methods=DEFAULT_METHODS,
    method_params: dict | None = None,
    features: str = catalog.DEFAULT_FEATURES,
    method_features: dict | None = None,
    val_fraction: float = 0.2,
    knn_backend: str = DEFAULT_BACKEND,
    knn_options: dict | None = None,
    conformal_alpha: float | None = DEFAULT_ALPHA,
    lambdas=DEFAULT_LAMBDAS,
) -> RunResult:
    """Run the protocol of one pipeline run on the loaded data set ``ds``.

    ``method_params`` maps a method to its parameters, or to a list of
    settings, each a method run of its own (:func:`~pll.experiment.plan_run`).

    Noise, split with validation hold-out, features, neighbors, every method
    with its own, the trust score's and (unless ``conformal_alpha`` is None)
    conformal prediction sets' reject option, evaluation: the same
    stages, with the same arguments, as ``flows.pipeline.pipeline``, so the
    metrics equal those the pipeline logs for the same data, seed and options
    (all but the neighbor search's seconds).  ``ds`` is what
    :func:`pll.load_dataset` returns (with the run's ``protocol`` and options).

    Examples
    --------
    >>> import pll
    >>> from pll.experiment import run_protocol
    >>> result = run_protocol(pll.load_dataset("iris"), seed=0, methods=["pl_knn"])
    >>> round(result.metrics["pl_knn"]["accuracy"], 3)
    0.967
    """
    check_protocol(methods=methods, method_params=method_params, features=features, method_features=method_features,
                   knn_backend=knn_backend, knn_options=knn_options, val_fraction=val_fraction,
                   conformal_alpha=conformal_alpha)
    plan = plan_run(methods, method_params, features, method_features)
    ds = apply_noise(ds, noise, noise_params, seed)
    rows = make_split(ds.n_rows, seed, val_fraction=val_fraction)
    neighbors, outputs = {}, []
    for group in plan.groups:
        split = featurize(ds, rows.train, rows.test, group.features, knn=knn_backend, knn_params=knn_options,
                          subset=rows.fit)
        calibration = calibration_split(ds, rows, group.features, group.k, knn_backend, knn_options,
                                        split.subset_neighbors)
        nb = neighbors[group.features] = find_neighbors(split, calibration, group.k, knn_backend, knn_options)
        native, conformal = [], []
        for run in group.runs:  # one hold-out model per method run, for its own and its conformal calibration
            holdout = calibration.fit_holdout(run, seed)
            native.append(run_method(run, split, calibration, nb, seed, holdout))
            if conformal_alpha is not None:
                conformal.append(conformal_option(run, calibration, seed, conformal_alpha, holdout))
        outputs += native + [
            trust_option(o, split, rows, nb, calibration, knn_backend=knn_backend, knn_options=knn_options)
            for o in native
        ] + conformal
    return RunResult(ds, rows, neighbors, tuple(outputs), evaluate(outputs, ds, rows, lambdas))

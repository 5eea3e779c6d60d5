"""One run of the protocol in plain Python: what the pipeline computes, without Prefect or MLflow."""

from __future__ import annotations

from dataclasses import dataclass

from . import catalog
from ..evaluation._reject import DEFAULT_LAMBDAS
from ..neighbors.registry import DEFAULT_BACKEND
from ._checks import check_protocol
from ._conformal_stage import DEFAULT_ALPHA
from ._evaluate import Evaluation
from ._neighbor_stage import neighbor_metrics
from ._plan import DEFAULT_METHODS, plan_run
from ._predictions import prediction_frames
from ._split import SplitRows
from ._stages import declare_protocol, run_stages


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
    knn: str = DEFAULT_BACKEND,
    knn_options: dict | None = None,
    conformal_alpha: float | None = DEFAULT_ALPHA,
    lambdas=DEFAULT_LAMBDAS,
) -> RunResult:
    """Run the protocol of one pipeline run on the loaded data set ``ds``.

    ``method_params`` maps a method to its parameters, or to a list of
    settings, each a method run of its own (:func:`~pll.experiment.plan_run`).

    Noise, split with validation hold-out, features, neighbors, every method
    with its own, the trust score's and (unless ``conformal_alpha`` is None)
    conformal prediction sets' reject option, evaluation: the stages of
    :func:`~pll.experiment.declare_protocol`, run in order — the declaration
    the pipeline flow submits, so the metrics equal those it logs for the
    same data, seed and options (all but the neighbor search's seconds).  ``ds`` is what
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
                   knn=knn, knn_options=knn_options, val_fraction=val_fraction,
                   conformal_alpha=conformal_alpha)
    plan = plan_run(methods, method_params, features, method_features)
    protocol = declare_protocol(plan, seed=seed, noise=noise, noise_params=noise_params, val_fraction=val_fraction,
                                knn=knn, knn_options=knn_options, conformal_alpha=conformal_alpha,
                                lambdas=lambdas)
    return run_stages(protocol, ds)

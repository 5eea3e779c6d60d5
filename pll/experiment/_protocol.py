"""One run of the protocol in plain Python: what the pipeline computes, without Prefect or MLflow."""

from __future__ import annotations

from . import catalog
from ..evaluation import DEFAULT_LAMBDAS
from ..neighbors.registry import DEFAULT_BACKEND
from ._checks import check_protocol
from ._conformal_stage import DEFAULT_ALPHA
from ._plan import DEFAULT_METHODS, plan_run
from ._result import RunResult
from ._stages import declare_protocol, run_stages


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

"""What each command accepts: its parameters checked, and its preset applied, before anything starts.

Each flow calls its function here first, so a deployment or a notebook gets
the same checks and presets as ``pll``; the command line calls the same
function before it starts a Prefect server for a run that could not work.
Each returns the parameters it settled (a preset's noise parameters, a
resolved path).  Only :mod:`pll` is imported: the command line starts fast.
"""

from __future__ import annotations

import inspect


def _given(function, params: dict) -> dict:
    """The entries of ``params`` that ``function`` takes."""
    names = inspect.signature(function).parameters
    return {k: v for k, v in params.items() if k in names}


def _noise_params(params: dict) -> dict | None:
    if params.get("preset") is None:  # no preset to apply: its module (and scipy.stats) need not be imported
        return dict(params.get("noise_params") or {}) or None
    from pll.experiment.presets import preset_noise_params

    return preset_noise_params(params["preset"], params["noise"], params.get("noise_params")) or None


def pipeline(params: dict) -> dict:
    """A pipeline run's (:func:`pll_pipeline.flows.pipeline.pipeline`): its data, noise, methods, features, kNN and sets."""
    from pll.experiment import check_run

    settled = {"noise_params": _noise_params(params)}
    check_run(**_given(check_run, {**params, **settled}))
    return settled


def training(params: dict) -> dict:
    """A training run's (:func:`pll_pipeline.flows.train.train`): as a pipeline's for its one method, and its reject options."""
    from pll.experiment import check_run
    from pll.serving import check_reject_options

    settled = {"noise_params": _noise_params(params)}
    method = params["method"]
    check_run(**_given(check_run, {**params, **settled, "methods": [method],
                                   "method_params": {method: params.get("method_params") or {}}}))
    check_reject_options(params.get("threshold"), params.get("reject_lambda"), params.get("conformal_alpha"))
    return settled


def benchmark(params: dict) -> dict:
    """A grid's (:func:`pll_pipeline.flows.benchmark.benchmark`): the grid file parses under the preset, and the
    cells at once, if given, are a positive number."""
    from pll.experiment.grid import load_grid
    from pll.utils.validation import check_positive_int

    if params.get("max_concurrency") is not None:
        check_positive_int(params["max_concurrency"], "max_concurrency")
    load_grid(params["grid"], params.get("preset"))
    return {}


def scoring(params: dict) -> dict:
    """A scoring run's (:func:`pll_pipeline.flows.score.score_one`): the input can be read and the output written."""
    from pll.serving import check_input_path, check_output_path

    check_input_path(params["input"])
    check_output_path(params["output"])
    return {}


def auditing(params: dict) -> dict:
    """An audit's (:func:`pll_pipeline.flows.audit.audit`): its data, noise, features, kNN, neighbors and output."""
    from pll.experiment import check_data, check_feature_pipeline
    from pll.neighbors.registry import check_backend
    from pll.serving import check_output_path
    from pll.utils.validation import check_positive_int

    settled = {"noise_params": _noise_params(params)}
    check_data(**_given(check_data, {**params, **settled}))
    check_feature_pipeline(params["features"])
    check_backend(params["knn"], params.get("knn_options"))
    check_positive_int(params["n_neighbors"], "n_neighbors")
    return {**settled, "output": check_output_path(params["output"])}


def content(params: dict) -> None:
    """What the command will read, read and checked as its flow would (``pll run``, ``train``, ``audit``: the data
    set; ``pll score``: the input table).  The command line's alone: a flow reads its inputs once, in its tasks."""
    if "dataset" in params:
        from pll.experiment import check_data_content

        check_data_content(**_given(check_data_content, params))
    elif "input" in params:
        from pll.serving import check_input_table

        check_input_table(params["input"])


COMMANDS = {"run": pipeline, "train": training, "benchmark": benchmark, "score": scoring, "audit": auditing}
"""The checks of each ``pll`` command that starts a flow."""

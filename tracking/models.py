"""Fitted models as MLflow models: log (and register), load.

A :class:`pll.serving.FittedModel` is pickled as an artifact of a ``pyfunc``
model whose input is a feature table (columns by name, optional
``candidates``) and whose output has ``label``, ``accept``, ``score``,
``guess`` and the method's per-class columns.  Everything goes through an
explicit :class:`~mlflow.tracking.MlflowClient` and tracking URI — MLflow's
fluent ``log_model`` would read the process-global tracking URI and active run,
which a task in another thread must not rely on.  The model is saved locally
with :func:`mlflow.pyfunc.save_model` and then attached to a LoggedModel
(``models:/<model_id>``) that is an output of the training run.

Serving (``mlflow models serve --env-manager local``) and loading need the
``pll`` package importable, since the pickle refers to its classes.
"""

from __future__ import annotations

import json
import pickle
import sys
import tempfile
from contextlib import contextmanager
from importlib import import_module, metadata
from pathlib import Path

import mlflow.pyfunc
import pandas as pd
from mlflow.entities import LoggedModelInput, LoggedModelOutput, LoggedModelStatus, Metric
from mlflow.exceptions import MlflowException
from mlflow.models import Model, ModelSignature
from mlflow.store.artifact.utils.models import get_model_name_and_version
from mlflow.types import ColSpec, Schema
from mlflow.tracking import MlflowClient
from mlflow.utils.time import get_current_time_millis
from prefect import task
from prefect.cache_policies import NO_CACHE

from pll.data.tabular import CANDIDATES, SEPARATOR
from pll.errors import InvalidParameterError, ModelNotFoundError
from pll.experiment import run_metrics
from pll.serving import FittedModel, feature_names, load_fitted

from pll_pipeline.tracking.runs import log_entries, log_json
from pll_pipeline.tracking.served import predict_served

ARTIFACT = "fitted_model"
MODEL_NAME = "model"
EXAMPLE_ROWS = 3
REQUIREMENTS = ("numpy", "pandas", "scipy", "scikit-learn", "pynndescent", "cloudpickle", "mlflow")


class PllPyfuncModel(mlflow.pyfunc.PythonModel):
    """The MLflow ``pyfunc`` face of a :class:`~pll.serving.FittedModel`."""

    def load_context(self, context):
        with open(context.artifacts[ARTIFACT], "rb") as fh:
            self.fitted = load_fitted(fh)  # a model pickled before pll's modules moved loads too

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        return predict_served(self.fitted, model_input)


def input_example(ds, rows=EXAMPLE_ROWS) -> pd.DataFrame:
    """The first rows of ``ds`` as the model's input: raw features by name and their bags."""
    frame = pd.DataFrame(ds.X[:rows], columns=feature_names(ds))
    classes = [str(c) for c in ds.classes]
    frame[CANDIDATES] = [SEPARATOR.join(c for c, on in zip(classes, bag) if on) for bag in ds.S[:rows]]
    return frame


def signature_of(fitted: FittedModel, example: pd.DataFrame) -> ModelSignature:
    """Output as predicted, and no input schema: MLflow would drop columns it does not name (see tracking.served)."""
    predicted = fitted.predict_frame(example)
    kinds = {"b": "boolean", "f": "double", "i": "long"}
    return ModelSignature(outputs=Schema([ColSpec(kinds.get(predicted[c].dtype.kind, "string"), c)
                                          for c in predicted.columns]))


def requirements() -> list[str]:
    """Pinned requirements of the model environment (given, so MLflow need not infer them)."""
    pins = []
    for name in REQUIREMENTS:
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    return pins


@task(name="log-model", cache_policy=NO_CACHE)
def log_model(tracking_uri: str, run_id: str, fitted: FittedModel, example: pd.DataFrame, summary: dict,
              register: str | None = None) -> dict:
    """Log ``fitted`` as a pyfunc LoggedModel, output of run ``run_id``; optionally register it.

    The run also gets the training data's ``summary`` (``dataset_summary.json``),
    its fingerprint (tag ``data_fingerprint``), the effective ``reject_threshold``
    (parameter) and :func:`model_metrics`: the hold-out's quality, also
    logged as the LoggedModel's metrics so that the model's page shows it.

    Returns ``model_uri`` (``models:/<model_id>``), ``model_id`` and, when
    registered, ``registered_uri`` (``models:/<name>/<version>``).
    """
    client = MlflowClient(tracking_uri, registry_uri=tracking_uri)
    run = client.get_run(run_id)
    described = describe(fitted)
    client.set_tag(run_id, "data_fingerprint", fitted.fingerprint)
    log_json(client, run_id, summary, "dataset_summary.json")
    client.log_param(run_id, "reject_threshold", json.dumps(fitted.threshold))
    model = client.create_logged_model(
        run.info.experiment_id,
        name=MODEL_NAME,
        source_run_id=run_id,
        params={k: str(v) for k, v in described.items()},
        tags={"pll.method": fitted.method, "data_fingerprint": fitted.fingerprint},
        model_type="pll",
    )
    try:
        log_entries(client, run_id, metrics=model_metrics(fitted, model.model_id))
        with tempfile.TemporaryDirectory() as tmp:
            pickled = Path(tmp) / "fitted_model.pkl"
            pickled.write_bytes(pickle.dumps(fitted, protocol=pickle.HIGHEST_PROTOCOL))
            local = Path(tmp) / MODEL_NAME
            mlflow.pyfunc.save_model(
                str(local),
                python_model=PllPyfuncModel(),
                artifacts={ARTIFACT: str(pickled)},
                signature=signature_of(fitted, example),
                input_example=example,
                pip_requirements=requirements(),
                metadata={"pll": described},
                mlflow_model=Model(
                    artifact_path=model.artifact_location,
                    run_id=run_id,
                    model_uuid=model.model_id,
                    model_id=model.model_id,
                ),
            )
            client.log_model_artifacts(model.model_id, str(local))
        client.log_outputs(run_id, [LoggedModelOutput(model.model_id, step=0)])
        client.finalize_logged_model(model.model_id, LoggedModelStatus.READY)
    except BaseException:
        client.finalize_logged_model(model.model_id, LoggedModelStatus.FAILED)
        raise
    out = {"model_uri": f"models:/{model.model_id}", "model_id": model.model_id}
    if register:
        try:
            try:
                client.create_registered_model(register)
            except MlflowException as exc:
                if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                    raise
            # The artifact location, not models:/<id>: MLflow resolves a models:/ source with the
            # process-global tracking URI, which need not be this client's.
            version = client.create_model_version(
                register, source=model.artifact_location, run_id=run_id, model_id=model.model_id
            )
        except MlflowException as exc:
            raise InvalidParameterError(
                f"the model {out['model_uri']} was logged but not registered as {register!r} ({_first_line(exc)})"
            ) from None
        out["registered_uri"] = f"models:/{register}/{version.version}"
    return out


def model_metrics(fitted: FittedModel, model_id: str) -> list[Metric]:
    """The metrics a training run logs: the model's quality and how its threshold was chosen.

    The hold-out's reject report (:attr:`~pll.serving.FittedModel.holdout_metrics`)
    by the names a pipeline's method run logs
    (:func:`pll.experiment._evaluate.run_metrics`: ``accuracy``,
    ``native.risk_0.10``, ``conformal.coverage``, ...), attached to the
    LoggedModel ``model_id`` as well as to the run; and ``holdout.<name>`` of
    the threshold's calibration (:func:`pll.serving.calibrate_threshold`), the
    run's only.
    """
    now = get_current_time_millis()
    quality = run_metrics(fitted.holdout_metrics or {})
    return [
        *(Metric(name, float(value), now, 0, model_id=model_id) for name, value in quality.items()),
        *(Metric(f"holdout.{name}", float(value), now, 0) for name, value in (fitted.calibration or {}).items()),
    ]


def holds_estimator(value) -> bool:
    """Whether a parameter's value is an estimator, or a list or tuple that holds one (an ensemble's members)."""
    if isinstance(value, (list, tuple)):
        return any(holds_estimator(item) for item in value)
    return hasattr(value, "get_params")


def describe(fitted: FittedModel) -> dict:
    """What the model records about itself: method, parameters, features, threshold, training data.

    The parameters are values only: a member's as ``name__parameter``, not the member itself.
    """
    params = {k: v for k, v in fitted.estimator.get_params().items()
              if k != "random_state" and not holds_estimator(v)}
    return {
        "method": fitted.method,
        "method_params": params,
        "random_state": fitted.estimator.random_state,
        "features": fitted.features,
        "threshold": fitted.threshold,
        "data_fingerprint": fitted.fingerprint,
        "n_features": len(fitted.feature_names),
        "classes": [str(c) for c in fitted.classes],
        **set_predictor_params(fitted.set_predictor),
    }


def set_predictor_params(predictor) -> dict:
    """What the model's conformal sets are: α, procedure, score, weights and temperature, the threshold q̂ (a string: it may be
    inf) and the rows behind them."""
    if predictor is None:
        return {"conformal_alpha": None}
    sets = predictor.sets
    return {"conformal_alpha": sets.alpha, "conformal_procedure": sets.procedure, "conformal_score": sets.score_,
            "conformal_weights": sets.weights_, "conformal_temperature": sets.temperature_,
            "conformal_quantile": repr(sets.quantile_),
            "conformal_fit_rows": predictor.n_fit, "conformal_calibration_rows": predictor.n_calibration}


def load_model(model_uri: str, tracking_uri: str) -> tuple[FittedModel, dict]:
    """The fitted model behind ``model_uri`` and where it came from.

    Returns the :class:`~pll.serving.FittedModel` and a dict with
    ``model_uri``, ``model_id`` and ``run_id`` (the training run), either
    possibly None for models saved outside a run.  An unknown URI, or one
    naming a model that is not a pll model, raises :class:`ModelNotFoundError`.
    """
    if model_uri.startswith(("http://", "https://")):
        raise ModelNotFoundError(f"model {model_uri!r} is a web address, not a model: give runs:/<run id>/model, "
                                 "models:/<name>/<version>, models:/<name>@<alias> or a folder")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            local = mlflow.artifacts.download_artifacts(
                artifact_uri=artifact_location(model_uri, tracking_uri), dst_path=tmp, tracking_uri=tracking_uri
            )
            info = Model.load(local)
        except (MlflowException, OSError, ValueError) as exc:  # ValueError: a URI MLflow cannot even parse
            raise ModelNotFoundError(f"model {model_uri!r} not found in {tracking_uri} ({_first_line(exc)})") from None
        try:
            with _old_layer_names():
                pyfunc = mlflow.pyfunc.load_model(local)
        except Exception as exc:  # a foreign flavor, or a pickle this code cannot read
            raise ModelNotFoundError(f"model {model_uri!r} cannot be loaded as a pll model ({_first_line(exc)})") from None
    python_model = pyfunc.unwrap_python_model() if hasattr(pyfunc, "unwrap_python_model") else None
    fitted = getattr(python_model, "fitted", None)
    if not isinstance(fitted, FittedModel):
        raise ModelNotFoundError(f"model {model_uri!r} is not a pll model")
    return fitted, {"model_uri": model_uri, "model_id": info.model_id, "run_id": info.run_id}


OLD_LAYER_MODULES = {"tracking": "pll_pipeline.tracking", "tracking.models": "pll_pipeline.tracking.models"}
"""Where the pyfunc wrapper (:class:`PllPyfuncModel`) was pickled from before version 0.2, and where it is now."""


@contextmanager
def _old_layer_names():
    """Let the pickle of a model logged before version 0.2 find its wrapper class, for as long as it loads."""
    added = [name for name in OLD_LAYER_MODULES if name not in sys.modules]
    for name in added:
        sys.modules[name] = import_module(OLD_LAYER_MODULES[name])
    try:
        yield
    finally:
        for name in added:
            sys.modules.pop(name, None)


def artifact_location(model_uri: str, tracking_uri: str) -> str:
    """Where the files of ``model_uri`` are, with ``models:/`` URIs resolved by an explicit client.

    MLflow's own resolution of ``models:/<id>``, ``models:/<name>/<version>``
    and ``models:/<name>@<alias>`` reads the process-global registry URI;
    other URIs (``runs:/``, paths) are returned as they are.
    """
    if not model_uri.startswith("models:"):
        return model_uri
    client = MlflowClient(tracking_uri, registry_uri=tracking_uri)
    found = get_model_name_and_version(client, model_uri)
    if len(found) == 1:
        return client.get_logged_model(found[0]).artifact_location
    return client.get_model_version_download_uri(*found)


def link_input(tracking_uri: str, run_id: str, source: dict):
    """Record the model ``source`` (from :func:`load_model`) as an input of run ``run_id``."""
    client = MlflowClient(tracking_uri)
    tags = {"pll.model_uri": source["model_uri"]}
    if source.get("run_id"):
        tags["pll.model_run_id"] = source["run_id"]
    if source.get("model_id"):
        tags["pll.model_id"] = source["model_id"]
        client.log_inputs(run_id, models=[LoggedModelInput(source["model_id"])])
    for key, value in tags.items():
        client.set_tag(run_id, key, value)


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

"""The protocol of one run, as plain functions: a notebook reproduces a logged run without Prefect or MLflow.

:func:`declare_protocol` declares the stages of a run, what each reads and
writes; :func:`run_protocol` runs them in order (:func:`run_stages`), and the
pipeline flow submits the same declaration as Prefect tasks.  What the
stages compute: :func:`make_split` (train, test, validation rows),
:func:`calibration_split` (the hold-out split every calibration uses) and
:func:`find_neighbors` (one :class:`NeighborSet` per feature pipeline),
:func:`run_method`, :func:`trust_option` and :func:`conformal_option` (a
:class:`MethodOutput` per method and reject option), :func:`evaluate` (an
:class:`Evaluation`) and :func:`prediction_frames`.  :func:`check_run` refuses a run's parameters
before anything starts.  Names are imported on first use.
"""

from .._lazy import lazy_attributes

_PUBLIC = {
    "DEFAULT_METHODS": ".plan",
    "DEFAULT_METHOD_FEATURES": ".plan",
    "Evaluation": ".evaluation",
    "FeatureGroup": ".plan",
    "MethodOutput": ".methods",
    "MethodRun": ".plan",
    "NeighborSet": ".neighbors",
    "OptionEvaluation": ".evaluation",
    "Protocol": ".stages",
    "Stage": ".stages",
    "declare_protocol": ".stages",
    "run_stages": ".stages",
    "PARTIAL_LABEL_LOSS": ".evaluation",
    "RunPlan": ".plan",
    "RunResult": ".protocol",
    "SplitRows": ".split",
    "TRUE_LABELS": ".evaluation",
    "check_protocol": ".checks",
    "check_data": ".checks",
    "check_data_content": ".checks",
    "check_feature_pipeline": ".checks",
    "CalibrationSplit": ".calibration",
    "calibration_split": ".calibration",
    "check_run": ".checks",
    "dataset_label": ".plan",
    "conformal_option": ".conformal",
    "evaluate": ".evaluation",
    "find_neighbors": ".neighbors",
    "make_split": ".split",
    "method_run_name": ".plan",
    "method_settings": ".plan",
    "metric_prefix": ".neighbors",
    "neighbor_metrics": ".neighbors",
    "neighbor_params": ".neighbors",
    "neighbors_needed": ".plan",
    "noise_label": ".plan",
    "pipeline_run_name": ".plan",
    "plan_run": ".plan",
    "prediction_frames": ".predictions",
    "run_method": ".methods",
    "run_metrics": ".evaluation",
    "run_protocol": ".protocol",
    "trust_option": ".trust",
}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_attributes(__name__, _PUBLIC)

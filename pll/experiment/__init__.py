"""The protocol of one run, as plain functions: a notebook reproduces a logged run without Prefect or MLflow.

:func:`declare_protocol` declares the stages of a run, what each reads and
writes; :func:`run_protocol` runs them in order (:func:`run_stages`), and the
pipeline flow submits the same declaration as Prefect tasks.  What the
stages compute: :func:`make_split` (train, test, validation rows),
:func:`calibration_split` (the hold-out split every calibration uses;
:func:`holdout_split`, the same for a model fitted on every row) and
:func:`find_neighbors` (one :class:`NeighborSet` per feature pipeline),
:func:`run_method`, :func:`trust_option` and :func:`conformal_option` (a
:class:`MethodOutput` per method and reject option), :func:`evaluate` (an
:class:`Evaluation`; :class:`pll.evaluation.Judge` judges the rows) and :func:`prediction_frames`.
:func:`check_run` refuses a run's parameters before anything starts.  Names are imported on first use.
"""

from ..utils._lazy import lazy_attributes

_PUBLIC = {
    "DEFAULT_METHODS": "._plan",
    "DEFAULT_METHOD_FEATURES": "._plan",
    "Evaluation": "._evaluate",
    "FeatureGroup": "._plan",
    "MethodOutput": "._method_stage",
    "MethodRun": "._plan",
    "NeighborSet": "._neighbor_stage",
    "OptionEvaluation": "._evaluate",
    "Protocol": "._stages",
    "Stage": "._stages",
    "declare_protocol": "._stages",
    "run_stages": "._stages",
    "PARTIAL_LABEL_LOSS": "._evaluate",
    "RunPlan": "._plan",
    "RunResult": "._result",
    "SplitRows": "._holdout",
    "TRUE_LABELS": "._evaluate",
    "check_protocol": "._checks",
    "check_data": "._checks",
    "check_data_content": "._checks",
    "check_feature_pipeline": "._checks",
    "CalibrationSplit": "._holdout",
    "calibration_split": "._holdout",
    "holdout_split": "._holdout",
    "check_run": "._checks",
    "dataset_label": "._plan",
    "conformal_option": "._conformal_stage",
    "evaluate": "._evaluate",
    "find_neighbors": "._neighbor_stage",
    "make_split": "._holdout",
    "method_run_name": "._plan",
    "method_settings": "._plan",
    "metric_prefix": "._neighbor_stage",
    "neighbor_metrics": "._neighbor_stage",
    "neighbor_params": "._neighbor_stage",
    "neighbors_needed": "._plan",
    "noise_label": "._plan",
    "pipeline_run_name": "._plan",
    "plan_run": "._plan",
    "prediction_frames": "._predictions",
    "run_method": "._method_stage",
    "run_metrics": "._evaluate",
    "run_protocol": "._protocol",
    "trust_option": "._trust_stage",
    # public modules: benchmark grids, the papers' presets, the catalog of choices
    "catalog": ".catalog",
    "grid": ".grid",
    "presets": ".presets",
}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_attributes(__name__, _PUBLIC)

"""The method stage: fit a method, predict test rows with it and validation rows with its hold-out model."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..methods import RejectPrediction, make_method
from ._neighbor_stage import query_set


@dataclass(frozen=True)
class MethodOutput:
    """What one method run, with one reject option, produced on one split.

    ``name``: the method run's (:class:`~pll.experiment.MethodRun`); ``test``: the test rows; ``train``: the disambiguated training rows;
    ``val``: the validation hold-out, predicted by the same method fitted on
    the fitting rows (for calibrating thresholds; :func:`~pll.experiment.calibration_split`).  ``option`` names
    the reject option whose ``accept`` and ``score`` the test and validation
    predictions carry: ``native`` for the method's own; ``train`` carries
    the native option's (None for ``conformal``, which disambiguates nothing).
    ``fit``: how the method's fit ended, for the run's log (the method's
    ``fit_summary()``, e.g. :class:`~pll.PlClassifier`'s rounds; empty for
    methods without one; the trust option's cell searches,
    :func:`~pll.experiment.trust_option`; the conformal option's
    calibration, :func:`~pll.experiment.conformal_option`).  ``method``: the
    method's registry name (``pl_knn``, ...), for rules that differ by method.
    """

    name: str
    features: str
    test: RejectPrediction
    train: RejectPrediction | None
    val: RejectPrediction
    option: str = "native"
    fit: dict = field(default_factory=dict)
    method: str = ""


def run_method(run, split, neighbors, seed: int, validation) -> MethodOutput:
    """Fit the method of ``run`` (a :class:`~pll.experiment.MethodRun`) on the split's training rows; predict with its own reject option.

    ``neighbors`` (a :class:`~pll.experiment.NeighborSet` of ``split``, or
    None for a method that needs none) are reused, not searched again.
    ``validation``: the validation rows as the hold-out model predicts them
    (:meth:`~pll.experiment.CalibrationSplit.predict_validation`; the model
    is fitted on the fitting rows in features fitted on them,
    :func:`~pll.experiment.calibration_split`).
    """
    clf = make_method(run.method, run.params, random_state=seed)
    clf.fit(split.X_train, split.train.S, neighbors=query_set(neighbors, "train"))
    return MethodOutput(
        run.name,
        split.features,
        test=clf.predict_with_reject(split.X_test, neighbors=query_set(neighbors, "test")),
        train=clf.disambiguate(),
        val=validation,
        fit=clf.fit_summary() if hasattr(clf, "fit_summary") else {},
        method=run.method,
    )

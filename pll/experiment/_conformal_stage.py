"""The conformal stage: prediction sets as a third reject option of every method.

Every guarantee of :mod:`pll.reject.conformal` needs a function that scores the
calibration (validation) rows and the test rows without having seen
either: it must treat them alike.  So this stage scores both in the
hold-out split (:func:`~pll.experiment.calibration_split`), whose features and
method were fitted on the fitting rows alone, never in the run's features.
"""

from __future__ import annotations

from . import catalog
from ..reject.conformal import ConformalSets, bag_hit_rate
from ._holdout import CalibrationSplit
from ._method_stage import MethodOutput

DEFAULT_ALPHA = catalog.DEFAULT_CONFORMAL_ALPHA


def conformal_option(run, calibration: CalibrationSplit, holdout, alpha: float = DEFAULT_ALPHA) -> MethodOutput:
    """The method of ``run`` (a :class:`~pll.experiment.MethodRun`) with conformal prediction sets as its reject option: accept iff the set is one label.

    ``holdout``, the method fitted on the fitting rows of ``calibration``
    (:meth:`~pll.experiment.CalibrationSplit.fit_holdout`), is calibrated on the validation rows
    (their bags; no true labels needed) with the default procedure and
    score; the same model scores the validation and the test rows.  Nothing
    is disambiguated: ``train`` is None.  ``fit`` holds what the calibration
    chose and what the bags alone say of it, for the run's log and the
    method run's ``pll.fit.conformal_*`` tags: the keys of
    :meth:`~pll.ConformalSets.calibration_report` (``notes`` joined by
    newlines) and ``bag_hit_rate``, the share of test sets that meet their
    row's bag (an upper bound of their coverage), each prefixed ``conformal_``.
    """
    split = calibration.split
    S_val, S_test = split.test.S[: calibration.n_val], split.test.S[calibration.n_val :]
    sets = ConformalSets(holdout, alpha=alpha).fit(calibration.X_val, S_val, neighbors=calibration.val)
    test = sets.predict_with_reject(calibration.X_test, neighbors=calibration.test)
    report = sets.calibration_report()
    return MethodOutput(
        run.name,
        split.features,
        test=test,
        train=None,
        val=sets.predict_with_reject(calibration.X_val, neighbors=calibration.val),
        option="conformal",
        fit={f"conformal_{k}": v for k, v in {**report, "notes": "\n".join(report["notes"]),
                                              "bag_hit_rate": bag_hit_rate(test.sets, S_test)}.items()},
        method=run.method,
    )

"""The conformal stage: prediction sets with coverage ≥ 1 − α as a third reject option of every method.

The guarantee of :mod:`pll.conformal` holds when the function that scores the
calibration (validation) rows and the test rows never saw either: it must
treat them alike.  So this stage scores both in the hold-out split
(:mod:`pll.experiment.calibration`), whose features and method were fitted on
the fitting rows alone, never in the run's features.
"""

from __future__ import annotations

from .. import catalog
from ..conformal import ConformalSets
from .calibration import CalibrationSplit
from .methods import MethodOutput

DEFAULT_ALPHA = catalog.DEFAULT_CONFORMAL_ALPHA


def conformal_option(run, calibration: CalibrationSplit, seed: int, alpha: float = DEFAULT_ALPHA,
                     holdout=None) -> MethodOutput:
    """The method of ``run`` (a :class:`~pll.experiment.MethodRun`) with conformal prediction sets as its reject option: accept iff the set is one label.

    The method is fitted on the fitting rows of ``calibration`` (or
    ``holdout``, that fit done already) and calibrated on the validation rows
    (their bags; no true labels needed); the same model scores the
    validation and the test rows.  Nothing is disambiguated: ``train`` is None.
    """
    split = calibration.split
    holdout = calibration.fit_holdout(run, seed) if holdout is None else holdout
    S_val = split.test.S[: calibration.n_val]
    sets = ConformalSets(holdout, alpha=alpha).fit(calibration.X_val, S_val, neighbors=calibration.val)
    return MethodOutput(
        run.name,
        split.features,
        test=sets.predict_with_reject(calibration.X_test, neighbors=calibration.test),
        train=None,
        val=sets.predict_with_reject(calibration.X_val, neighbors=calibration.val),
        option="conformal",
        method=run.method,
    )

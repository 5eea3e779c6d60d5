"""The conformal stage: prediction sets with coverage ≥ 1 − α as a third reject option of every method."""

from __future__ import annotations

from .. import catalog
from ..conformal import ConformalSets
from ..methods import make_method
from .methods import MethodOutput

DEFAULT_ALPHA = catalog.DEFAULT_CONFORMAL_ALPHA


def conformal_option(name: str, params: dict | None, split, rows, neighbors, seed: int,
                     alpha: float = DEFAULT_ALPHA) -> MethodOutput:
    """Method ``name`` with conformal prediction sets as its reject option: accept iff the set is one label.

    The guarantee of :mod:`pll.conformal` needs a model that never saw the
    calibration rows, so one model, fitted on the fitting rows ``rows.fit``
    only, is calibrated on the validation rows (their bags, no true labels)
    and scores both them and the test rows — not the model refitted on all
    training rows that the other options' test rows get.  The test rows'
    neighbors are therefore searched among the fitting rows
    (``neighbors.test_holdout``).  Nothing is disambiguated: ``train`` is None.
    """
    holdout = make_method(name, params, random_state=seed)
    holdout.fit(split.X_train[rows.fit], split.train.S[rows.fit])
    X_val, S_val = split.X_train[rows.val], split.train.S[rows.val]
    sets = ConformalSets(holdout, alpha=alpha).fit(X_val, S_val, neighbors=neighbors.val)
    return MethodOutput(
        name,
        split.features,
        test=sets.predict_with_reject(split.X_test, neighbors=neighbors.test_holdout),
        train=None,
        val=sets.predict_with_reject(X_val, neighbors=neighbors.val),
        option="conformal",
    )

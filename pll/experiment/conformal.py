"""The conformal stage: prediction sets with coverage ≥ 1 − α as a third reject option of every method.

The guarantee of :mod:`pll.conformal` holds when the function that scores the
calibration (validation) rows and the test rows never saw either: it must
treat them alike.  So this stage does not reuse the run's features, whose
pipeline was fitted on all training rows (the validation rows among them, and
PL A-kNN's preprocessing represents those as training rows, the test rows as
new ones).  It fits the feature pipeline and the method on the fitting rows
``rows.fit`` alone and treats validation and test rows as new rows of one
kind, at the cost of one more feature fit and one more neighbor index per
feature pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import catalog
from ..conformal import ConformalSets
from ..features import FeatureSplit, featurize
from ..methods import make_method, without_support_test
from ..neighbors import NeighborIndex, NeighborResult
from .methods import MethodOutput

DEFAULT_ALPHA = catalog.DEFAULT_CONFORMAL_ALPHA


@dataclass(frozen=True)
class CalibrationSplit:
    """A feature pipeline fitted on the fitting rows, and the validation and test rows' neighbors among them.

    ``split.train`` are the fitting rows; ``split.test`` the validation rows
    (the first ``n_val``) followed by the test rows, all transformed as new rows.
    """

    split: FeatureSplit
    n_val: int
    val: NeighborResult | None
    test: NeighborResult | None

    @property
    def X_val(self):
        return self.split.X_test[: self.n_val]

    @property
    def X_test(self):
        return self.split.X_test[self.n_val :]


def calibration_split(ds, rows, features: str, k: int, knn_backend: str, knn_options: dict | None = None,
                      ) -> CalibrationSplit:
    """The :class:`CalibrationSplit` of ``rows`` for ``features``, with ``k`` neighbors per query (none for 0)."""
    val_rows = rows.train[rows.val]
    split = featurize(ds, rows.train[rows.fit], np.concatenate([val_rows, rows.test]), features,
                      knn=knn_backend, knn_params=knn_options)
    n_val = val_rows.size
    if k == 0:  # methods that need no neighbors
        return CalibrationSplit(split, n_val, None, None)
    with NeighborIndex(split.X_train, k, knn_backend, **dict(knn_options or {})) as index:
        val, test = index.kneighbors(split.X_test[:n_val]), index.kneighbors(split.X_test[n_val:])
    return CalibrationSplit(split, n_val, val, test)


def conformal_option(run, calibration: CalibrationSplit, seed: int, alpha: float = DEFAULT_ALPHA) -> MethodOutput:
    """The method of ``run`` (a :class:`~pll.experiment.MethodRun`) with conformal prediction sets as its reject option: accept iff the set is one label.

    The method is fitted on the fitting rows of ``calibration`` and
    calibrated on the validation rows (their bags; no true labels needed);
    the same model scores the validation and the test rows.  Nothing is
    disambiguated: ``train`` is None.
    """
    split = calibration.split
    holdout = without_support_test(make_method(run.method, run.params, random_state=seed))
    holdout.fit(split.X_train, split.train.S)
    S_val = split.test.S[: calibration.n_val]
    sets = ConformalSets(holdout, alpha=alpha).fit(calibration.X_val, S_val, neighbors=calibration.val)
    return MethodOutput(
        run.name,
        split.features,
        test=sets.predict_with_reject(calibration.X_test, neighbors=calibration.test),
        train=None,
        val=sets.predict_with_reject(calibration.X_val, neighbors=calibration.val),
        option="conformal",
    )

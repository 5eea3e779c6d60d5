"""The hold-out split: every calibration of a run happens on validation rows that nothing fitted has seen.

A run calibrates on its validation rows ``rows.val``: each reject option's
thresholds minimising ``R_λ`` there, and the conformal quantile.  The scores
they are chosen on must come from models that never saw those rows, in the
method and in the features alike: a feature pipeline fitted on all training
rows has seen them (min-max bounds, PCA), and PL A-kNN's preprocessing even
represents its training rows differently from new rows.  So one split per
feature pipeline fits the features and one neighbor index on the fitting
rows ``rows.fit`` alone and treats validation and test rows alike, as new
rows.  Every option's hold-out model scores the validation rows in it: the
method's own (:func:`~pll.experiment.run_method`), the trust score's class
sets (:func:`~pll.experiment.trust_option`) and conformal sets
(:func:`~pll.experiment.conformal_option`, whose coverage guarantee needs
exactly this: calibration and test rows scored by one function that saw
neither).  It costs one more feature fit and one more index per feature
pipeline, and it is the only index over the fitting rows: the neighbor stage
takes the validation rows' neighbors from here.  A feature fit that searches
neighbors in a projection fitted on nothing (PL A-kNN's real-world
preprocessing) takes the fitting rows' from the full split's search
(``fit_neighbors``, :func:`pll.preprocessing.featurize`): the same neighbors, one
search fewer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..preprocessing import FeatureSplit, featurize
from ..methods import make_method, without_support_test
from ..neighbors import NeighborIndex, NeighborResult


@dataclass(frozen=True)
class CalibrationSplit:
    """A feature pipeline fitted on the fitting rows, and the validation and test rows' neighbors among them.

    ``split.train`` are the fitting rows; ``split.test`` the validation rows
    (the first ``n_val``) followed by the test rows, all transformed as new
    rows; ``val`` and ``test`` their neighbors among the fitting rows (None
    for methods that need none).
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

    def fit_holdout(self, run, seed: int):
        """The method of ``run`` (a :class:`~pll.experiment.MethodRun`) fitted on the fitting rows: the hold-out model.

        It only calibrates, so it has no ``no_support`` test
        (:func:`~pll.methods.without_support_test`), which would search its rows.
        """
        model = without_support_test(make_method(run.method, run.params, random_state=seed))
        return model.fit(self.split.X_train, self.split.train.S)

    def predict_validation(self, holdout):
        """The validation rows as the ``holdout`` model predicts them, with its own reject option."""
        return holdout.predict_with_reject(self.X_val, neighbors=self.val)


def calibration_split(ds, rows, features: str, k: int, knn: str, knn_options: dict | None = None,
                      fit_neighbors=None) -> CalibrationSplit:
    """The :class:`CalibrationSplit` of ``rows`` for ``features``, with ``k`` neighbors per query (none for 0).

    ``fit_neighbors``: the full split's :attr:`~pll.preprocessing.FeatureSplit.subset_neighbors`
    (its featurize given ``subset=rows.fit``), which spare the feature fit a search.
    """
    val_rows = rows.train[rows.val]
    split = featurize(ds, rows.train[rows.fit], np.concatenate([val_rows, rows.test]), features,
                      knn=knn, knn_options=knn_options, fit_neighbors=fit_neighbors)
    n_val = val_rows.size
    if k == 0:  # methods that need no neighbors
        return CalibrationSplit(split, n_val, None, None)
    with NeighborIndex(split.X_train, k, knn, **dict(knn_options or {})) as index:
        val, test = index.kneighbors(split.X_test[:n_val]), index.kneighbors(split.X_test[n_val:])
    return CalibrationSplit(split, n_val, val, test)

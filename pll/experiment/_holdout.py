"""The hold-out: which rows train, test and calibrate, and the models that never saw the calibration rows.

Rows.  The papers split 80/20 at random (:func:`make_split`).  On top of
that a seeded validation hold-out is carved from the training rows: a model
fitted on the remaining training rows (the fitting rows) scores it exactly
like test rows, so that reject thresholds can be calibrated without looking
at the test rows.  Every row draw is :mod:`pll.data.split`'s.

Models.  A run calibrates on its validation rows ``rows.val``: each reject
option's thresholds minimising ``R_λ`` there, and the conformal quantile.
The scores they are chosen on must come from models that never saw those
rows, in the method and in the features alike: a feature pipeline fitted on
all training rows has seen them (min-max bounds, PCA), and PL A-kNN's
preprocessing even represents its training rows differently from new rows.
So one :class:`CalibrationSplit` per feature pipeline
(:func:`calibration_split`) fits the features and one neighbor index on the
fitting rows ``rows.fit`` alone and treats validation and test rows alike,
as new rows.  Every option's hold-out model
(:meth:`CalibrationSplit.fit_holdout`) scores the validation rows in it: the
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

A model served on new data (:func:`pll.serving.fit_model`) is fitted on every
row of its data set; its hold-out (:func:`holdout_split`) is the same
construction over the whole data set: the rows drawn as a run draws its
validation rows, no test rows, and the fitted feature pipeline kept, for the
model to ship with its prediction sets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data import split_indices, validation_indices
from ..methods import make_method, without_support_test
from ..neighbors import NeighborIndex, NeighborResult, use_backend
from ..preprocessing import FeatureSplit, featurize
from ..utils._random import seed_to_int


@dataclass(frozen=True, eq=False)
class SplitRows:
    """Row indices of one run.

    Attributes
    ----------
    train, test : ndarray of int
        Data set rows, sorted.
    val, fit : ndarray of int
        Positions *within* ``train``: the validation hold-out and the rest.
    """

    train: np.ndarray
    test: np.ndarray
    val: np.ndarray
    fit: np.ndarray


def make_split(n_rows, seed=0, test_size=0.2, val_fraction=0.2) -> SplitRows:
    """A seeded train/test split with a validation hold-out inside the training rows."""
    train, test = split_indices(n_rows, test_size, seed)
    val, fit = validation_indices(train.size, val_fraction, seed)
    return SplitRows(train, test, val, fit)


@dataclass(frozen=True)
class CalibrationSplit:
    """A feature pipeline fitted on the fitting rows, and the validation and test rows' neighbors among them.

    ``split.train`` are the fitting rows; ``split.test`` the validation rows
    (the first ``n_val``) followed by the test rows, all transformed as new
    rows; ``val`` and ``test`` their neighbors among the fitting rows (None
    for methods that need none, and ``test`` None without test rows).
    ``transformer``: the fitted feature pipeline, where the split keeps it
    (:func:`holdout_split`, whose model ships it); None in a run's split.
    """

    split: FeatureSplit
    n_val: int
    val: NeighborResult | None
    test: NeighborResult | None
    transformer: object = None

    @property
    def X_val(self):
        return self.split.X_test[: self.n_val]

    @property
    def X_test(self):
        return self.split.X_test[self.n_val :]

    @property
    def fit_rows(self):
        """The data set rows the features (and every hold-out model) are fitted on."""
        return self.split.train_rows

    @property
    def val_rows(self):
        """The data set rows of the validation hold-out, in the order of :attr:`X_val`."""
        return self.split.test_rows[: self.n_val]

    def fit_holdout(self, run, seed, knn=None, knn_options=None):
        """The method of ``run`` (a :class:`~pll.experiment.MethodRun`) fitted on the fitting rows: the hold-out model.

        It only calibrates, so it has no ``no_support`` test
        (:func:`~pll.methods.without_support_test`), which would search its rows.
        ``seed`` is the method's ``random_state``.  ``knn`` (with
        ``knn_options``) points the model's own neighbor searches at that
        backend, unless ``run.params`` set them
        (:func:`pll.neighbors.use_backend`): a served model's hold-out
        searches for itself; a run's (``knn`` None) is handed each query's
        neighbors.
        """
        model = make_method(run.method, run.params, random_state=seed)
        if knn is not None:
            model = use_backend(model, knn, knn_options, keep=run.params or {})
        return without_support_test(model).fit(self.split.X_train, self.split.train.S)

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
    return _with_neighbors(split, val_rows.size, k, knn, knn_options)


def holdout_split(ds, features: str = "minmax", k: int = 0, knn: str = "auto", knn_options: dict | None = None,
                  fraction: float = 0.2, random_state=None) -> CalibrationSplit:
    """The hold-out of a model fitted on every row of ``ds``: a :class:`CalibrationSplit` without test rows.

    Its validation rows are a seeded ``fraction`` of the rows of ``ds``,
    drawn by :func:`pll.data.validation_indices` over all of them (the draw
    that carves a run's validation rows from its training rows); the features
    are fitted on the others, the fitting rows, and kept (``transformer``).
    ``k`` neighbors of each held-out row among the fitting rows (0: none;
    the hold-out model then searches them itself,
    :meth:`CalibrationSplit.fit_holdout` given ``knn``).  Its model calibrates
    a served model's threshold and prediction sets
    (:func:`pll.serving.fit_holdout`).
    """
    held_out, fit = validation_indices(ds.n_rows, fraction, seed_to_int(random_state))
    # The fitted pipeline is kept: a served model ships it with its prediction sets.
    split, transformer = featurize(ds, fit, held_out, features, knn=knn, knn_options=knn_options,
                                   return_transformer=True)
    return _with_neighbors(split, held_out.size, k, knn, knn_options, transformer)


def _with_neighbors(split, n_val, k, knn, knn_options, transformer=None) -> CalibrationSplit:
    """The :class:`CalibrationSplit` of ``split``: its first ``n_val`` new rows validate, with ``k`` neighbors each."""
    if k == 0:  # methods that need no neighbors
        return CalibrationSplit(split, n_val, None, None, transformer)
    with NeighborIndex(split.X_train, k, knn, **dict(knn_options or {})) as index:
        val = index.kneighbors(split.X_test[:n_val])
        test = index.kneighbors(split.X_test[n_val:]) if split.X_test.shape[0] > n_val else None
    return CalibrationSplit(split, n_val, val, test, transformer)

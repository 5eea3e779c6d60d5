"""The method stage: fit a method, refit it on the fitting rows, predict test and validation rows."""

from __future__ import annotations

from dataclasses import dataclass

from sklearn.base import clone

from ..methods import RejectPrediction, make_method, without_support_test
from .neighbors import query_set


@dataclass(frozen=True)
class MethodOutput:
    """What one method run, with one reject option, produced on one split.

    ``name``: the method run's (:class:`~pll.experiment.MethodRun`); ``test``: the test rows; ``train``: the disambiguated training rows;
    ``val``: the validation hold-out, predicted by the same method fitted on
    the other training rows (for calibrating thresholds).  ``option`` names
    the reject option whose ``accept`` and ``score`` the test and validation
    predictions carry: ``native`` for the method's own; ``train`` carries
    the native option's (None for ``conformal``, which disambiguates nothing).
    """

    name: str
    features: str
    test: RejectPrediction
    train: RejectPrediction | None
    val: RejectPrediction
    option: str = "native"


def run_method(run, split, rows, neighbors, seed: int) -> MethodOutput:
    """Fit the method of ``run`` (a :class:`~pll.experiment.MethodRun`) on the split's training rows; predict with its own reject option.

    ``neighbors`` (a :class:`~pll.experiment.NeighborSet` of ``split``, or
    None for a method that needs none) are reused, not searched again.  A clone fitted on the fitting rows
    ``rows.fit`` only predicts the validation rows ``rows.val``, for calibration: it has no
    ``no_support`` test (:func:`~pll.methods.without_support_test`), so its rows' reasons never name it.
    """
    clf = make_method(run.method, run.params, random_state=seed)
    clf.fit(split.X_train, split.train.S, neighbors=query_set(neighbors, "train"))
    holdout = without_support_test(clone(clf)).fit(split.X_train[rows.fit], split.train.S[rows.fit])
    return MethodOutput(
        run.name,
        split.features,
        test=clf.predict_with_reject(split.X_test, neighbors=query_set(neighbors, "test")),
        train=clf.disambiguate(),
        val=holdout.predict_with_reject(split.X_train[rows.val], neighbors=query_set(neighbors, "val")),
    )

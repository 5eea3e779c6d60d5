"""The trust stage: the trust score as a second reject option of every method."""

from __future__ import annotations

import warnings

from ..neighbors.registry import DEFAULT_BACKEND
from ..reject.trust_score import DEFAULT_CLASS_SETS, DEFAULT_THRESHOLD, partial_label_trust, with_trust
from ._method_stage import MethodOutput
from ._neighbor_stage import query_set


def trust_option(
    output: MethodOutput,
    split,
    rows,
    neighbors,
    calibration,
    class_sets: str = DEFAULT_CLASS_SETS,
    threshold: float = DEFAULT_THRESHOLD,
    knn: str = DEFAULT_BACKEND,
    knn_options: dict | None = None,
) -> MethodOutput:
    """``output`` with the trust score (in the method's features) as its reject option.

    Test rows are scored against class sets built from the method's
    disambiguation of all training rows.  Validation rows, like the hold-out
    model that predicted them, only see the fitting rows ``rows.fit``, in the
    hold-out split ``calibration`` (:func:`~pll.experiment.calibration_split`) —
    with the labels of the full model's disambiguation, the only one the
    method output holds.  The method's ``neighbors`` (same features, same
    training rows) settle the rows whose lists hold both classes; the others
    are searched with the kNN backend.  The training rows keep the method's
    own disambiguation: nothing downstream reads their trust scores, the
    costliest part at scale (as many queries as training rows).  Where
    ``auto`` searched by cells, the output's ``fit`` says how each search
    ended (``trust_search.<test|val>.<agreement|n_probe|steps|decision>``,
    logged as the method run's ``pll.fit.*`` tags).
    """
    params = {"knn": knn, "knn_options": dict(knn_options or {})}
    S, train, fit = split.train.S, output.train, rows.fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # empty classes and duplicates are well defined
        full = partial_label_trust(split.X_train, S, train.labels, train.accept, class_sets, **params)
        holdout = partial_label_trust(
            calibration.split.X_train, S[fit], train.labels[fit], train.accept[fit], class_sets, **params
        )
    reports = {"test": {}, "val": {}}
    test_scores = full.score(split.X_test, output.test.labels, neighbors=query_set(neighbors, "test"),
                             report=reports["test"])
    val_scores = holdout.score(calibration.X_val, output.val.labels, neighbors=query_set(neighbors, "val"),
                               report=reports["val"])
    return MethodOutput(
        output.name,
        output.features,
        test=with_trust(output.test, test_scores, threshold),
        train=train,
        val=with_trust(output.val, val_scores, threshold),
        option="trust",
        fit={f"trust_search.{rows}.{key}": value for rows, report in reports.items() for key, value in report.items()
             if value is not None},
        method=output.method,
    )

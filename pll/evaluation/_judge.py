"""Judging predictions of a data set's rows: against their true labels where the data has them, else their bags."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidDataError
from ._reject import correctness, partial_label_report, reject_report
from .bag_bounds import calibrate_thresholds_from_bags
from ..reject.conformal import set_report


class Judge:
    """Judges predictions of some rows of a data set: against true labels, else by the partial-label loss.

    With true labels (``ds.y``) a prediction is correct when it equals the
    row's true label, and every row is judged.  Without, it is correct when
    it lies in the row's bag, and only rows with a non-empty bag can be
    judged (:attr:`keep`).  A benchmark run's evaluation
    (:func:`pll.experiment.evaluate`) judges its test and validation rows
    so, and a served model's hold-out (:func:`pll.serving.evaluate_holdout`)
    its held-out rows: a model's metrics mean the same wherever it is judged.
    It applies :mod:`pll.evaluation`'s reports, :mod:`pll.evaluation.bag_bounds`'s
    calibration and :mod:`pll.reject.conformal`'s set report to its rows.

    Parameters
    ----------
    ds : PartialLabelDataset
        The data set the rows belong to.
    rows : array of int
        The judged rows of ``ds``, in the order the predictions list them.
    part : str
        What the rows are (``test``, ``validation``, ``held-out``), named in errors.

    Attributes
    ----------
    keep : bool ndarray of shape (len(rows),)
        The rows that can be judged: all with true labels, else those with a
        non-empty bag.  Every method takes predictions of all ``rows`` and
        leaves the others out.

    Raises
    ------
    InvalidDataError
        No row can be judged (no true labels and only empty bags).

    Examples
    --------
    >>> import numpy as np, pll
    >>> from pll import RejectPrediction
    >>> S = np.array([[1, 1, 0], [0, 0, 0], [0, 1, 1]], bool)
    >>> ds = pll.PartialLabelDataset(np.zeros((3, 1)), S, None, ["a", "b", "c"], "toy", allow_empty_bags=True)
    >>> judge = Judge(ds, [0, 1, 2], "test")
    >>> judge.keep.tolist()
    [True, False, True]
    >>> labels = np.array([0, 2, 0])
    >>> pred = RejectPrediction(labels=labels, accept=np.ones(3, bool), score=np.ones(3), guess=labels)
    >>> judge.correct(pred).tolist()
    [True, False]
    """

    def __init__(self, ds, rows, part="test"):
        self.ds, self.rows = ds, np.asarray(rows)
        self.keep = np.ones(self.rows.size, bool) if ds.y is not None else ds.S[self.rows].any(axis=1)
        if not self.keep.any():
            raise InvalidDataError(f"{ds.name}: no {part} row has a candidate bag to evaluate against")

    def correct(self, pred):
        """Whether each judged row's predicted label is right: bool, one per row of :attr:`keep`."""
        labels = pred.labels[self.keep]
        if self.ds.y is not None:
            return correctness(labels, y_true=self.ds.y[self.rows], n_classes=self.ds.n_classes)
        return correctness(labels, bags=self.ds.S[self.rows[self.keep]])

    def report(self, pred, lambdas):
        """The reject report of ``pred`` (labels, accept) on the judged rows.

        :func:`pll.evaluation.reject_report` with true labels, else
        :func:`pll.evaluation.partial_label_report` on the rows with a bag.
        """
        if self.ds.y is not None:
            return reject_report(self.ds.y[self.rows], pred.labels, pred.accept, lambdas, n_classes=self.ds.n_classes)
        bags = self.ds.S[self.rows[self.keep]]
        return partial_label_report(bags, pred.labels[self.keep], pred.accept[self.keep], lambdas)

    def sets(self, pred):
        """What the prediction sets cost and cover (:func:`pll.reject.conformal.set_report`); coverage needs true labels."""
        return set_report(pred.sets[self.keep], None if self.ds.y is None else self.ds.y[self.rows])

    def bag_calibration(self, pred, lambdas):
        """Thresholds chosen from the bags alone: each λ's minimises the upper bound of ``R_λ`` (:mod:`pll.evaluation.bag_bounds`)."""
        return calibrate_thresholds_from_bags(pred.score, pred.labels, self.ds.S[self.rows], lambdas)

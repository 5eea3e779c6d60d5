"""Prediction tables of a run: what each method run predicted, with every reject option, row by row."""

from __future__ import annotations

import numpy as np

from ..methods._base import set_labels

PARTS = ("test", "val")


def prediction_frames(outputs, ds, rows) -> dict:
    """Method run name -> part -> table of its predictions: ``test`` rows and ``val``, the validation hold-out.

    The validation rows are what the calibrated thresholds were chosen on.
    The ``native`` option (else the alphabetically first) gives the columns
    of :meth:`RejectPrediction.to_frame` (``belief_<class>``,
    ``plausibility_<class>``, ``share_<class>``, ...); every other option
    adds ``<option>_score`` and ``<option>_accept`` (e.g. ``trust_score``),
    ``<option>_reason`` (:mod:`pll.methods.reasons`; the base option's is ``reason``),
    ``<option>_label`` if its labels differ, and ``<option>_set`` (labels
    joined by ``|``) with ``<option>_set_size`` if it predicts sets
    (``conformal``).
    """
    by_run = {}
    for out in outputs:
        by_run.setdefault(out.name, []).append(out)
    frames = {}
    for name, outs in by_run.items():
        outs = sorted(outs, key=lambda o: (o.option != "native", o.option))
        for part, idx in zip(PARTS, (rows.test, rows.train[rows.val])):
            base = getattr(outs[0], part)
            frame = base.to_frame(ds.classes, None if ds.y is None else ds.y[idx], idx)
            extra = {}
            for other in outs[1:]:
                pred = getattr(other, part)
                extra[f"{other.option}_score"] = pred.score
                extra[f"{other.option}_accept"] = pred.accept
                if pred.reason is not None:
                    extra[f"{other.option}_reason"] = pred.reason
                if not np.array_equal(pred.labels, base.labels):
                    extra[f"{other.option}_label"] = pred.labels
                if pred.sets is not None:
                    extra[f"{other.option}_set"] = set_labels(pred.sets, ds.classes)
                    extra[f"{other.option}_set_size"] = pred.sets.sum(axis=1)
            frames.setdefault(name, {})[part] = frame.assign(**extra)
    return frames

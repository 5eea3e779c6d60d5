"""The DST-PLL paper's preparation of real-world partial-label data.

Rare classes make accuracies noisy; the paper keeps the classes that cover
95 % of the rows and drops features that carry no information.  Definition:
ALGORITHMS.md, "The published numbers".
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidDataError, InvalidParameterError
from .dataset import PartialLabelDataset

PROTOCOLS = ("none", "dst-pll")


def dst_pll_protocol(ds, coverage=0.95) -> PartialLabelDataset:
    """Keep the most frequent classes and drop constant features.

    ``c`` is the smallest number of true classes, taken from the most frequent
    down, whose rows make up more than ``coverage`` of all rows.  The ``c``
    labels that occur most often in bags are kept (ties: lower class index),
    rows whose true label is not kept are dropped, bags are restricted to the
    kept labels, and features constant over the remaining rows are dropped.

    Parameters
    ----------
    ds : PartialLabelDataset
        With true labels.
    coverage : float in (0, 1]

    Returns
    -------
    PartialLabelDataset
        Classes in their original order; ``info`` records what was dropped.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([0] * 50 + [1] * 30 + [2] * 17 + [3] * 3)
    >>> S = np.eye(4, dtype=bool)[y]
    >>> X = np.c_[np.arange(100.0), np.ones(100)]
    >>> out = dst_pll_protocol(PartialLabelDataset(X, S, y, list("abcd"), "toy"))
    >>> out.classes.tolist(), out.n_rows, out.n_features
    (['a', 'b', 'c'], 97, 1)
    """
    if not 0.0 < coverage <= 1.0:
        raise InvalidParameterError(f"coverage must be in (0, 1], got {coverage}")
    if ds.y is None:
        raise InvalidDataError(f"{ds.name}: the DST-PLL protocol needs true labels to rank classes; the data has none")
    counts = np.bincount(ds.y, minlength=ds.n_classes)
    covered = np.cumsum(np.sort(counts)[::-1])
    c = int(np.argmax(covered > coverage * ds.n_rows)) + 1 if coverage < 1.0 else int((counts > 0).sum())
    kept = np.sort(np.argsort(-ds.S.sum(axis=0), kind="stable")[:c])
    rows = np.isin(ds.y, kept)
    X = ds.X[rows]
    constant = (X.max(axis=0) == X.min(axis=0)) if X.shape[0] else np.zeros(X.shape[1], dtype=bool)
    new_index = np.full(ds.n_classes, -1, dtype=np.int64)
    new_index[kept] = np.arange(kept.size)
    info = {
        **ds.info,
        "protocol": "dst-pll",
        "protocol_coverage": coverage,
        "protocol_kept_classes": [str(ds.classes[k]) for k in kept],
        "protocol_dropped_rows": int((~rows).sum()),
        "protocol_dropped_features": int(constant.sum()),
        **(
            {"feature_names": [n for n, c in zip(ds.info["feature_names"], constant) if not c]}
            if "feature_names" in ds.info
            else {}
        ),
    }
    return PartialLabelDataset(
        X[:, ~constant],
        ds.S[rows][:, kept],
        new_index[ds.y[rows]],
        ds.classes[kept],
        ds.name,
        allow_empty_bags=ds.allow_empty_bags,
        allow_true_label_outside=ds.allow_true_label_outside,
        info=info,
        ids=None if ds.ids is None else ds.ids[rows],
    )


def apply_protocol(ds, protocol="none") -> PartialLabelDataset:
    """``ds`` prepared by the named protocol (``"none"`` returns it unchanged)."""
    if protocol in (None, "none"):
        return ds
    if protocol == "dst-pll":
        return dst_pll_protocol(ds)
    raise InvalidParameterError(f"unknown data protocol {protocol!r}: choose one of {', '.join(PROTOCOLS)}")

"""The partial-label data set type and its validation."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import InvalidDataError
from ..utils.validation import at_row, check_bags, check_class_indices, check_features


@dataclass(frozen=True, eq=False)
class PartialLabelDataset:
    """Features, candidate bags and (optionally) true labels of ``n`` rows.

    Attributes
    ----------
    X : ndarray of shape (n, d), float64
        Finite features.
    S : ndarray of shape (n, l), bool
        ``S[i, c]`` is True when class ``c`` is a candidate label of row ``i``.
    y : ndarray of shape (n,), int64, or None
        Index of each row's true class, when known (for evaluation only).
    classes : ndarray of shape (l,)
        Class names, in column order of ``S``.
    name : str
        Where the data came from (a built-in name or a file name).
    allow_empty_bags : bool
        Accept rows whose bag is empty (noisy partial labels).
    allow_true_label_outside : bool
        Accept rows whose true label is not in their bag (noisy partial labels).
    info : dict
        What a loader found out about the source (format, dropped features, ...).
        Its ``source`` entry, when present, names the file in error messages.
    ids : ndarray of shape (n,), or None
        Row keys from the source (a CSV or Parquet ``id`` column), shown where
        rows are named (``pll score``'s neighbors, ``pll audit``); not data:
        the fingerprint leaves them out.

    Examples
    --------
    >>> import numpy as np
    >>> ds = PartialLabelDataset(np.zeros((2, 1)), [[1, 1, 0], [0, 0, 1]], [0, 2], ["a", "b", "c"], "toy")
    >>> ds.summary()["average_bag_size"]
    1.5
    """

    X: np.ndarray
    S: np.ndarray
    y: np.ndarray | None
    classes: np.ndarray
    name: str
    allow_empty_bags: bool = False
    allow_true_label_outside: bool = False
    info: dict = field(default_factory=dict)
    ids: np.ndarray | None = None

    def __post_init__(self):
        X, S, y, classes = validate_arrays(
            self.X,
            self.S,
            self.y,
            self.classes,
            source=self.info.get("source", self.name),
            allow_empty_bags=self.allow_empty_bags,
            allow_true_label_outside=self.allow_true_label_outside,
        )
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "S", S)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "classes", classes)
        if self.ids is not None:
            ids = np.asarray(self.ids, dtype=object)
            if ids.shape != (X.shape[0],):
                raise InvalidDataError(f"{self.name}: {X.shape[0]} rows but row keys of shape {ids.shape}")
            object.__setattr__(self, "ids", ids)

    @property
    def n_rows(self) -> int:
        return self.X.shape[0]

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    @property
    def n_classes(self) -> int:
        return self.S.shape[1]

    def with_bags(self, S, *, allow_empty_bags=None, allow_true_label_outside=None, **info):
        """A copy with new candidate bags (for example after noise injection)."""
        return PartialLabelDataset(
            self.X,
            S,
            self.y,
            self.classes,
            self.name,
            allow_empty_bags=self.allow_empty_bags if allow_empty_bags is None else allow_empty_bags,
            allow_true_label_outside=(
                self.allow_true_label_outside
                if allow_true_label_outside is None
                else allow_true_label_outside
            ),
            info={**self.info, **info},
            ids=self.ids,
        )

    def with_features(self, X):
        """The same rows with other features ``X`` of shape (n, d'): a feature pipeline's output."""
        return replace(self, X=X, info=dict(self.info))

    def subset(self, rows):
        """A copy restricted to ``rows`` (an index array or a boolean mask)."""
        return PartialLabelDataset(
            self.X[rows],
            self.S[rows],
            None if self.y is None else self.y[rows],
            self.classes,
            self.name,
            allow_empty_bags=self.allow_empty_bags,
            allow_true_label_outside=self.allow_true_label_outside,
            info=dict(self.info),
            ids=None if self.ids is None else self.ids[rows],
        )

    def fingerprint(self) -> str:
        """A short hash of the contents, recorded with every run."""
        h = hashlib.sha256()
        for part in (self.X, self.S, self.y if self.y is not None else np.empty(0)):
            h.update(str(part.shape).encode())
            h.update(np.ascontiguousarray(part).tobytes())
        h.update("\x1f".join(map(str, self.classes)).encode())
        return h.hexdigest()[:16]

    def summary(self) -> dict:
        """Rows, features, classes and bag statistics, as logged with every run."""
        bag_sizes = self.S.sum(axis=1)
        out = {
            "name": self.name,
            "rows": int(self.n_rows),
            "features": int(self.n_features),
            "classes": int(self.n_classes),
            "class_names": [str(c) for c in self.classes],
            "average_bag_size": float(bag_sizes.mean()) if self.n_rows else 0.0,
            "max_bag_size": int(bag_sizes.max()) if self.n_rows else 0,
            "single_candidate_rows": int((bag_sizes == 1).sum()),
            "empty_bags": int((bag_sizes == 0).sum()),
            "has_true_labels": self.y is not None,
            "fingerprint": self.fingerprint(),
        }
        if self.y is not None:
            inside = self.S[np.arange(self.n_rows), self.y]
            out["true_label_outside_bag"] = int((~inside).sum())
        out.update(self.info)
        return out


def at_line(line, row) -> str:
    """How an error names a row of a text file: the 1-based line it starts on, as an editor shows it, and its row."""
    return f"line {line}, {at_row(row)}"


def validate_arrays(
    X,
    S,
    y,
    classes,
    *,
    source="data",
    allow_empty_bags=False,
    allow_true_label_outside=False,
    where=at_row,
):
    """Check and normalise the arrays of a data set; raise InvalidDataError naming the problem.

    ``where(row)`` names a 0-based row in messages (default :func:`at_row`); a
    loader of a text file passes one that also names the line (:func:`at_line`).
    """
    X = np.asarray(check_features(X, source, where=where), dtype=np.float64)
    n = X.shape[0]
    S = check_bags(S, n, source=source, where=where)
    classes = np.asarray(classes)
    if classes.ndim != 1 or classes.shape[0] != S.shape[1]:
        raise InvalidDataError(
            f"{source}: {S.shape[1]} bag columns but {classes.size} class names"
        )
    if S.shape[1] < 3:
        raise InvalidDataError(
            f"{source}: partial-label learning needs at least three classes, found {S.shape[1]}"
        )
    if len(set(map(str, classes))) != classes.size:
        raise InvalidDataError(f"{source}: class names are not unique")
    empty = ~S.any(axis=1)
    if empty.any() and not allow_empty_bags:
        raise InvalidDataError(
            f"{source}: {int(empty.sum())} row(s) have an empty candidate bag "
            f"(first at {where(int(np.argmax(empty)))}); to accept them as noisy partial labels, pass --noisy-bags "
            "(pll.load_dataset: allow_empty_bags=True)"
        )
    if y is not None:
        y = np.asarray(y)
        if y.shape != (n,):
            raise InvalidDataError(f"{source}: {n} rows but {y.size} true labels (row counts differ)")
        y = check_class_indices(y, S.shape[1], source=source, where=where)
        outside = ~S[np.arange(n), y]
        if outside.any() and not allow_true_label_outside:
            raise InvalidDataError(
                f"{source}: the true label of {int(outside.sum())} row(s) is not in its bag "
                f"(first at {where(int(np.argmax(outside)))}); to accept them as noisy partial labels, pass "
                "--noisy-bags (pll.load_dataset: allow_true_label_outside=True)"
            )
    return X, S, y, classes


def one_hot(y, n_classes):
    """The bags of fully labelled rows: row ``i`` holds only ``y[i]``; bool (n, n_classes)."""
    S = np.zeros((len(y), n_classes), dtype=bool)
    S[np.arange(len(y)), y] = True
    return S

"""Loading data sets by built-in name or by file path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse

from ..errors import DataFileError, DatasetNotFoundError
from .dataset import PartialLabelDataset

BUILTIN_NAMES = ("digits", "iris", "wine")
FILE_FORMATS = {".mat": "PALM MATLAB file (data, partial_target, target)"}


def load_dataset(name_or_path) -> PartialLabelDataset:
    """Load a data set from a built-in name or a file path.

    Built-in sets are fully labelled: each row's bag is its true label alone,
    and partial labels come from a noise model (:mod:`pll.noise`).
    """
    key = str(name_or_path)
    if key in BUILTIN_NAMES:
        return _load_builtin(key)
    path = Path(key)
    if path.suffix.lower() in FILE_FORMATS:
        if not path.is_file():
            raise DataFileError(f"{path}: no such file")
        if path.stat().st_size == 0:
            raise DataFileError(f"{path}: the file is empty")
        return _LOADERS[path.suffix.lower()](path)
    raise DatasetNotFoundError(
        f"unknown data set {key!r}: known names are {', '.join(BUILTIN_NAMES)}; "
        f"or give a path to a file of type {', '.join(FILE_FORMATS)}"
    )


def _load_builtin(name):
    import sklearn.datasets

    bunch = getattr(sklearn.datasets, f"load_{name}")()
    y = bunch.target.astype(np.int64)
    n_classes = int(y.max()) + 1
    S = np.zeros((y.size, n_classes), dtype=bool)
    S[np.arange(y.size), y] = True
    names = getattr(bunch, "target_names", None)
    classes = np.asarray(names if names is not None else np.arange(n_classes)).astype(str)
    return PartialLabelDataset(bunch.data, S, y, classes, name, info={"format": "builtin"})


def _load_palm_mat(path):
    try:
        mat = scipy.io.loadmat(path)
    except Exception as exc:  # scipy raises several types for corrupt files
        raise DataFileError(f"{path}: not a readable MATLAB file ({exc})") from None
    fields = {k: v for k, v in mat.items() if not k.startswith("__")}
    missing = [f for f in ("data", "partial_target") if f not in fields]
    if missing:
        raise DataFileError(
            f"{path}: missing field(s) {', '.join(missing)}; found {', '.join(sorted(fields)) or 'nothing'}"
        )
    X = _dense(fields["data"])
    S = _dense(fields["partial_target"])
    if S.shape[0] != X.shape[0] and S.shape[1] == X.shape[0]:
        S = S.T
    y = None
    if "target" in fields:
        T = _dense(fields["target"])
        if T.shape[0] != X.shape[0] and T.shape[1] == X.shape[0]:
            T = T.T
        y = np.argmax(T, axis=1).astype(np.int64)
    classes = np.arange(S.shape[1]).astype(str)
    return PartialLabelDataset(X, S != 0, y, classes, path.stem, info={"format": "mat"})


def _dense(a):
    return np.asarray(a.toarray() if scipy.sparse.issparse(a) else a, dtype=np.float64)


_LOADERS = {".mat": _load_palm_mat}

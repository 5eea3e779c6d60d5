"""Loading data sets by built-in name or by file path; the loader is chosen by file type."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import DataFileError, DatasetNotFoundError, InvalidParameterError
from .arff import arff_features, parse_arff
from .dataset import PartialLabelDataset, one_hot
from .mat import read_palm_mat
from .protocol import apply_protocol
from .tabular import read_table, table_arrays

BUILTIN_NAMES = ("digits", "iris", "wine")
FILE_FORMATS = {
    ".mat": "PALM MATLAB file: data (n x d), partial_target (l x n or n x l), optional target; "
    "top level or inside one struct, dense or sparse",
    ".arff": "ARFF (Weka/UCI): numeric and nominal attributes (one-hot), labelled by the attribute 'Class'",
    ".csv": "one row per example: 'candidates' (labels separated by '|'), optional 'label', numeric features",
    ".parquet": "as CSV; 'candidates' may also be a list column",
}


def load_dataset(
    name_or_path,
    *,
    allow_empty_bags=False,
    allow_true_label_outside=False,
    protocol="none",
    classes=None,
) -> PartialLabelDataset:
    """Load a data set from a built-in name or a file path.

    Built-in sets (:data:`BUILTIN_NAMES`) and ARFF files are fully labelled:
    each row's bag is its true label alone, and partial labels come from a
    noise model (:mod:`pll.noise`).  ``.mat``, CSV and Parquet files bring
    their own bags.

    Parameters
    ----------
    name_or_path : str or path
        A built-in name or a file whose suffix is one of :data:`FILE_FORMATS`.
    allow_empty_bags, allow_true_label_outside : bool
        Accept noisy partial labels: rows with an empty bag, rows whose true
        label is not in their bag (counted in the summary).
    protocol : {"none", "dst-pll"}
        ``"dst-pll"`` prepares real-world data as the DST-PLL paper does
        (:func:`pll.data.protocol.dst_pll_protocol`).
    classes : sequence of str, optional
        CSV/Parquet only: the label set; by default every label that occurs.

    Returns
    -------
    PartialLabelDataset
        Its ``info`` says what the loader found (format, source, layout).

    Examples
    --------
    >>> ds = load_dataset("iris")
    >>> ds.X.shape, ds.S.shape, ds.classes.tolist()
    ((150, 4), (150, 3), ['setosa', 'versicolor', 'virginica'])
    """
    flags = {"allow_empty_bags": allow_empty_bags, "allow_true_label_outside": allow_true_label_outside}
    key = str(name_or_path)
    if classes is not None and Path(key).suffix.lower() not in (".csv", ".parquet"):
        raise InvalidParameterError(f"{key}: the parameter 'classes' applies to CSV and Parquet files only")
    if key in BUILTIN_NAMES:
        ds = _load_builtin(key, flags)
    else:
        ds = _load_file(_existing_file(key), flags, classes)
    return apply_protocol(ds, protocol)


def check_source(name_or_path):
    """Refuse a data set that is neither a built-in name nor an existing, non-empty file of a known type.

    What :func:`load_dataset` checks first, without reading the data: a run
    can be refused before it starts.
    """
    if str(name_or_path) not in BUILTIN_NAMES:
        _existing_file(str(name_or_path))


def _existing_file(key):
    path = Path(key)
    suffix = path.suffix.lower()
    if suffix not in FILE_FORMATS:
        if path.exists():
            raise DataFileError(f"{path}: unsupported file type {suffix!r}; supported: {', '.join(FILE_FORMATS)}")
        raise DatasetNotFoundError(
            f"unknown data set {key!r}: known names are {', '.join(BUILTIN_NAMES)}; "
            f"or give a path to a file of type {', '.join(FILE_FORMATS)}"
        )
    if not path.is_file():
        raise DataFileError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise DataFileError(f"{path}: the file is empty")
    return path


def _load_file(path, flags, classes):
    fmt = path.suffix.lower()[1:]
    info = {"format": fmt, "source": str(path)}
    if fmt == "mat":
        X, S, y, found = read_palm_mat(path)
        classes = np.arange(S.shape[1]).astype(str)
    elif fmt == "arff":
        X, y, classes, found = arff_features(path, parse_arff(path))
        S = one_hot(y, classes.size)
    else:
        X, S, y, classes, found = table_arrays(path, read_table(path), classes)
    return PartialLabelDataset(X, S, y, classes, path.stem, **flags, info={**info, **found})


def _load_builtin(name, flags):
    import sklearn.datasets

    bunch = getattr(sklearn.datasets, f"load_{name}")()
    y = bunch.target.astype(np.int64)
    classes = np.asarray(bunch.target_names).astype(str)
    info = {"format": "builtin", "source": f"sklearn.datasets.load_{name}"}
    return PartialLabelDataset(bunch.data, one_hot(y, classes.size), y, classes, name, **flags, info=info)

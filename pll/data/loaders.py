"""Loading data sets by built-in name or by file path; the loader is chosen by file type.

Every loader names the place of a bad value the same way:

- ``row R`` is the example's 0-based position in the loaded data set
  (``ds.X[R]``), as everywhere in pll;
- text files (CSV, ARFF) also name ``line L``, the 1-based line the row
  starts on as an editor shows it (header, comments and blank lines count):
  ``data.csv, line 7, row 4: ...``; a syntax error outside the data rows
  names its line alone;
- Parquet and ``.mat`` files have no lines: ``data.parquet, row 4: ...``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import DataFileError, DatasetNotFoundError, InvalidParameterError
from .arff import arff_features, parse_arff
from .csvlines import row_locator
from .dataset import PartialLabelDataset, at_row, one_hot, validate_arrays
from .mat import OPTION as MAT_OPTION
from .mat import mat_variable_names, read_palm_mat
from .protocol import apply_protocol
from .tabular import read_table, table_arrays

BUILTIN_NAMES = ("digits", "iris", "wine")
FILE_FORMATS = {
    ".mat": "PALM MATLAB file: data (n x d), partial_target (l x n or n x l), optional target; "
    "top level or inside one struct, dense or sparse; other names with --mat-variables "
    "features=NAME,partial_labels=NAME,labels=NAME",
    ".arff": "ARFF (Weka/UCI): numeric and nominal attributes (one-hot), labelled by the attribute 'Class'",
    ".csv": "one row per example: 'candidates' (labels separated by '|'), optional 'label', numeric features",
    ".parquet": "as CSV; 'candidates' may also be a list column",
}


def load_run_data(dataset, protocol="none", noisy_bags=False, mat_variables=None) -> PartialLabelDataset:
    """The data set as a run takes it: :func:`load_dataset` with ``noisy_bags`` accepting both kinds of noisy bags
    (empty ones, true labels outside).  The ingestion stage and the command line's pre-flight read it alike."""
    return load_dataset(dataset, protocol=protocol, allow_empty_bags=noisy_bags,
                        allow_true_label_outside=noisy_bags, variables=mat_variables)


def load_dataset(
    name_or_path,
    *,
    allow_empty_bags=False,
    allow_true_label_outside=False,
    protocol="none",
    classes=None,
    variables=None,
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
    variables : dict, optional
        ``.mat`` only: the file's names for ``"features"``, ``"partial_labels"``
        and ``"labels"``, e.g. ``{"partial_labels": "p_labels"}``; a key left
        out keeps its PALM name (``data``, ``partial_target``, ``target``).
        :func:`pll.data.mat.parse_mat_variables` reads them from text.

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
    _check_options(key, classes, variables)
    if key in BUILTIN_NAMES:
        ds = _load_builtin(key, flags)
    else:
        ds = _load_file(_existing_file(key), flags, classes, variables)
    return apply_protocol(ds, protocol)


def check_source(name_or_path, *, classes=None, variables=None):
    """Refuse a data set that is neither a built-in name nor an existing, non-empty file of a known type.

    What :func:`load_dataset` checks first, without reading the data: a run
    can be refused before it starts.  ``classes`` and ``variables`` are
    refused for a file type that does not take them, and ``variables`` with a
    key that is not one of ``features``, ``partial_labels``, ``labels``.
    """
    key = str(name_or_path)
    _check_options(key, classes, variables)
    if variables is not None:
        mat_variable_names(variables, f"{key}: {MAT_OPTION}")
    if key not in BUILTIN_NAMES:
        _existing_file(key)


def _check_options(key, classes, variables):
    suffix = Path(key).suffix.lower()
    if classes is not None and suffix not in (".csv", ".parquet"):
        raise InvalidParameterError(f"{key}: the parameter 'classes' applies to CSV and Parquet files only")
    if variables is not None and suffix != ".mat":
        raise InvalidParameterError(f"{key}: the variable names ({MAT_OPTION}) apply to .mat files only")


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


def _load_file(path, flags, classes, variables):
    fmt = path.suffix.lower()[1:]
    info = {"format": fmt, "source": str(path)}
    where, ids = at_row, None
    if fmt == "mat":
        X, S, y, found = read_palm_mat(path, variables)
        classes = np.arange(S.shape[1]).astype(str)
    elif fmt == "arff":
        table = parse_arff(path)
        X, y, classes, found = arff_features(path, table)
        S, where = one_hot(y, classes.size), table.where
    else:
        frame = read_table(path)
        where = row_locator(path, len(frame)) if fmt == "csv" else at_row
        X, S, y, classes, found, ids = table_arrays(path, frame, classes, where)
    if where is not at_row:  # a text file: validate here to name the line of a bad row
        X, S, y, classes = validate_arrays(X, S, y, classes, source=str(path), where=where, **flags)
    return PartialLabelDataset(X, S, y, classes, path.stem, **flags, info={**info, **found}, ids=ids)


def _load_builtin(name, flags):
    import sklearn.datasets

    bunch = getattr(sklearn.datasets, f"load_{name}")()
    y = bunch.target.astype(np.int64)
    classes = np.asarray(bunch.target_names).astype(str)
    info = {"format": "builtin", "source": f"sklearn.datasets.load_{name}"}
    return PartialLabelDataset(bunch.data, one_hot(y, classes.size), y, classes, name, **flags, info=info)

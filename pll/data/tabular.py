"""CSV and Parquet files: one row per example, bags in a ``candidates`` column.

``candidates`` holds the candidate labels separated by ``|`` (``cat|dog``; in
Parquet also a list column), an optional ``label`` column the true label, and
every other column is a numeric feature.  Class order is sorted by name
(numerically when every name is an integer).  A text cell that reads as a
list with another separator (``1,2``, ``cat; dog``) is refused rather than
taken as one class; label names holding such characters go in a Parquet
list column.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..errors import DataFileError, InvalidDataError
from .csvlines import layout_problem
from .dataset import at_row

CANDIDATES = "candidates"
LABEL = "label"
ID = "id"
"""An optional column of row keys: not a feature (a key in a distance would only mislead), shown where rows are named."""
SEPARATOR = "|"


def read_table(path):
    """Read a CSV or Parquet file into a DataFrame; raise DataFileError if it cannot be read."""
    try:
        if path.suffix.lower() == ".parquet":
            return pd.read_parquet(path)
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)  # a row longer than the header
            return pd.read_csv(
                path,
                dtype={CANDIDATES: str, LABEL: str},
                keep_default_na=False,
                na_values=[""],
                index_col=False,
            )
    except UnicodeDecodeError as exc:
        raise DataFileError(f"{path}: not a text file ({exc.reason} at byte {exc.start})") from None
    except Exception as exc:  # pandas and pyarrow raise many types on corrupt or truncated files
        located = layout_problem(path) if path.suffix.lower() == ".csv" else None
        if located:
            raise DataFileError(f"{path}, {located}") from None
        raise DataFileError(f"{path}: cannot be read ({type(exc).__name__}: {str(exc).strip()})") from None


def table_arrays(path, frame, classes=None, where=at_row):
    """Features, bags, true labels and class names of a table.

    Parameters
    ----------
    path : Path
        Named in error messages.
    frame : DataFrame
    classes : sequence of str, optional
        The label set; a candidate or label outside it is an error.  By
        default every label that occurs is a class.
    where : callable, optional
        ``where(row)`` names a 0-based row in messages; for a CSV file,
        :func:`pll.data.csvlines.row_locator` also names its line.

    Returns
    -------
    X : ndarray of shape (n, d), S : bool ndarray of shape (n, l),
    y : int ndarray of shape (n,) or None, classes : ndarray of shape (l,) of str,
    info : dict, ids : ndarray of shape (n,) of str, or None
        ``ids``: the :data:`ID` column as text, when the table has one; its
        keys must be present and unique.
    """
    if CANDIDATES not in frame.columns:
        raise DataFileError(
            f"{path}: no column {CANDIDATES!r} (the candidate labels, separated by '{SEPARATOR}'); "
            f"found columns {', '.join(map(str, frame.columns)) or 'none'}"
        )
    bag_of, first, cells = _distinct(frame[CANDIDATES])
    bags = [_bag(path, where, row, value) for row, value in zip(first, cells)]
    has_labels = LABEL in frame.columns
    label_of, label_first, names = _labels(path, where, frame[LABEL]) if has_labels else (None, [], [])
    _check_separators(path, where, first, cells, set().union(*bags, names))
    declared = classes is not None
    if declared:
        classes = [str(c) for c in classes]
    else:
        classes = _sorted_names(set().union(*bags, names))
    index = {c: i for i, c in enumerate(classes)}
    _all_known(path, where, CANDIDATES, ((row, name) for row, bag in zip(first, bags) for name in bag), index)
    distinct_S = np.zeros((len(bags), len(classes)), dtype=bool)
    rows = np.repeat(np.arange(len(bags)), [len(b) for b in bags])
    distinct_S[rows, [index[name] for bag in bags for name in bag]] = True
    S = distinct_S[bag_of]
    y = None
    if has_labels:
        _all_known(path, where, LABEL, zip(label_first, names), index)
        y = np.array([index[name] for name in names], dtype=np.int64)[label_of]
    features = [c for c in frame.columns if c not in (CANDIDATES, LABEL, ID)]
    X = np.column_stack([_numeric(path, where, frame[c]) for c in features]) if features else np.empty((len(frame), 0))
    if X.shape[1] == 0:
        raise DataFileError(f"{path}: no feature columns besides {CANDIDATES!r}, {LABEL!r} and {ID!r}")
    info = {"feature_names": [str(c) for c in features], "declared_classes": declared}
    return X, S, y, np.asarray(classes, dtype=str), info, _ids(path, where, frame[ID]) if ID in frame.columns else None


def _ids(path, where, column):
    """The row keys as text; a missing or repeated key is an error naming its row."""
    missing = column.isna().to_numpy()
    if missing.any():
        raise DataFileError(f"{path}, {where(int(np.argmax(missing)))}: column {ID!r}: the row key is missing")
    ids = column.astype(str).to_numpy(dtype=object)
    repeated = pd.Series(ids).duplicated().to_numpy()
    if repeated.any():
        row = int(np.argmax(repeated))
        raise DataFileError(f"{path}, {where(row)}: column {ID!r}: the key {ids[row]!r} is used by an earlier row")
    return ids


def _distinct(column):
    """Each row's position among the column's distinct cells, each distinct cell's first row, and the cells.

    A million rows hold a few thousand distinct bags: each is read once, and
    an error names the first row where it occurs, as a row-by-row reading would.
    """
    keys = column.map(_hashable) if column.dtype == object else column
    of, distinct = pd.factorize(keys, use_na_sentinel=False)  # in order of first occurrence
    first = np.unique(of, return_index=True)[1]
    return of, first.tolist(), list(distinct)


def _hashable(value):
    """A Parquet list cell as a tuple: lists and arrays are not hashable, and factorize needs keys that are."""
    return tuple(value) if isinstance(value, (list, np.ndarray)) else value


def _bag(path, where, row, value):
    """The set of label names in one ``candidates`` cell (empty for a missing cell)."""
    if not isinstance(value, (str, list, tuple, np.ndarray)) and pd.isna(value):
        return set()
    names = value.split(SEPARATOR) if isinstance(value, str) else list(value)
    names = [_name(v) for v in names]
    if isinstance(value, str) and value.strip() and any(n == "" for n in names):
        raise InvalidDataError(
            f"{path}, {where(row)}: column {CANDIDATES!r}: {value!r} has an empty label name "
            f"(labels are separated by a single '{SEPARATOR}')"
        )
    return {n for n in names if n != ""}


def check_candidates(path, column, where=at_row):
    """Refuse a ``candidates`` column that cannot be read as bags, whatever the classes: an empty label name,
    or a cell listing labels with another separator (:func:`_check_separators`)."""
    _, first, cells = _distinct(column)
    names = set().union(*(_bag(path, where, row, value) for row, value in zip(first, cells)))
    _check_separators(path, where, first, cells, names)


_OTHER_SEPARATORS = (",", ";")


def _check_separators(path, where, rows, cells, names):
    """Refuse a text cell that reads as a list of labels with another separator than :data:`SEPARATOR`.

    ``1,2`` or ``cat; dog`` would otherwise become one class of its own,
    silently.  A comma or semicolon in a text cell is refused; spaces only
    where every word is a number or a label found elsewhere (``cat dog``
    with ``cat`` and ``dog`` known; ``red car`` stays a name).  A label whose
    name really holds one of them is given in a Parquet list column.
    """
    for row, value in zip(rows, cells):
        if not isinstance(value, str):
            continue
        for name in (n.strip() for n in value.split(SEPARATOR)):
            words = name.split()
            found = next((sep for sep in _OTHER_SEPARATORS if sep in name), None)
            if found is None and len(words) > 1 and all(w.lstrip("-").isdigit() or w in names for w in words):
                found = " "
            if found is not None:
                parts = [w.strip() for w in (name.split(found) if found != " " else words)]
                raise InvalidDataError(
                    f"{path}, {where(row)}: column {CANDIDATES!r}: {value!r} reads as labels separated by "
                    f"{found!r}, but candidate labels are separated by '{SEPARATOR}' (write "
                    f"{value.replace(name, SEPARATOR.join(parts))!r}); a label whose name holds {found!r} goes "
                    "in a Parquet list column"
                )


def _name(value):
    """A label name as text; integral numbers lose their '.0'."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        value = int(value)
    return str(value).strip()


def _labels(path, where, column):
    """The true labels as :func:`_distinct` gives them, with each distinct label's name."""
    missing = column.isna().to_numpy()
    if missing.any():
        raise InvalidDataError(
            f"{path}, {where(int(np.argmax(missing)))}: column {LABEL!r}: the true label is missing "
            f"({int(missing.sum())} row(s)); give every row a label or drop the column"
        )
    of, first, distinct = _distinct(column)
    return of, first, [_name(v) for v in distinct]


def _sorted_names(names):
    if all(n.lstrip("-").isdigit() for n in names):
        return sorted(names, key=int)
    return sorted(names)


def _all_known(path, where, column, pairs, index):
    for row, name in pairs:
        if name not in index:
            shown = ", ".join(list(index)[:30]) + (", ..." if len(index) > 30 else "")
            raise InvalidDataError(
                f"{path}, {where(row)}: column {column!r}: label {name!r} is not a class (classes: {shown})"
            )


def _numeric(path, where, column):
    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.argmax(bad))
        value = "an empty cell" if pd.isna(column.iloc[row]) else repr(str(column.iloc[row]))
        raise InvalidDataError(
            f"{path}, {where(row)}: feature column {column.name!r}: {value} is not a finite number "
            f"({int(bad.sum())} such row(s))"
        )
    return values

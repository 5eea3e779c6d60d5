"""PALM-lab MATLAB files: features, candidate bags and optionally true labels.

Files of this family differ in layout: the variables sit at the top level or
inside one struct variable, bags are stored l x n or n x l, dense or sparse,
and they are called ``data``, ``partial_target`` and ``target`` unless the
caller names them (``variables``; :func:`parse_mat_variables` reads the
command line's ``--mat-variables``).  The loader accepts all of these and
records in ``info`` which layout and names it found.  MATLAB v4 and v5/v7
files are read (:func:`scipy.io.loadmat`); v7.3 (HDF5) files are not.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import scipy.io
import scipy.sparse

from ..errors import DataFileError, InvalidDataError, InvalidParameterError
from .dataset import at_row

DEFAULT_NAMES = {"features": "data", "partial_labels": "partial_target", "labels": "target"}
REQUIRED = ("features", "partial_labels")
OPTION = "--mat-variables"
OPTION_FORMAT = "features=NAME,partial_labels=NAME,labels=NAME"


def parse_mat_variables(text) -> dict:
    """The variable names given as ``features=NAME,partial_labels=NAME,labels=NAME``.

    Any key may be left out: its default name (:data:`DEFAULT_NAMES`) is
    searched.  The result is what :func:`pll.load_dataset` takes as
    ``variables``.  A malformed part, a key given twice or an unknown key
    raises :class:`~pll.errors.InvalidParameterError` naming it.

    Examples
    --------
    >>> parse_mat_variables("features=features, partial_labels=p_labels,labels=logitlabels")
    {'features': 'features', 'partial_labels': 'p_labels', 'labels': 'logitlabels'}
    """
    variables = {}
    for part in str(text).split(","):
        key, sep, name = (s.strip() for s in part.partition("="))
        if not (sep and key and name):
            raise InvalidParameterError(f"{OPTION}: {part.strip()!r} is not KEY=NAME (expected {OPTION_FORMAT})")
        if key in variables:
            raise InvalidParameterError(f"{OPTION}: {key!r} is given twice")
        variables[key] = name
    mat_variable_names(variables, OPTION)
    return variables


def mat_variable_names(variables, where, found=None) -> dict:
    """The name in the file of each key: ``variables`` over :data:`DEFAULT_NAMES`.

    ``where`` starts every error message; ``found``, the file's variables, ends it.
    """
    tail = f"; the file has {found}" if found is not None else ""
    if variables is None:
        variables = {}
    if not isinstance(variables, Mapping):
        raise InvalidParameterError(
            f"{where}: the variable names must be a mapping such as {{'features': 'X'}}, "
            f"got {type(variables).__name__}{tail}"
        )
    for key, name in variables.items():
        if key not in DEFAULT_NAMES:
            raise InvalidParameterError(
                f"{where}: unknown key {key!r}; the keys are {', '.join(DEFAULT_NAMES)}, "
                f"as in {OPTION} {OPTION_FORMAT}{tail}"
            )
        if not isinstance(name, str) or not name.strip():
            raise InvalidParameterError(f"{where}: {key} must name a variable, got {name!r}{tail}")
    names = {**DEFAULT_NAMES, **{k: v.strip() for k, v in variables.items()}}
    for key in DEFAULT_NAMES:
        same = [k for k in DEFAULT_NAMES if names[k] == names[key]]
        if len(same) > 1:
            raise InvalidParameterError(f"{where}: {' and '.join(same)} both name the variable {names[key]!r}{tail}")
    return names


def read_palm_mat(path, variables=None):
    """Read the arrays of a PALM ``.mat`` file.

    Parameters
    ----------
    path : Path
    variables : dict, optional
        The file's names for ``features``, ``partial_labels`` and ``labels``
        (see :func:`parse_mat_variables`); a named variable must exist, a key
        left out falls back to its default name (and ``labels`` is optional).

    Returns
    -------
    X : ndarray of shape (n, d)
    S : ndarray of shape (n, l)
        Bag matrix as stored (0/1 values, not yet checked).
    y : ndarray of shape (n,) of int, or None
        True labels when the file has them.
    info : dict
        The layout found: ``struct`` (variable name or None), ``bags_stored``
        (``"l x n"`` or ``"n x l"``), ``sparse`` (names stored sparse) and
        ``variables`` (the name read for each key).
    """
    found = _read(path)
    names = mat_variable_names(variables, f"{path}: {OPTION}", _describe(found) or "no variables")
    needed = [k for k in DEFAULT_NAMES if k in REQUIRED or k in (variables or {})]
    arrays, struct = _find(path, found, names, needed)
    X = _dense(path, names["features"], arrays["features"])
    if X.ndim != 2:
        raise InvalidDataError(f"{path}: field {names['features']!r} must be a matrix, got shape {X.shape}")
    n = X.shape[0]
    S, stored = _rows_first(path, names, "partial_labels", n, arrays)
    y = None
    if "labels" in arrays:
        T, _ = _rows_first(path, names, "labels", n, arrays)
        if T.shape != S.shape:
            raise InvalidDataError(
                f"{path}: field {names['labels']!r} has {T.shape[1]} classes "
                f"but {names['partial_labels']!r} has {S.shape[1]}"
            )
        y = _one_hot_labels(path, names["labels"], T)
    info = {
        "struct": struct,
        "bags_stored": stored,
        "sparse": sorted(names[k] for k, a in arrays.items() if scipy.sparse.issparse(a)),
        "variables": {k: names[k] for k in arrays},
    }
    return X, S, y, info


def _read(path):
    try:
        mat = scipy.io.loadmat(path)
    except NotImplementedError:
        raise DataFileError(
            f"{path}: MATLAB v7.3 (HDF5) files are not supported; save the file with -v7"
        ) from None
    except Exception as exc:  # scipy raises many types on corrupt or truncated files
        raise DataFileError(f"{path}: not a readable MATLAB file ({type(exc).__name__}: {exc})") from None
    return {k: v for k, v in mat.items() if not k.startswith("__")}


def _find(path, variables, names, needed):
    """The arrays by key, from the top level or from the one struct variable holding the ``needed`` ones."""

    def holds(scope):
        return all(names[k] in scope for k in needed)

    if holds(variables):
        scope, struct = variables, None
    else:
        holding = [name for name, v in variables.items() if _is_struct(v) and holds(v.dtype.names)]
        if len(holding) > 1:
            raise DataFileError(
                f"{path}: struct variables {', '.join(holding)} all hold the fields "
                f"{', '.join(names[k] for k in needed)}; keep only one"
            )
        if not holding:
            raise _missing(path, variables, names, needed)
        struct = holding[0]
        scope = {f: variables[struct][f].flat[0] for f in variables[struct].dtype.names}
    return {k: scope[names[k]] for k in DEFAULT_NAMES if names[k] in scope}, struct


def _missing(path, variables, names, needed):
    """The error for needed names not found, relative to the top level or the struct that holds most of them."""
    scopes = {None: variables, **{name: v.dtype.names for name, v in variables.items() if _is_struct(v)}}
    best = max(scopes, key=lambda s: sum(names[k] in scopes[s] for k in needed))  # ties: the top level
    missing = ", ".join(f"{names[k]} ({k})" for k in needed if names[k] not in scopes[best])
    place = "at the top level or in one struct" if best is None else f"beside the others in struct {best}"
    return DataFileError(
        f"{path}: missing variable(s) {missing}, {place}; the file has {_describe(variables) or 'no variables'}; "
        f"name the file's variables with {OPTION} {OPTION_FORMAT} (labels optional)"
    )


def _is_struct(v):
    return isinstance(v, np.ndarray) and v.dtype.names is not None and v.size == 1


def _describe(variables):
    parts = []
    for name, v in sorted(variables.items()):
        if _is_struct(v):
            parts.append(f"{name} (struct with fields {', '.join(v.dtype.names)})")
        else:
            parts.append(f"{name} ({'x'.join(map(str, np.shape(v)))})")
    return ", ".join(parts)


def _dense(path, name, a):
    try:
        return np.asarray(a.toarray() if scipy.sparse.issparse(a) else a, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidDataError(f"{path}: field {name!r} holds non-numeric values") from None


def _rows_first(path, names, key, n, arrays):
    """The array of ``key`` with one row per example; stored l x n (the PALM convention) or n x l."""
    field = names[key]
    M = _dense(path, field, arrays[key])
    if M.ndim != 2:
        raise InvalidDataError(f"{path}: field {field!r} must be a matrix, got shape {M.shape}")
    if M.shape[1] == n:  # also when square: the PALM convention wins
        return M.T, "l x n"
    if M.shape[0] == n:
        return M, "n x l"
    raise InvalidDataError(
        f"{path}: {names['features']!r} has {n} rows but {field!r} is {M.shape[0]} x {M.shape[1]} "
        "(row counts differ in either orientation)"
    )


def _one_hot_labels(path, field, T):
    ones = (T != 0).sum(axis=1)
    bad = ones != 1
    if bad.any():
        row = int(np.argmax(bad))
        raise InvalidDataError(
            f"{path}, {at_row(row)}: field {field!r} must mark exactly one true label per row, "
            f"this row marks {int(ones[row])} ({int(bad.sum())} such row(s))"
        )
    return np.argmax(T != 0, axis=1).astype(np.int64)

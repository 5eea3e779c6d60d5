"""PALM-lab MATLAB files: ``data``, ``partial_target`` and optionally ``target``.

Files of this family differ in layout: the fields sit at the top level or
inside one struct variable, bags are stored l x n or n x l, dense or sparse.
The loader accepts all of these and records in ``info`` which layout it found.
"""

from __future__ import annotations

import numpy as np
import scipy.io
import scipy.sparse

from ..errors import DataFileError, InvalidDataError

REQUIRED = ("data", "partial_target")
OPTIONAL = ("target",)


def read_palm_mat(path):
    """Read the arrays of a PALM ``.mat`` file.

    Returns
    -------
    X : ndarray of shape (n, d)
    S : ndarray of shape (n, l)
        Bag matrix as stored (0/1 values, not yet checked).
    y : ndarray of shape (n,) of int, or None
        True labels when the file has ``target``.
    info : dict
        The layout found: ``struct`` (variable name or None), ``bags_stored``
        (``"l x n"`` or ``"n x l"``), ``sparse`` (fields stored sparse).
    """
    variables = _read(path)
    fields, struct = _find_fields(path, variables)
    X = _dense(path, fields, "data")
    if X.ndim != 2:
        raise InvalidDataError(f"{path}: field 'data' must be a matrix, got shape {X.shape}")
    n = X.shape[0]
    S, stored = _rows_first(path, "partial_target", _dense(path, fields, "partial_target"), n)
    y = None
    if "target" in fields:
        T, _ = _rows_first(path, "target", _dense(path, fields, "target"), n)
        if T.shape != S.shape:
            raise InvalidDataError(
                f"{path}: field 'target' has {T.shape[1]} classes but 'partial_target' has {S.shape[1]}"
            )
        y = _one_hot_labels(path, T)
    info = {
        "struct": struct,
        "bags_stored": stored,
        "sparse": sorted(k for k in (*REQUIRED, *OPTIONAL) if k in fields and scipy.sparse.issparse(fields[k])),
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


def _find_fields(path, variables):
    """The three fields at the top level, or inside the one struct variable holding them."""
    if all(f in variables for f in REQUIRED):
        return variables, None
    structs = {name: v for name, v in variables.items() if _is_struct(v)}
    holding = [name for name, v in structs.items() if all(f in v.dtype.names for f in REQUIRED)]
    if len(holding) > 1:
        raise DataFileError(
            f"{path}: struct variables {', '.join(holding)} all hold the fields "
            f"{', '.join(REQUIRED)}; keep only one"
        )
    if holding:
        s = structs[holding[0]]
        return {f: s[f].flat[0] for f in s.dtype.names}, holding[0]
    raise DataFileError(
        f"{path}: missing field(s) {', '.join(f for f in REQUIRED if f not in variables)} "
        f"(needed: {', '.join(REQUIRED)}, optional: {', '.join(OPTIONAL)}); "
        f"found {_describe(variables) or 'no variables'}"
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


def _dense(path, fields, name):
    a = fields[name]
    try:
        return np.asarray(a.toarray() if scipy.sparse.issparse(a) else a, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidDataError(f"{path}: field '{name}' holds non-numeric values") from None


def _rows_first(path, field, M, n):
    """``M`` with one row per example; stored l x n (the PALM convention) or n x l."""
    if M.ndim != 2:
        raise InvalidDataError(f"{path}: field '{field}' must be a matrix, got shape {M.shape}")
    if M.shape[1] == n:  # also when square: the PALM convention wins
        return M.T, "l x n"
    if M.shape[0] == n:
        return M, "n x l"
    raise InvalidDataError(
        f"{path}: 'data' has {n} rows but '{field}' is {M.shape[0]} x {M.shape[1]} "
        "(row counts differ in either orientation)"
    )


def _one_hot_labels(path, T):
    ones = (T != 0).sum(axis=1)
    bad = ones != 1
    if bad.any():
        row = int(np.argmax(bad))
        raise InvalidDataError(
            f"{path}: field 'target' must mark exactly one true label per row; "
            f"row {row} marks {int(ones[row])} ({int(bad.sum())} such row(s))"
        )
    return np.argmax(T != 0, axis=1).astype(np.int64)

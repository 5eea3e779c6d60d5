"""One validation layer: features, candidate sets, class labels, evaluated arrays and estimator parameters.

Every check raises a :mod:`pll.errors` type with one line that names what is
wrong and the first row where it is wrong, so that the data set type, the
noise models, the neighbor search, the estimators and the evaluation all
refuse bad input in the same words.  Estimators validate their parameters at
``fit`` against the ``_parameter_constraints`` they declare (scikit-learn's
machinery, re-raised as :class:`~pll.errors.InvalidParameterError`).

Only numpy is imported here: the data set type and the command line use these
checks without paying for scikit-learn.  Like all of :mod:`pll.utils`, this
module imports nothing of the library above it but :mod:`pll.errors`; a check
that needs a higher layer (the kNN backends) is added to :func:`check_params`
by that layer (:func:`add_parameter_check`, from :mod:`pll.utils._parameter_checks`).
"""

from __future__ import annotations

import sys
from collections.abc import Set

import numpy as np

from ..errors import InvalidDataError, InvalidParameterError, NonNumericDataError
from ._parameter_checks import PARAMETER_CHECKS, add_parameter_check  # noqa: F401  (re-exported)


def at_row(row) -> str:
    """How an error names a row of an array, a table or a binary file: its 0-based position."""
    return f"row {row}"


def _prefix(source):
    return f"{source}: " if source else ""


def is_sparse(X):
    """Whether ``X`` is a scipy sparse matrix, without importing scipy."""
    sparse = sys.modules.get("scipy.sparse")  # a sparse matrix cannot exist before scipy.sparse is imported
    return sparse is not None and sparse.issparse(X)


def check_features(X, what, *, where=at_row, allow_empty=False):
    """``X`` as a finite, C-contiguous 2-d float array, or an :class:`InvalidDataError` naming the first bad row.

    ``what`` starts every message (e.g. ``"query rows"`` or a file name);
    ``where(row)`` names a 0-based row (a text file's loader also names its line).
    A float32 array stays float32; other numbers become float64.  No rows is
    an error unless ``allow_empty``.
    """
    if is_sparse(X):
        raise InvalidDataError(f"{what}: sparse input is not supported; pass a dense array (X.toarray())")
    try:
        X = np.asarray(X)
        if np.iscomplexobj(X):
            raise InvalidDataError(f"{what}: Complex data not supported (features of dtype {X.dtype})")
        if not np.issubdtype(X.dtype, np.floating):
            X = X.astype(np.float64)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, InvalidDataError):
            raise
        raise NonNumericDataError(f"{what}: features are not numeric ({exc})") from None
    if X.ndim != 2:
        hint = ". Reshape your data: X.reshape(-1, 1) for one feature, X.reshape(1, -1) for one row" * (X.ndim == 1)
        raise InvalidDataError(f"{what}: features must be a 2-d array, got shape {X.shape}{hint}")
    if X.shape[0] == 0 and not allow_empty:
        raise InvalidDataError(f"{what}: no rows (shape={X.shape})")
    if X.shape[1] == 0:
        raise InvalidDataError(
            f"{what}: found 0 feature(s) (shape={X.shape}) while a minimum of 1 is required (no columns)"
        )
    bad = ~np.isfinite(X).all(axis=1)
    if bad.any():
        row = int(np.argmax(bad))
        column = int(np.argmax(~np.isfinite(X[row])))
        raise InvalidDataError(
            f"{what}: {int(bad.sum())} row(s) have a feature that is NaN or infinite "
            f"(first at {where(row)}, feature {column})"
        )
    return np.ascontiguousarray(X)


def check_queries(X_query, n_features):
    """Query rows as :func:`check_features` does, with the training rows' number of features."""
    Q = check_features(X_query, "query rows")
    if Q.shape[1] != n_features:
        raise InvalidDataError(f"query rows have {Q.shape[1]} features but training rows have {n_features}")
    return Q


def check_bags(S, n_rows=None, *, what="candidate bags", source=None, where=at_row):
    """A 0/1 or bool candidate matrix of shape (n_rows, l) as bool; empty bags pass (callers decide)."""
    S = np.asarray(S)
    if S.ndim != 2:
        raise InvalidDataError(f"{_prefix(source)}{what} must be a 2-d array, got shape {S.shape}")
    if n_rows is not None and S.shape[0] != n_rows:
        raise InvalidDataError(f"{_prefix(source)}{n_rows} feature rows but {S.shape[0]} {what} (row counts differ)")
    if S.dtype == bool:
        return S
    try:
        not01 = ~np.isin(S, (0, 1))
    except TypeError:
        not01 = np.ones(S.shape, dtype=bool)
    if not01.any():
        row, col = np.argwhere(not01)[0]
        value = S[row, col]
        raise InvalidDataError(
            f"{_prefix(source)}{what} must hold only 0/1 values "
            f"(found {value.item() if isinstance(value, np.generic) else value!r} at {where(int(row))}, "
            f"class column {col})"
        )
    return S.astype(bool)


def check_class_indices(y, n_classes, *, what="true labels", source=None, where=at_row):
    """Class indices in ``[0, n_classes)`` as an int64 vector; an error names the first row outside."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise InvalidDataError(f"{_prefix(source)}{what} must be a 1-d array, got shape {y.shape}")
    if y.size and not np.issubdtype(y.dtype, np.integer):
        raise InvalidDataError(f"{_prefix(source)}{what} must be class indices (integers)")
    y = y.astype(np.int64)
    out = (y < 0) | (y >= n_classes)
    if out.any():
        row = int(np.argmax(out))
        raise InvalidDataError(
            f"{_prefix(source)}true label {int(y[row])} at {where(row)} is not a class index in [0, {n_classes})"
        )
    return y


# --- Evaluated arrays: predicted labels, reject decisions, scores, rejection costs -------------


def check_lambdas(lambdas):
    """Costs of a rejection λ as a list of floats: finite, >= 0, at least one, distinct at two decimals.

    Two decimals is the precision that metric names carry (``risk_0.10``,
    :func:`pll.evaluation.metric_names.risk_name`): two λ that coincide there
    would be one metric.
    """
    try:
        lams = np.asarray(lambdas, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise InvalidParameterError(f"lambdas must be numbers, got {lambdas!r}") from None
    if lams.size == 0 or not np.all(np.isfinite(lams)) or np.any(lams < 0):
        raise InvalidParameterError(f"lambdas must be finite numbers >= 0, got {list(lambdas)!r}")
    lams = [float(lam) for lam in lams]
    spelled = [f"{lam:.2f}" for lam in lams]
    if len(set(spelled)) != len(spelled):
        raise InvalidParameterError(f"lambdas {list(lambdas)!r} coincide at two decimals")
    return lams


def check_vector(values, name, n=None):
    """``values`` as a 1-d array (dtype kept), of ``n`` rows when ``n`` is given; ``name`` starts the message."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InvalidDataError(f"{name} must be a 1-d array, got shape {arr.shape}")
    if n is not None and arr.size != n:
        raise InvalidDataError(f"lengths differ: {name} has {arr.size} rows, expected {n}")
    return arr


def check_labels(values, name, n=None, n_classes=None):
    """Class indices (integers, or floats that are whole) as an int64 vector: >= 0, below ``n_classes`` when given."""
    arr = check_vector(values, name, n)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating) or not np.all(arr == np.round(arr)):
            raise InvalidDataError(f"{name} must hold integer class indices, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    bad = np.flatnonzero((arr < 0) | ((arr >= n_classes) if n_classes is not None else False))
    if bad.size:
        limit = f"[0, {n_classes})" if n_classes is not None else ">= 0"
        raise InvalidDataError(f"{name}[{bad[0]}] = {arr[bad[0]]} is not a class index {limit}")
    return arr


def check_mask(values, name, n):
    """A bool vector of ``n`` rows (a reject decision, a correctness flag); other dtypes are refused, not cast."""
    arr = check_vector(values, name, n)
    if arr.dtype != bool:
        raise InvalidDataError(f"{name} must be a boolean array, got dtype {arr.dtype}")
    return arr


def check_scores(values, name, n=None):
    """Finite scores as a float64 vector; an error names the first score that is NaN or infinite."""
    arr = check_vector(values, name, n).astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise InvalidDataError(f"{name}[{bad[0]}] = {arr[bad[0]]} is not a finite score")
    return arr


def check_nonempty(n, what="rows"):
    """Raise :class:`InvalidDataError` ("no rows to evaluate") when ``n`` is 0."""
    if n == 0:
        raise InvalidDataError(f"no {what} to evaluate")


# --- Candidate sets in the forms an estimator's fit takes ----------------------------------------


def label_sets(S):
    """``S`` as a list of label sets when every row is a set or frozenset, else None."""
    if isinstance(S, (list, tuple)) or (isinstance(S, np.ndarray) and S.ndim == 1 and S.dtype == object):
        rows = list(S)
        if rows and all(isinstance(row, Set) for row in rows):
            return rows
    return None


def _sorted_classes(labels, what):
    try:
        return np.asarray(sorted(set(labels)))
    except TypeError:
        raise InvalidDataError(f"{what}: labels must be comparable with each other to be sorted") from None


def _check_discrete_labels(y, what):
    """1-d labels: numbers must be finite and discrete (scikit-learn's "Unknown label type" otherwise)."""
    if y.dtype.kind == "f":
        bad = ~np.isfinite(y)
        if bad.any():
            raise InvalidDataError(f"{what}: label {y[np.argmax(bad)]} at row {int(np.argmax(bad))} is NaN or infinite")
        frac = y != np.round(y)
        if frac.any():
            raise InvalidDataError(
                f"{what}: Unknown label type: continuous ({y[np.argmax(frac)]} at row {int(np.argmax(frac))}); "
                "the labels must be discrete classes"
            )
    elif y.dtype.kind not in "biuUSO":
        raise InvalidDataError(f"{what}: Unknown label type: labels of dtype {y.dtype}")


def empty_as_all(bags):
    """``bags`` (bool, (n, l)) with every empty row read as all classes: how every method treats an empty bag."""
    return np.where(bags.any(axis=1, keepdims=True), bags, True)


def encode_bags(S, n_rows, classes=None, *, what="candidate sets", unknown="error"):
    """Candidate sets in any form ``fit`` takes, as a bool matrix over ``classes``, and the classes.

    Forms:

    * a 2-d 0/1 or bool matrix, dense or scipy sparse: column ``j`` is class ``j``
      (learned classes: ``arange(l)``);
    * a sequence of label sets, one ``set``/``frozenset`` of hashable labels per row;
    * a 1-d array of labels, one candidate per row (fully labelled rows).

    Parameters
    ----------
    S : candidate sets of ``n_rows`` rows
    n_rows : int
    classes : ndarray of shape (l,), optional
        The fitted classes (sorted); None learns them: ``arange(l)`` for a
        matrix, the sorted distinct labels otherwise.
    what : str
        What ``S`` is, to start messages.
    unknown : {"error", "ignore"}
        What a label outside ``classes`` does: raise, or stay out of the row's
        set (a label the model cannot predict, when scoring).

    Returns
    -------
    bags : bool ndarray of shape (n_rows, l)
    classes : ndarray of shape (l,)
    """
    if S is None:
        raise InvalidDataError(f"no {what}: fit requires y to be passed, but the target y is None")
    if is_sparse(S):
        S = S.toarray()
    sets = label_sets(S)
    if sets is None:
        S = np.asarray(S)
        if S.ndim == 2:
            bags = check_bags(S, n_rows, what=what)
            if classes is None:
                return bags, np.arange(bags.shape[1])
            if bags.shape[1] != len(classes):
                raise InvalidDataError(f"{what} have {bags.shape[1]} classes, the model {len(classes)}")
            return bags, classes
        if S.ndim != 1:
            raise InvalidDataError(
                f"{what} must be a 2-d matrix, a sequence of label sets or 1-d labels, got shape {S.shape}"
            )
        _check_discrete_labels(S, what)
        sets = [(label,) for label in S.tolist()]
    if len(sets) != n_rows:
        raise InvalidDataError(f"{n_rows} feature rows but {len(sets)} {what} (row counts differ)")
    rows = np.repeat(np.arange(n_rows), [len(labels) for labels in sets])
    flat = [label for labels in sets for label in labels]
    if classes is None:
        classes = _sorted_classes(flat, what)
        if classes.size == 0:
            raise InvalidDataError(f"{what}: no labels at all")
    cols = class_positions(flat, classes, what, unknown=unknown, rows=rows)
    bags = np.zeros((n_rows, len(classes)), dtype=bool)
    known = cols >= 0
    bags[rows[known], cols[known]] = True
    return bags, classes


def class_positions(labels, classes, what, *, unknown="error", rows=None):
    """Position of each label in ``classes`` (int64); an error names the first unknown label's row.

    ``unknown="ignore"`` gives -1 for labels outside ``classes``; ``rows``
    gives the row of each label when it is not its position.
    """
    column = {label: j for j, label in enumerate(np.asarray(classes).tolist())}
    labels = labels.tolist() if isinstance(labels, np.ndarray) else list(labels)
    cols = np.fromiter((column.get(label, -1) for label in labels), dtype=np.int64, count=len(labels))
    if unknown == "error" and (cols < 0).any():
        i = int(np.argmax(cols < 0))
        raise InvalidDataError(
            f"{what}: row {i if rows is None else int(rows[i])} holds {labels[i]!r}, "
            f"not one of the classes {list(column)}"
        )
    return cols


# --- Estimators: parameters and feature matrices ------------------------------------------------


def _is_bool(value):
    return isinstance(value, (bool, np.bool_))


def is_positive_int(value) -> bool:
    """Whether ``value`` is a whole number >= 1; a bool is not one (``True`` is an ``int`` to Python, never a count)."""
    return not _is_bool(value) and isinstance(value, (int, np.integer)) and value >= 1


def check_positive_int(value, name) -> int:
    """``value`` as an ``int`` when :func:`is_positive_int`, else one :class:`InvalidParameterError` line naming ``name``."""
    if not is_positive_int(value):
        raise InvalidParameterError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_fraction(value, name, *, allow_none=False):
    """``value`` as a ``float`` strictly between 0 and 1 (a share of rows, a miscoverage level), else one line naming ``name``.

    ``allow_none``: None passes (an option that may be off).
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not 0 < value < 1:
        raise InvalidParameterError(f"{name} must be a number in (0, 1){' or None' * allow_none}, got {value!r}")
    return float(value)


def check_fitted(estimator, attribute, message=None):
    """Raise :class:`~pll.errors.NotFittedError` unless ``fit`` has set ``attribute`` on ``estimator``.

    The message says which estimator and what to do (``message`` replaces it
    where "fit" is not the step that is missing).
    """
    if not hasattr(estimator, attribute):
        from ..errors import NotFittedError  # defined on first use: it subclasses scikit-learn's

        raise NotFittedError(message or f"{type(estimator).__name__} is not fitted: call fit first")


def check_params(estimator):
    """Validate ``estimator``'s parameters against its ``_parameter_constraints``; call first thing in ``fit``.

    scikit-learn's constraints, re-raised as :class:`InvalidParameterError`;
    a bool passed for a number is refused too (``True`` is an ``int`` to
    Python, never a neighbor count); then the checks added with
    :func:`add_parameter_check`: an estimator with ``knn`` and
    ``knn_options`` gets its backend and options checked as the command line
    checks them (:func:`pll.neighbors.registry.check_knn_params`).
    """
    from sklearn.utils._param_validation import InvalidParameterError as SklearnInvalidParameterError

    name = type(estimator).__name__
    try:
        estimator._validate_params()
    except SklearnInvalidParameterError as exc:
        raise InvalidParameterError(str(exc)) from None
    params = estimator.get_params(deep=False)
    for param, constraints in estimator._parameter_constraints.items():
        value = params.get(param)
        if _is_bool(value) and not any(c in ("boolean", bool) for c in constraints):
            raise InvalidParameterError(
                f"The {param!r} parameter of {name} must not be a bool. Got {value!r} instead."
            )
    for parameter, check in list(PARAMETER_CHECKS.items()):
        if parameter in params:
            try:
                check(params)
            except InvalidParameterError as exc:
                raise InvalidParameterError(f"{name}: {exc}") from None


def check_X(estimator, X, *, reset, allow_empty=False):
    """Features for ``estimator`` as :func:`check_features` returns them, with scikit-learn's bookkeeping.

    ``reset=True`` (in ``fit``) sets ``n_features_in_`` and, for a data frame,
    ``feature_names_in_``; ``reset=False`` checks ``X`` against them.  The
    estimators compute in float64, so that is what comes back.
    """
    from sklearn.utils.validation import validate_data

    name = type(estimator).__name__
    Xa = check_features(X, f"{name}: {'training' if reset else 'query'} rows", allow_empty=allow_empty)
    try:
        validate_data(estimator, X, skip_check_array=True, reset=reset)
    except ValueError as exc:  # scikit-learn's feature name and count checks, made one line
        raise InvalidDataError(" ".join(str(exc).split())) from None
    return np.asarray(Xa, dtype=np.float64)

"""Typed errors for bad input.

Every error the project raises because of what a caller passed in derives from
:class:`PllError`, so a command-line front end can turn it into one line on
stderr instead of a traceback.  The subclasses say *what kind* of input was
wrong; the message says *which* file, column, row or parameter.

:class:`NotFittedError` also derives from scikit-learn's, so that code written
for scikit-learn estimators catches it; it is defined on first use, so that
``import pll.errors`` stays free of scikit-learn.
"""


class PllError(ValueError):
    """Base class of every error raised on bad input."""


class DataFileError(PllError):
    """A data file is missing, empty, corrupt or lacks the fields we need."""


class DatasetNotFoundError(PllError):
    """A data set name is neither a built-in name nor an existing file."""


class InvalidDataError(PllError):
    """Arrays have the wrong shape, type or values (NaN, empty bags, ...)."""


class NonNumericDataError(InvalidDataError, TypeError):
    """Features hold values that are not numbers (a TypeError too, as scikit-learn raises for them)."""


class InvalidParameterError(PllError):
    """An estimator, noise model or backend parameter is out of range."""


class NeighborsError(PllError):
    """A neighbor search or a precomputed neighbor result cannot serve a request."""


class ModelNotFoundError(PllError):
    """A model URI names no model, or a model that is not a pll model."""


class FilesFailedError(PllError):
    """Some files of a folder could not be scored; they are retried on the next run."""


class TrackingStoreError(PllError):
    """The MLflow tracking store named by a URI cannot be reached or written."""


class ClusterError(PllError):
    """A Dask cluster keeps losing the values a computation reads: its workers keep dying."""


class MissingExtraError(ImportError):
    """A part of the project was imported without the extra that installs its dependencies (its message names it)."""


def __getattr__(name):
    """Define :class:`NotFittedError` when first asked for: it subclasses scikit-learn's, imported then."""
    if name != "NotFittedError":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    class NotFittedError(PllError, SklearnNotFittedError):
        """An estimator was used before ``fit``."""

    NotFittedError.__module__, NotFittedError.__qualname__ = __name__, "NotFittedError"
    globals()["NotFittedError"] = NotFittedError
    return NotFittedError

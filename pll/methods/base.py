"""What every partial-label method shares: the prediction type and neighbor plumbing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator

from ..errors import InvalidDataError, InvalidParameterError, NotFittedError
from ..neighbors import NeighborResult, kneighbors
from ..progress import blocks, track

# Rows per block are chosen so that a block's (rows, k, l) work arrays stay near this size.
BLOCK_BYTES = 32 * 2**20


def row_blocks(n_rows, bytes_per_row):
    """Slices over ``n_rows`` whose per-block memory stays near :data:`BLOCK_BYTES`."""
    return blocks(n_rows, max(1, BLOCK_BYTES // max(int(bytes_per_row), 1)))


@dataclass(frozen=True, eq=False)
class RejectPrediction:
    """Predictions with a reject option.

    Attributes
    ----------
    labels : ndarray of shape (n,), int64
        Predicted class index of every row (also for rejected rows).
    accept : ndarray of shape (n,), bool
        False where the method abstains.
    score : ndarray of shape (n,), float64
        The method's confidence: higher means more certain; ``accept`` is
        ``score > threshold`` for the method's own threshold.
    guess : ndarray of shape (n,), bool
        True where the label was drawn at random among tied candidates.
    beliefs, plausibilities : ndarray of shape (n, l) or None
        DST-PLL's singleton beliefs and plausibilities.
    shares : ndarray of shape (n, l) or None
        PL-kNN's vote shares.
    """

    labels: np.ndarray
    accept: np.ndarray
    score: np.ndarray
    guess: np.ndarray
    beliefs: np.ndarray | None = None
    plausibilities: np.ndarray | None = None
    shares: np.ndarray | None = None

    def per_class(self):
        """The per-class arrays this method fills, by column prefix."""
        named = {"belief": self.beliefs, "plausibility": self.plausibilities, "share": self.shares}
        return {k: v for k, v in named.items() if v is not None}

    def to_frame(self, classes, y_true=None, rows=None):
        """A table with ``row``, ``y_true``, ``label``, ``accept``, ``score``, ``guess`` and per-class columns."""
        import pandas as pd

        n = self.labels.shape[0]
        cols = {
            "row": np.arange(n) if rows is None else np.asarray(rows),
            "y_true": np.full(n, -1, dtype=np.int64) if y_true is None else np.asarray(y_true, dtype=np.int64),
            "label": self.labels,
            "accept": self.accept,
            "score": self.score,
            "guess": self.guess,
        }
        for prefix, values in self.per_class().items():
            for j, name in enumerate(classes):
                cols[f"{prefix}_{name}"] = values[:, j]
        return pd.DataFrame(cols)


def check_bags(S, n_rows=None, what="candidate bags"):
    """Validate a candidate matrix; empty bags are allowed (they carry no evidence)."""
    S = np.asarray(S)
    if S.ndim != 2:
        raise InvalidDataError(f"{what} must be a 2-d array, got shape {S.shape}")
    if n_rows is not None and S.shape[0] != n_rows:
        raise InvalidDataError(f"{n_rows} feature rows but {S.shape[0]} {what} (row counts differ)")
    if S.dtype != bool:
        if not np.isin(S, (0, 1)).all():
            raise InvalidDataError(f"{what} must hold only 0/1 values")
        S = S.astype(bool)
    return S


class NeighborMethod(BaseEstimator):
    """Base of the kNN-based partial-label methods.

    Subclasses set :meth:`_n_neighbors_needed` and implement
    :meth:`_predict_block`, which turns neighbor indices and distances of a
    block of queries (with their candidate sets ``s̃``) into predictions.
    """

    _query_stream = 1
    _train_stream = 2

    def _n_neighbors_needed(self):
        raise NotImplementedError

    def _validate_params(self):
        k = self._n_neighbors_needed()
        if not isinstance(k, (int, np.integer)) or k < 1:
            raise InvalidParameterError(f"{type(self).__name__}: number of neighbors must be >= 1, got {k!r}")

    def fit(self, X, S, neighbors=None):
        """Store the training rows and bags (and their own neighbors, when precomputed).

        Parameters
        ----------
        X : array of shape (n, d)
        S : bool array of shape (n, l)
        neighbors : NeighborResult, optional
            The training rows' own neighbors (``kneighbors(X, None, k)``).
        """
        self._validate_params()
        X = np.asarray(X, dtype=np.float64)
        self.S_train_ = check_bags(S, X.shape[0])
        self.X_train_ = X
        self.n_classes_ = self.S_train_.shape[1]
        k = self._n_neighbors_needed()
        self._train_neighbors = (
            None if neighbors is None else neighbors.take(k, X.shape[0], self_excluded=True)
        )
        self._fit_derived()
        return self

    def _fit_derived(self):
        """Compute fitted state that follows from ``X_train_`` and ``S_train_`` (subclasses)."""

    def _check_fitted(self):
        if not hasattr(self, "S_train_"):
            raise NotFittedError(f"{type(self).__name__} is not fitted: call fit first")

    def _knn_options(self):
        return dict(getattr(self, "knn_params", None) or {})

    def _neighbors_for(self, X, neighbors):
        k = self._n_neighbors_needed()
        if neighbors is not None:
            return neighbors.take(k, None if X is None else len(X), self_excluded=X is None)
        if X is None:
            if self._train_neighbors is None:
                self._train_neighbors = kneighbors(self.X_train_, None, k, self.knn, **self._knn_options())
            return self._train_neighbors
        return kneighbors(self.X_train_, X, k, self.knn, **self._knn_options())

    def predict(self, X, neighbors=None):
        """Predicted class index of every row."""
        return self.predict_with_reject(X, neighbors=neighbors).labels

    def predict_with_reject(self, X, neighbors=None, candidates=None):
        """Predictions with the method's reject option.

        Parameters
        ----------
        X : array of shape (n, d)
        neighbors : NeighborResult, optional
            Precomputed neighbors of ``X`` among the training rows.
        candidates : bool array of shape (n, l), optional
            Each row's candidate set ``s̃``; the prediction stays inside it.
            Default: all classes (an empty row also means all classes).
        """
        self._check_fitted()
        X = np.asarray(X, dtype=np.float64)
        nb = self._neighbors_for(X, neighbors)
        n = nb.n_queries
        if candidates is None:
            cand = np.ones((n, self.n_classes_), dtype=bool)
        else:
            cand = check_bags(candidates, n, "query candidate sets")
            if cand.shape[1] != self.n_classes_:
                raise InvalidDataError(
                    f"query candidate sets have {cand.shape[1]} classes, the model {self.n_classes_}"
                )
            cand = np.where(cand.any(axis=1, keepdims=True), cand, True)
        return self._predict(nb, cand, self._query_stream, "predictions")

    def disambiguate(self):
        """Predictions for the training rows, each restricted to its own bag.

        Each row's neighbors exclude the row itself; a row with an empty bag
        is treated as if every class were a candidate.
        """
        self._check_fitted()
        nb = self._neighbors_for(None, None)
        cand = np.where(self.S_train_.any(axis=1, keepdims=True), self.S_train_, True)
        return self._predict(nb, cand, self._train_stream, "disambiguation")

    def _predict(self, nb, cand, stream, what):
        out = None
        for b in track(row_blocks(nb.n_queries, self._bytes_per_row(nb.k)), f"{type(self).__name__} {what}"):
            part = self._predict_block(nb.indices[b], nb.distances[b], cand[b], np.arange(b.start, b.stop), stream)
            if out is None:  # allocate once, then fill block by block: no concatenated copies
                out = {
                    name: None if v is None else np.empty((nb.n_queries, *v.shape[1:]), dtype=v.dtype)
                    for name, v in vars(part).items()
                }
            for name, values in out.items():
                if values is not None:
                    values[b] = getattr(part, name)
        return RejectPrediction(**out)

    def _bytes_per_row(self, k):
        return 8 * k * self.n_classes_

    def _predict_block(self, indices, distances, candidates, rows, stream):
        raise NotImplementedError

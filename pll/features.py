"""Feature pipelines: scikit-learn transformers fitted on training rows only."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.preprocessing import MinMaxScaler

from .data import PartialLabelDataset

from .errors import InvalidParameterError

FEATURE_PIPELINES = ("minmax",)


def make_features(name="minmax"):
    """A fresh, unfitted transformer for the named feature pipeline."""
    if name == "minmax":
        return MinMaxScaler()
    raise InvalidParameterError(
        f"unknown feature pipeline {name!r}: choose one of {', '.join(FEATURE_PIPELINES)}"
    )


@dataclass(frozen=True, eq=False)
class FeatureSplit:
    """A train/test split with its features transformed by a pipeline fitted on the training rows."""

    train: PartialLabelDataset
    test: PartialLabelDataset
    X_train: np.ndarray
    X_test: np.ndarray
    train_rows: np.ndarray
    test_rows: np.ndarray
    features: str


def featurize(ds, train_rows, test_rows, name="minmax"):
    """Fit the named feature pipeline on the training rows of ``ds`` and transform both parts."""
    train, test = ds.subset(train_rows), ds.subset(test_rows)
    transformer = make_features(name)
    X_train = np.asarray(transformer.fit_transform(train.X), dtype=np.float64)
    X_test = np.asarray(transformer.transform(test.X), dtype=np.float64)
    return FeatureSplit(train, test, X_train, X_test, np.asarray(train_rows), np.asarray(test_rows), name)

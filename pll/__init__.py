"""pll: partial-label learning with a reject option.

The library alone, free of orchestration and tracking: data sets, noise
models, features, neighbor search, the methods and their evaluation.
"""

from . import errors, evaluation, neighbors, noise
from .data import PartialLabelDataset, load_dataset, train_test_split
from .methods import PlKnn, RejectPrediction

__version__ = "0.1.0"

__all__ = [
    "PartialLabelDataset",
    "PlKnn",
    "RejectPrediction",
    "errors",
    "evaluation",
    "load_dataset",
    "neighbors",
    "noise",
    "train_test_split",
]

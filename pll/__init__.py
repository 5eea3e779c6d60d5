"""pll: partial-label learning with a reject option.

The library alone, free of orchestration and tracking: data sets, noise
models, features, neighbor search, the methods and their evaluation.
"""

from . import errors, evaluation, features, neighbors, noise
from .data import PartialLabelDataset, load_dataset, train_test_split
from .features import PlAknnPreprocessor
from .methods import DstPll, PlAknn, PlKnn, RejectPrediction
from .trust_score import TrustScore

__version__ = "0.1.0"

__all__ = [
    "DstPll",
    "PartialLabelDataset",
    "PlAknn",
    "PlAknnPreprocessor",
    "PlKnn",
    "RejectPrediction",
    "TrustScore",
    "errors",
    "evaluation",
    "features",
    "load_dataset",
    "neighbors",
    "noise",
    "train_test_split",
]

"""Data sets: the partial-label data set type, loaders and splits."""

from .dataset import PartialLabelDataset, validate_arrays
from .loaders import BUILTIN_NAMES, FILE_FORMATS, load_dataset
from .split import split_indices, train_test_split

__all__ = [
    "BUILTIN_NAMES",
    "FILE_FORMATS",
    "PartialLabelDataset",
    "load_dataset",
    "split_indices",
    "train_test_split",
    "validate_arrays",
]

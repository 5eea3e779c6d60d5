"""Data sets: the partial-label data set type, loaders, protocols and splits."""

from .dataset import PartialLabelDataset, one_hot, validate_arrays
from .loaders import BUILTIN_NAMES, FILE_FORMATS, check_source, load_dataset, load_run_data
from .mat import parse_mat_variables
from .protocol import PROTOCOLS, apply_protocol, dst_pll_protocol
from .split import split_indices, train_test_split, validation_indices

__all__ = [
    "BUILTIN_NAMES",
    "FILE_FORMATS",
    "PROTOCOLS",
    "PartialLabelDataset",
    "apply_protocol",
    "check_source",
    "dst_pll_protocol",
    "load_dataset",
    "load_run_data",
    "one_hot",
    "parse_mat_variables",
    "split_indices",
    "train_test_split",
    "validate_arrays",
    "validation_indices",
]

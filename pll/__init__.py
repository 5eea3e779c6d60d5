"""pll: partial-label learning with a reject option.

The library alone, free of orchestration and tracking: data sets, noise
models, features, neighbor search, the methods and their evaluation.
Public names are imported on first use (:mod:`pll._lazy`).
"""

from ._lazy import lazy_attributes

__version__ = "0.1.0"

_PUBLIC = {
    "ConformalSets": ".conformal",
    "DstPll": ".methods",
    "Ipal": ".methods",
    "PartialLabelDataset": ".data",
    "PlAknn": ".methods",
    "PlAknnPreprocessor": ".features",
    "PlClassifier": ".methods",
    "PlKnn": ".methods",
    "Proden": ".methods",
    "RejectPrediction": ".methods",
    "TrustScore": ".trust_score",
    "audit": ".audit",
    "bag_bounds": ".bag_bounds",
    "conformal": ".conformal",
    "errors": ".errors",
    "evaluation": ".evaluation",
    "experiment": ".experiment",
    "features": ".features",
    "load_dataset": ".data",
    "neighbors": ".neighbors",
    "noise": ".noise",
    "predict_with_reject": ".methods",
    "reasons": ".reasons",
    "train_test_split": ".data",
    "validation": ".validation",
}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_attributes(__name__, _PUBLIC)

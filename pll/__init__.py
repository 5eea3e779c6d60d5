"""pll: partial-label learning with a reject option.

The library alone, free of orchestration and tracking: data sets, noise
models, features, neighbor search, the methods and their evaluation.
Public names are imported on first use (:mod:`pll.utils._lazy`).
"""

from .utils._lazy import lazy_attributes

__version__ = "0.2.0"

_PUBLIC = {
    # estimators and their prediction type: import them from here
    "ConformalSets": ".reject.conformal",
    "DstPll": ".methods",
    "Ipal": ".methods",
    "PlAknn": ".methods",
    "PlAknnPreprocessor": ".preprocessing",
    "PlClassifier": ".methods",
    "PlKnn": ".methods",
    "Proden": ".methods",
    "CroSel": ".methods",
    "ViPll": ".methods",
    "SoftVoting": ".methods",
    "RejectPrediction": ".methods",
    "TrustScore": ".reject.trust_score",
    "predict_with_reject": ".methods",
    # data sets
    "PartialLabelDataset": ".data",
    "load_dataset": ".data",
    "train_test_split": ".data",
    # subpackages, by concern
    "audit": ".audit",
    "data": ".data",
    "errors": ".errors",
    "evaluation": ".evaluation",
    "experiment": ".experiment",
    "methods": ".methods",
    "neighbors": ".neighbors",
    "noise": ".noise",
    "preprocessing": ".preprocessing",
    "reject": ".reject",
    "reporting": ".reporting",
    "serving": ".serving",
    "utils": ".utils",
}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_attributes(__name__, _PUBLIC)

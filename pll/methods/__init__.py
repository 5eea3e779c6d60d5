"""The partial-label methods, each a scikit-learn style estimator, and the reasons their rejections give
(:mod:`pll.methods.reasons`, the vocabulary of every method's :class:`RejectPrediction`)."""

from ..errors import InvalidParameterError
from ..utils.validation import check_params
from ._base import NeighborMethod, RejectPrediction, predict_with_reject, without_support_test
from ._dst_pll import DstPll
from ._ipal import Ipal
from ._pl_aknn import PlAknn
from ._pl_classifier import PlClassifier
from ._pl_knn import PlKnn
from ._proden import Proden
from ._crosel import CroSel
from ._vi_pll import ViPll
from ._soft_voting import SoftVoting
from . import reasons

METHODS = {"pl_knn": PlKnn, "dst_pll": DstPll, "pl_aknn": PlAknn, "ipal": Ipal, "pl_classifier": PlClassifier,
           "proden": Proden, "crosel": CroSel, "vi_pll": ViPll, "soft_voting": SoftVoting}


def make_method(name, params=None, random_state=None):
    """An unfitted estimator of the named method with ``params`` and a seed, its parameters checked as ``fit`` does.

    So a grid or a command line refuses a bad value (``n_neighbors=0``, an
    unknown ``knn``) before anything runs.
    """
    try:
        cls = METHODS[name]
    except KeyError:
        raise InvalidParameterError(
            f"unknown method {name!r}: choose from {', '.join(METHODS)}"
        ) from None
    params = dict(params or {})
    unknown = set(params) - set(cls().get_params())
    if unknown:
        raise InvalidParameterError(f"method {name!r} has no parameter(s) {', '.join(sorted(unknown))}")
    estimator = cls(random_state=random_state).set_params(**params)  # set_params: a member's ``name__parameter`` too
    check_params(estimator)
    return estimator


__all__ = [
    "METHODS",
    "CroSel",
    "DstPll",
    "Ipal",
    "NeighborMethod",
    "PlAknn",
    "PlClassifier",
    "PlKnn",
    "Proden",
    "RejectPrediction",
    "SoftVoting",
    "ViPll",
    "make_method",
    "predict_with_reject",
    "reasons",
    "without_support_test",
]

"""Reject options beyond each method's own: trust scores and conformal prediction sets; one public module each.
"""

from ..utils._lazy import lazy_attributes

_PUBLIC = {
    "conformal": ".conformal",
    "trust_score": ".trust_score",
}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_attributes(__name__, _PUBLIC)

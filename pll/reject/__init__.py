"""Reject options beyond each method's own: trust scores, conformal prediction sets, reasons for a
rejection, and risk bounds from candidate bags alone; one public module each.
"""

from ..utils._lazy import lazy_attributes

_PUBLIC = {
    "bag_bounds": ".bag_bounds",
    "conformal": ".conformal",
    "reasons": ".reasons",
    "trust_score": ".trust_score",
}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_attributes(__name__, _PUBLIC)

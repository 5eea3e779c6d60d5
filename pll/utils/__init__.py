"""Utilities the library shares: validation, per-row random state, progress, atomic files, provenance."""

from ._lazy import lazy_attributes

_PUBLIC = {
    "atomic_files": ".atomic_files",
    "progress": ".progress",
    "provenance": ".provenance",
    "validation": ".validation",
}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_attributes(__name__, _PUBLIC)

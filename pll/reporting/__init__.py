"""Reports of runs and grids: the Markdown report, the papers' tables beside ours, plain-text tables and
figures; a grid's tables and figures; one public module each.
"""

from ..utils._lazy import lazy_attributes

_PUBLIC = {
    "grids": ".grids",
    "plots": ".plots",
    "report": ".report",
    "reproduction": ".reproduction",
    "tables": ".tables",
}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_attributes(__name__, _PUBLIC)

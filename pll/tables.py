"""Plain-text tables of results: Markdown for reports and the terminal."""

from __future__ import annotations

import numpy as np
import pandas as pd


def metrics_table(metrics: dict) -> pd.DataFrame:
    """Metrics named ``<method>.<reject option>.<metric>`` as one row per (method, reject option)."""
    rows = {}
    for name, value in metrics.items():
        method, option, metric = name.split(".", 2)
        rows.setdefault((method, option), {})[metric] = value
    frame = pd.DataFrame([{"method": m, "reject": o, **vals} for (m, o), vals in rows.items()])
    return frame


def markdown_table(frame: pd.DataFrame, digits: int = 4) -> str:
    """A GitHub-flavoured Markdown table; floats rounded to ``digits``."""

    def cell(v):
        if isinstance(v, (float, np.floating)):
            return f"{v:.{digits}f}"
        return str(v)

    header = [str(c) for c in frame.columns]
    body = [[cell(v) for v in row] for row in frame.itertuples(index=False)]
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(header)]

    def line(cells):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    out = [line(header), "| " + " | ".join("-" * w for w in widths) + " |"]
    out += [line(r) for r in body]
    return "\n".join(out) + "\n"

"""A benchmark grid's results as the papers lay them out: tables with significance marks, and risk figures."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..evaluation.metric_names import parse_per_lambda
from ..experiment.grid import TABLE_METRICS
from .plots import risk_figure
from .tables import significance_table


def summary_tables(summary) -> dict:
    """The papers' layout of :data:`TABLE_METRICS`: a row per method, a column per data set and noise."""
    tables = {}
    for metric, scale in TABLE_METRICS.items():
        rows = summary[summary["metric"] == metric]
        if not rows.empty:
            tables[f"table_{metric}"] = significance_table(rows, columns=("dataset", "noise"), scale=scale)
    return tables


def risk_figures(table) -> dict:
    """``R_λ`` against λ, mean over seeds, one figure per data set and noise (:func:`pll.reporting.plots.risk_figure`)."""
    columns = {c: parse_per_lambda(c) for c in table.columns}
    columns = {c: parsed for c, parsed in columns.items() if parsed and parsed[0] in ("risk", "cal_risk")}
    if table.empty or not columns:
        return {}
    long = table.melt(id_vars=["dataset", "noise", "variant", "reject", "seed"], value_vars=list(columns))
    long["lambda"] = [columns[c][1] for c in long["variable"]]
    long["kind"] = [columns[c][0] for c in long["variable"]]
    means = long.pivot_table(index=["dataset", "noise", "variant", "reject", "lambda"], columns="kind",
                             values="value", aggfunc="mean").reset_index()
    figures = {}
    for (dataset, noise), group in means.groupby(["dataset", "noise"], sort=False):
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", f"risk_{Path(dataset).stem}_{noise}")
        risks = group.rename(columns={"variant": "method"})
        if "cal_risk" not in risks:
            risks = risks.assign(cal_risk=np.nan)
        figures[name] = risk_figure(risks, title=f"{dataset} / {noise}: mean over seeds")
    return figures


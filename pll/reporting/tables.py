"""Plain-text tables of results: Markdown for reports and the terminal."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..evaluation.metric_names import parse_per_lambda


def risk_table(table: pd.DataFrame) -> pd.DataFrame:
    """``R_λ`` per (method, reject option, λ): at the option's own rule and at the calibrated threshold.

    Parameters
    ----------
    table : DataFrame
        The comparison table of a run (:attr:`pll.experiment.Evaluation.table`):
        columns ``method``, ``reject``, ``risk_<λ>`` and ``cal_<what>_<λ>``.

    Returns
    -------
    DataFrame with columns ``method``, ``reject``, ``lambda``, ``risk`` and
        one ``cal_<what>`` column per calibrated quantity (``cal_threshold``,
        ``cal_rejection_rate``, ``cal_risk``), sorted by method, option, λ.

    Examples
    --------
    >>> risk_table(pd.DataFrame({"method": ["m"], "reject": ["native"], "risk_0.10": [0.2], "cal_risk_0.10": [0.15]}))
      method  reject  lambda  risk  cal_risk
    0      m  native     0.1   0.2      0.15
    """
    columns = {name: parse_per_lambda(name) for name in table.columns}
    columns = {name: parsed for name, parsed in columns.items() if parsed}
    if table.empty or not columns:
        return pd.DataFrame()
    long = table.melt(id_vars=["method", "reject"], value_vars=list(columns), var_name="_column")
    long["lambda"] = [columns[c][1] for c in long["_column"]]
    long["_kind"] = [columns[c][0] for c in long["_column"]]
    wide = long.pivot_table(index=["method", "reject", "lambda"], columns="_kind", values="value", sort=True)
    wide.columns.name = None
    ordered = ["risk"] + sorted(c for c in wide.columns if c != "risk")
    return wide.reset_index()[["method", "reject", "lambda", *[c for c in ordered if c in wide.columns]]]


def significance_table(summary: pd.DataFrame, columns="dataset", digits=2, scale=1.0) -> pd.DataFrame:
    """The papers' Tables 1–2 layout: methods as rows, ``mean (± std)`` cells, marked ones in bold.

    Parameters
    ----------
    summary : DataFrame
        The output of :func:`pll.evaluation.compare_methods`.
    columns : str or sequence of str
        The group column(s) spread over the table's columns (e.g.
        ``"dataset"`` or ``"metric"``); several are joined with `` / ``.
    digits : int
        Decimals of the mean and the std.
    scale : float
        Multiplies means and stds (100 for accuracies in percent).

    Returns
    -------
    DataFrame of strings, one row per method; ``**…**`` marks the best method
        and those not significantly worse (Markdown bold).

    Examples
    --------
    >>> s = pd.DataFrame({"dataset": ["d", "d"], "method": ["a", "b"], "mean": [0.9, 0.5],
    ...                   "std": [0.01, 0.02], "marked": [True, False]})
    >>> significance_table(s, scale=100, digits=1).values.tolist()
    [['a', '**90.0 (± 1.0)**'], ['b', '50.0 (± 2.0)']]
    """
    columns = [columns] if isinstance(columns, str) else list(columns)
    cells = summary.assign(
        _column=summary[columns].astype(str).agg(" / ".join, axis=1),
        _cell=[
            (f"**{c}**" if marked else c)
            for c, marked in zip(
                (f"{m * scale:.{digits}f} (± {s * scale:.{digits}f})" for m, s in zip(summary["mean"], summary["std"])),
                summary["marked"],
            )
        ],
    )
    wide = cells.pivot(index="method", columns="_column", values="_cell").fillna("")
    wide.columns.name = None
    return wide.reset_index()


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

"""The Markdown report of one run: its tables and figures on one page (pure text, no tracking)."""

from __future__ import annotations

from ..evaluation.metric_names import is_calibrated
from .tables import markdown_table

GLOSSARY = """\
The tables have a row per method run and reject option (`native`: the method's own rule; `trust`: a
trust-score threshold; `conformal`: a prediction set of one label).  Each method run's MLflow run logs
them as `<reject option>.<metric>`, and `accuracy` and `mcc` once, unprefixed.  Over the test rows: `accuracy` and `mcc` (Matthews correlation) over
all rows, rejected ones included; `rejection_rate`; `covered_accuracy` (accuracy of the accepted rows, 1.0
when none is accepted); `nonreject_error` (accepted and wrong, over all rows); `risk_<λ>` =
`nonreject_error + λ · rejection_rate`; `aurc` (area under the risk–coverage curve of the score, lower is
better).  `cal_threshold_<λ>` is the score threshold minimizing `R_λ` on the validation hold-out (a row is
accepted iff its score is above it; among equally good thresholds the lowest); `cal_risk_<λ>` and
`cal_rejection_rate_<λ>` are what that threshold gives on the test rows.
"""


def run_report(summary, metrics, risks, figures, *, truth="true labels", title=None):
    """The Markdown report of a run.

    Parameters
    ----------
    summary : dict
        The data set summary (``PartialLabelDataset.summary()``): name, rows, classes, ...
    metrics : DataFrame
        One row per (method, reject option) (:func:`pll.reporting.tables.metrics_table`).
    risks : DataFrame
        ``R_λ`` at the own rule and at the calibrated thresholds (:func:`pll.reporting.tables.risk_table`).
    figures : dict of str -> str
        Caption -> path of the PNG relative to the report.
    truth : str
        What "correct" meant (true labels, or the partial-label loss).
    title : str, optional

    Returns
    -------
    str

    Examples
    --------
    >>> import pandas as pd
    >>> text = run_report({"name": "toy", "rows": 4, "classes": 2}, pd.DataFrame({"method": ["m"]}),
    ...                   pd.DataFrame(), {"Trade-off": "figures/tradeoff.png"})
    >>> "![Trade-off](figures/tradeoff.png)" in text
    True
    """
    name = summary.get("name", "data")
    lines = [f"# {title or f'Reject-option evaluation: {name}'}", ""]
    facts = {
        "data set": name,
        "rows": summary.get("rows"),
        "classes": summary.get("classes"),
        "average bag size": summary.get("average_bag_size"),
        "noise": summary.get("noise"),
        "correct means": truth,
    }
    lines += ["| | |", "| --- | --- |"]
    lines += [f"| {k} | {_fmt(v)} |" for k, v in facts.items() if v is not None]
    lines += ["", "## Own reject rule (test rows)", ""]
    own = metrics[[c for c in metrics.columns if not is_calibrated(c)]]
    lines += [markdown_table(own), ""]
    if not risks.empty:
        lines += ["## Risk at calibrated thresholds (chosen on the validation hold-out, applied to test rows)", ""]
        lines += [markdown_table(risks), ""]
    lines += ["## Figures", ""]
    for caption, path in figures.items():
        lines += [f"### {caption}", "", f"![{caption}]({path})", ""]
    lines += ["## Metric names", "", GLOSSARY]
    return "\n".join(lines)


def _fmt(value):
    return f"{value:.3f}" if isinstance(value, float) else str(value)

"""Figures of reject-option evaluations (matplotlib, no pyplot: each call builds its own Figure).

Every figure draws one line per (method, reject option): the colour says
the method (the same in every figure, :func:`method_colour`), the line style
says the reject option (:func:`option_style`).  Inputs are the tables of
:mod:`pll.evaluation`, keyed by ``(method, option)``.  Save with
``fig.savefig(path)``; nothing is registered with pyplot, so figures never
leak state into each other.
"""

from __future__ import annotations

import zlib

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

# Okabe–Ito colours: distinguishable with common colour-vision deficiencies.
METHOD_COLOURS = {"dst_pll": "#0072B2", "pl_aknn": "#D55E00", "pl_knn": "#009E73"}
EXTRA_COLOURS = ("#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442", "#999999")
OPTION_STYLES = {"native": "-", "trust": "--"}
OTHER_OPTION_STYLE = ":"
OPTION_MARKERS = {"native": "o", "trust": "D"}
OTHER_OPTION_MARKER = "s"


def method_colour(method):
    """The colour of ``method``: fixed for the known methods, a stable hash-chosen one otherwise."""
    if method in METHOD_COLOURS:
        return METHOD_COLOURS[method]
    return EXTRA_COLOURS[zlib.crc32(method.encode()) % len(EXTRA_COLOURS)]


def option_style(option):
    """The line style of a reject option (``native`` solid, ``trust`` dashed, others dotted)."""
    return OPTION_STYLES.get(option, OTHER_OPTION_STYLE)


def option_marker(option):
    """The marker of a reject option's own operating point (``native`` dot, ``trust`` diamond, others square)."""
    return OPTION_MARKERS.get(option, OTHER_OPTION_MARKER)


def _label(method, option):
    return f"{method} ({option})"


def _style(key):
    method, option = key
    return {"color": method_colour(method), "linestyle": option_style(option), "label": _label(method, option)}


def _room_above_100(ax):
    """Zoom the y-axis (in %) to the data, with a little room above 100 %."""
    bottom = min(ax.get_ylim()[0], 99.0)
    ax.set_ylim(bottom, 100 + 0.02 * (100 - bottom))


def tradeoff_figure(sweeps, operating_points, title="Reject trade-off"):
    """Fraction rejected against the accuracy of the rest (the DST-PLL paper's Figure 1).

    Parameters
    ----------
    sweeps : dict of (method, option) -> DataFrame
        :func:`pll.evaluation.threshold_sweep` tables.  The point where every
        row is rejected (accuracy of nothing) is left out of the curve.
    operating_points : dict of (method, option) -> (rejection_rate, covered_accuracy)
        Each reject option's own (default) operating point, drawn with the
        option's marker (:func:`option_marker`).
    title : str

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = Figure(figsize=(7.5, 5.5), layout="constrained")
    ax = fig.add_subplot()
    for key, sweep in sorted(sweeps.items()):
        kept = sweep[sweep["accepted"] > 0]
        ax.plot(100 * kept["rejection_rate"], 100 * kept["covered_accuracy"], linewidth=1.6, **_style(key))
    point = {"markersize": 8, "markeredgecolor": "black", "linestyle": "none"}
    for (method, option), (rejected, accuracy) in sorted(operating_points.items()):
        ax.plot(100 * rejected, 100 * accuracy, marker=option_marker(option), color=method_colour(method),
                zorder=3, **point)
    handles, _ = ax.get_legend_handles_labels()
    for option in sorted({option for _, option in operating_points}):
        handles.append(Line2D([], [], marker=option_marker(option), color="grey", label=f"{option}: own threshold",
                              **point))
    ax.legend(handles=handles, loc="best", fontsize="small")
    ax.set_xlim(0, 100)
    _room_above_100(ax)
    ax.set_xlabel("fraction rejected (%)")
    ax.set_ylabel("accuracy of non-rejected predictions (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return fig


def risk_figure(risks, title="Reject-option risk"):
    """``R_λ`` against λ: at each option's own reject rule, and at the calibrated thresholds.

    Parameters
    ----------
    risks : DataFrame
        Long table with columns ``method``, ``reject``, ``lambda``, ``risk``
        (own rule, test rows) and ``cal_risk`` (threshold calibrated on the
        validation hold-out for that λ, applied to the test rows); see
        :func:`pll.tables.risk_table`.
    title : str

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = Figure(figsize=(11, 4.8), layout="constrained")
    own, cal = fig.subplots(1, 2, sharey=True)
    for (method, option), group in risks.groupby(["method", "reject"], sort=True):
        group = group.sort_values("lambda")
        style = _style((method, option))
        own.plot(group["lambda"], group["risk"], marker="o", **style)
        cal.plot(group["lambda"], group["cal_risk"], marker="s", **style)
    own.set_title("own reject rule")
    cal.set_title("threshold calibrated on the validation hold-out")
    for ax in (own, cal):
        ax.set_xlabel("λ (cost of one rejection, in errors)")
        ax.grid(alpha=0.3)
    own.set_ylabel("risk R_λ = error + λ · rejection rate (fraction of test rows)")
    own.legend(fontsize="small")
    fig.suptitle(title)
    return fig


def precision_figure(tables, title="Precision at percentile"):
    """Trust-score style precision curves (Jiang et al. 2018, Figure 1): trustworthy and suspicious.

    Parameters
    ----------
    tables : dict of (method, option) -> DataFrame
        :func:`pll.evaluation.precision_at_percentile` tables.
    title : str

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = Figure(figsize=(11, 4.8), layout="constrained")
    trust, suspect = fig.subplots(1, 2)
    for key, table in sorted(tables.items()):
        style = _style(key)
        trust.plot(table["percentile"], 100 * table["precision_trustworthy"], **style)
        suspect.plot(table["percentile"], 100 * table["precision_suspicious"], **style)
    trust.set_title("trustworthy: rows scoring above the percentile")
    trust.set_ylabel("precision of correct predictions (%)")
    suspect.set_title("suspicious: rows scoring below the (100 − p)-th percentile")
    suspect.set_ylabel("precision of wrong predictions (%)")
    for ax in (trust, suspect):
        ax.set_xlabel("percentile level p (%)")
        ax.set_xlim(0, 100)
        _room_above_100(ax)
        ax.grid(alpha=0.3)
    trust.legend(fontsize="small")
    fig.suptitle(title)
    return fig


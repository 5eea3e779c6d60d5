"""Figures of reject-option evaluations (matplotlib, no pyplot: each call builds its own Figure).

Every figure draws one line per (method run, reject option): the colour's
hue says the method (the same in every figure, :func:`method_colour`), its
shade tells runs of one method with different parameters apart
(:func:`method_shades`), and the line style says the reject option
(:func:`option_style`).  :func:`figure_styles` is the one place that picks
them, so no figure colours its lines its own way.  Inputs are the tables of
:mod:`pll.evaluation`, keyed by ``(name, option)``, where ``name`` is the
method, optionally followed by its parameters (``pl_knn k=10``, or the grid's
``pl_knn(n_neighbors=10)``).  Save with ``fig.savefig(path)``; nothing is
registered with pyplot, so figures never leak state into each other.
"""

from __future__ import annotations

import colorsys
import re
import zlib

import numpy as np

from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

# Okabe–Ito colours: distinguishable with common colour-vision deficiencies.
# One per method of pll.experiment.catalog.METHODS (tests/unit/test_plots.py checks), each hue its own.
METHOD_COLOURS = {
    "dst_pll": "#0072B2",
    "pl_aknn": "#D55E00",
    "pl_knn": "#009E73",
    "ipal": "#CC79A7",
    "pl_classifier": "#E69F00",
    "proden": "#F0E442",
    "crosel": "#000000",
    "vi_pll": "#6A3D9A",  # outside Okabe–Ito, whose sky blue shares the blue's hue
    "soft_voting": "#66A61E",  # outside Okabe–Ito too: a hue none of the others has
}
# The rest of the palette, for methods outside the catalog.
EXTRA_COLOURS = ("#56B4E9", "#999999")
OPTION_STYLES = {"native": "-", "trust": "--"}
OTHER_OPTION_STYLE = ":"
OPTION_MARKERS = {"native": "o", "trust": "D"}
OTHER_OPTION_MARKER = "s"
SHADE_SPAN = 0.36
"""HLS lightness between the darkest and the lightest shade of one method's runs in a figure."""
SHADE_LIGHTNESS = (0.12, 0.85)
"""The lightness shades stay within: beyond, they turn black or white and no longer show the method's hue."""


def base_method(name):
    """The method of a method run name: the name up to the first space or ``(``.

    Runs of one method with different parameters share its colour's hue.

    >>> base_method("pl_knn k=10"), base_method("pl_knn(n_neighbors=10)"), base_method("dst_pll")
    ('pl_knn', 'pl_knn', 'dst_pll')
    """
    return re.match(r"[^\s(]*", name.strip()).group()


def method_colour(method):
    """The colour of ``method`` (or of a run name's base method, :func:`base_method`).

    Fixed for the methods of the catalog, so a method looks the same in every
    figure; a stable hash-chosen one otherwise.

    >>> method_colour("pl_knn") == method_colour("pl_knn k=10") == METHOD_COLOURS["pl_knn"]
    True
    """
    method = base_method(method)
    if method in METHOD_COLOURS:
        return METHOD_COLOURS[method]
    return EXTRA_COLOURS[zlib.crc32(method.encode()) % len(EXTRA_COLOURS)]


def method_shades(method, n):
    """``n`` shades of ``method``'s colour, darker to lighter, all of its hue and saturation.

    Only the lightness changes, so several runs of one method stay tellable
    apart yet never look like another method.  A lone run keeps the colour itself.

    >>> method_shades("pl_knn", 1) == [METHOD_COLOURS["pl_knn"]]
    True
    >>> len(set(method_shades("pl_knn", 3)))
    3
    """
    colour = method_colour(method)
    if n == 1:
        return [colour]
    hue, lightness, saturation = colorsys.rgb_to_hls(*to_rgb(colour))
    darkest, lightest = SHADE_LIGHTNESS
    low = min(max(lightness - SHADE_SPAN / 2, darkest), lightest - SHADE_SPAN)
    return [to_hex(colorsys.hls_to_rgb(hue, low + SHADE_SPAN * i / (n - 1), saturation)) for i in range(n)]


def option_style(option):
    """The line style of a reject option (``native`` solid, ``trust`` dashed, others dotted)."""
    return OPTION_STYLES.get(option, OTHER_OPTION_STYLE)


def option_marker(option):
    """The marker of a reject option's own operating point (``native`` dot, ``trust`` diamond, others square)."""
    return OPTION_MARKERS.get(option, OTHER_OPTION_MARKER)


def _label(name, option):
    return f"{name} ({option})"


def _run_order(name):
    """Sort key of run names that reads numbers as numbers, so ``k=5`` comes before ``k=10``."""
    parts = re.split(r"(\d+(?:\.\d+)?)", name)
    return [float(part) if i % 2 else part for i, part in enumerate(parts)], name


def figure_styles(keys):
    """The colour, line style and label of each ``(name, option)`` line of one figure.

    A method's colour depends on the figure only when it holds several runs
    of that method (names with the same :func:`base_method`): each run then
    gets its own shade (:func:`method_shades`), darker to lighter in the
    order of the names, numbers read as numbers.

    Parameters
    ----------
    keys : iterable of (name, option)
        Every line the figure draws; repeats are drawn once.

    Returns
    -------
    dict of (name, option) -> dict
        ``color``, ``linestyle`` and ``label`` keywords of ``Axes.plot``, in
        the order the lines are drawn (by name, then option).

    Examples
    --------
    >>> styles = figure_styles([("pl_knn k=10", "native"), ("pl_knn k=5", "trust"), ("dst_pll", "native")])
    >>> list(styles)
    [('dst_pll', 'native'), ('pl_knn k=5', 'trust'), ('pl_knn k=10', 'native')]
    >>> styles["dst_pll", "native"]["color"] == METHOD_COLOURS["dst_pll"]
    True
    >>> styles["pl_knn k=5", "trust"]["color"] != styles["pl_knn k=10", "native"]["color"]
    True
    >>> styles["pl_knn k=5", "trust"]["linestyle"], styles["pl_knn k=5", "trust"]["label"]
    ('--', 'pl_knn k=5 (trust)')
    """
    keys = sorted(set(keys), key=lambda key: (_run_order(key[0]), key[1]))
    runs = {}
    for name in dict.fromkeys(name for name, _ in keys):
        runs.setdefault(base_method(name), []).append(name)
    colours = {}
    for method, names in runs.items():
        colours.update(zip(names, method_shades(method, len(names))))
    return {
        (name, option): {"color": colours[name], "linestyle": option_style(option), "label": _label(name, option)}
        for name, option in keys
    }


def _room_above_100(ax):
    """Zoom the y-axis (in %) to the data, with a little room above 100 %."""
    bottom = min(ax.get_ylim()[0], 99.0)
    ax.set_ylim(bottom, 100 + 0.02 * (100 - bottom))


def tradeoff_figure(sweeps, operating_points, title="Reject trade-off"):
    """Fraction rejected against the accuracy of the rest (the DST-PLL paper's Figure 1).

    Parameters
    ----------
    sweeps : dict of (name, option) -> DataFrame
        :func:`pll.evaluation.threshold_sweep` tables, keyed by method run
        name (:func:`figure_styles`) and reject option.  The point where every
        row is rejected (accuracy of nothing) is left out of the curve.
    operating_points : dict of (name, option) -> (rejection_rate, covered_accuracy)
        Each reject option's own (default) operating point, drawn with the
        option's marker (:func:`option_marker`) in its line's colour.
    title : str

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = Figure(figsize=(7.5, 5.5), layout="constrained")
    ax = fig.add_subplot()
    styles = figure_styles([*sweeps, *operating_points])
    for key in (key for key in styles if key in sweeps):
        sweep = sweeps[key]
        kept = sweep[sweep["accepted"] > 0]
        ax.plot(100 * kept["rejection_rate"], 100 * kept["covered_accuracy"], linewidth=1.6, **styles[key])
    point = {"markersize": 8, "markeredgecolor": "black", "linestyle": "none"}
    for key in (key for key in styles if key in operating_points):
        rejected, accuracy = operating_points[key]
        ax.plot(100 * rejected, 100 * accuracy, marker=option_marker(key[1]), color=styles[key]["color"],
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
        Long table with columns ``method`` (a method run name, see
        :func:`figure_styles`), ``reject``, ``lambda``, ``risk``
        (own rule, test rows) and ``cal_risk`` (threshold calibrated on the
        validation hold-out for that λ, applied to the test rows); see
        :func:`pll.reporting.tables.risk_table`.
    title : str

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = Figure(figsize=(11, 4.8), layout="constrained")
    own, cal = fig.subplots(1, 2, sharey=True)
    groups = dict(iter(risks.groupby(["method", "reject"])))
    for key, style in figure_styles(groups).items():
        group = groups[key].sort_values("lambda")
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
    tables : dict of (name, option) -> DataFrame
        :func:`pll.evaluation.precision_at_percentile` tables, keyed by method
        run name (:func:`figure_styles`) and reject option.
    title : str

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = Figure(figsize=(11, 4.8), layout="constrained")
    trust, suspect = fig.subplots(1, 2)
    for key, style in figure_styles(tables).items():
        table = tables[key]
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



def suspicion_figure(table, wrong=None, title="Suspicion of the training bags"):
    """Histogram of an audit's suspicion scores (:func:`pll.audit.audit_bags`), non-empty bags only.

    With ``wrong`` (bool per table row: the bag misses the true label) the
    right and the wrong bags are drawn apart, so that one sees where the
    ranking separates them.
    """
    fig = Figure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.add_subplot()
    kept = ~table["empty_bag"].to_numpy(bool)
    score = table["suspicion"].to_numpy()
    bins = np.linspace(0.0, 1.0, 41)
    if wrong is None:
        ax.hist(score[kept], bins=bins, color="#0072B2")
    else:
        wrong = np.asarray(wrong, bool)
        ax.hist([score[kept & ~wrong], score[kept & wrong]], bins=bins, stacked=True,
                color=["#009E73", "#D55E00"], label=["bag holds the true label", "bag misses it"])
        ax.legend(fontsize="small")
    ax.set_xlabel("suspicion: the neighbors' support outside the bag")
    ax.set_ylabel("training rows")
    ax.set_title(f"{title} ({int((~kept).sum())} empty bags left out)")
    ax.grid(alpha=0.3)
    return fig

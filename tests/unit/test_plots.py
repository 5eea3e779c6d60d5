"""Figures draw exactly the evaluation's numbers, readably, with one colour per method everywhere."""

import io
from itertools import combinations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import rgb_to_hsv, to_rgb

from pll.experiment.catalog import METHODS
from pll.evaluation import precision_at_percentile, threshold_sweep
from pll.reporting.plots import (
    EXTRA_COLOURS,
    METHOD_COLOURS,
    base_method,
    figure_styles,
    method_colour,
    method_shades,
    option_marker,
    option_style,
    precision_figure,
    risk_figure,
    tradeoff_figure,
)

KEYS = [("dst_pll", "native"), ("pl_knn", "native"), ("pl_knn", "trust")]


def labelled_lines(ax):
    return {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}


@pytest.fixture(scope="module")
def curves():
    rng = np.random.default_rng(0)
    sweeps, precision, points = {}, {}, {}
    for key in KEYS:
        score = rng.integers(0, 20, 80) / 19
        correct = rng.random(80) < 0.4 + 0.5 * score
        sweeps[key] = threshold_sweep(score, correct)
        precision[key] = precision_at_percentile(score, correct)
        accept = score > 0.5
        points[key] = (1 - accept.mean(), correct[accept].mean())
    return sweeps, precision, points, risks_of(KEYS)


def risks_of(keys):
    """A toy :func:`pll.reporting.tables.risk_table`: rows per (method, option, λ), each line its own slope."""
    rows = [
        {"method": m, "reject": o, "lambda": lam, "risk": 0.1 + lam * (i + 1), "cal_risk": 0.05 + lam * i}
        for i, (m, o) in enumerate(keys)
        for lam in (0.0, 0.1, 0.2)
    ]
    return pd.DataFrame(rows).sort_values(["method", "reject", "lambda"], ignore_index=True)


def hue(colour):
    return rgb_to_hsv(to_rgb(colour))[0]


def same_hue(a, b, tolerance=0.02):
    """Hues (in turns) within ``tolerance`` of each other, around the colour circle."""
    distance = abs(hue(a) - hue(b))
    return min(distance, 1 - distance) <= tolerance


def test_tradeoff_figure_draws_every_sweep_point_and_marks_the_operating_points(curves):
    sweeps, _, points, _ = curves
    fig = tradeoff_figure(sweeps, points, title="Reject trade-off on toy")
    (ax,) = fig.axes
    lines = labelled_lines(ax)
    assert set(lines) == {f"{m} ({o})" for m, o in KEYS}
    for (m, o), sweep in sweeps.items():
        line = lines[f"{m} ({o})"]
        kept = sweep[sweep["accepted"] > 0]  # accuracy of nothing is not drawn
        np.testing.assert_allclose(line.get_xdata(), 100 * kept["rejection_rate"])
        np.testing.assert_allclose(line.get_ydata(), 100 * kept["covered_accuracy"])
        assert line.get_color() == method_colour(m) and line.get_linestyle() == option_style(o)
    for (m, o), (r, a) in points.items():
        # Each option's own operating point: the option's marker in the method's colour.
        marks = [
            ln
            for ln in ax.get_lines()
            if ln.get_label().startswith("_")
            and ln.get_marker() == option_marker(o)
            and ln.get_color() == method_colour(m)
        ]
        assert len(marks) == 1
        assert (marks[0].get_xdata()[0], marks[0].get_ydata()[0]) == pytest.approx((100 * r, 100 * a))
    assert ax.get_xlabel() == "fraction rejected (%)"
    assert "(%)" in ax.get_ylabel() and ax.get_title() == "Reject trade-off on toy"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "dst_pll (native)" in legend and "native: own threshold" in legend and "trust: own threshold" in legend


def test_risk_figure_plots_own_and_calibrated_risks_against_lambda(curves):
    *_, risks = curves
    fig = risk_figure(risks)
    own, cal = fig.axes
    for (m, o), group in risks.groupby(["method", "reject"]):
        label = f"{m} ({o})"
        np.testing.assert_allclose(labelled_lines(own)[label].get_ydata(), group["risk"])
        np.testing.assert_allclose(labelled_lines(cal)[label].get_ydata(), group["cal_risk"])
        np.testing.assert_allclose(labelled_lines(own)[label].get_xdata(), group["lambda"])
    assert "λ" in own.get_xlabel() and "R_λ" in own.get_ylabel()
    assert own.get_title() and cal.get_title() and fig.get_suptitle()


def test_precision_figure_plots_both_precisions_in_percent(curves):
    _, precision, _, _ = curves
    fig = precision_figure(precision)
    trust, suspect = fig.axes
    for (m, o), table in precision.items():
        label = f"{m} ({o})"
        np.testing.assert_allclose(labelled_lines(trust)[label].get_ydata(), 100 * table["precision_trustworthy"])
        np.testing.assert_allclose(labelled_lines(suspect)[label].get_ydata(), 100 * table["precision_suspicious"])
    assert "(%)" in trust.get_xlabel() and "(%)" in trust.get_ylabel() and "(%)" in suspect.get_ylabel()


def test_a_method_keeps_its_colour_across_figures(curves):
    sweeps, precision, points, risks = curves
    figs = [tradeoff_figure(sweeps, points), risk_figure(risks), precision_figure(precision)]
    colours = {}
    for fig in figs:
        for ax in fig.axes:
            for label, line in labelled_lines(ax).items():
                method = label.split(" ")[0]
                colours.setdefault(method, set()).add(line.get_color())
    assert colours["dst_pll"] == {METHOD_COLOURS["dst_pll"]}
    assert colours["pl_knn"] == {METHOD_COLOURS["pl_knn"]}
    assert len(set(METHOD_COLOURS.values())) == len(METHOD_COLOURS)


def test_unknown_methods_get_a_stable_colour_and_options_a_style():
    assert method_colour("sklearn_svc") == method_colour("sklearn_svc")
    assert method_colour("sklearn_svc") in EXTRA_COLOURS
    assert option_style("native") == "-" and option_style("trust") == "--" and option_style("other") == ":"
    assert len({option_marker("native"), option_marker("trust"), option_marker("other")}) == 3


def test_figures_render_to_png_without_touching_pyplot_state(curves):
    sweeps, precision, points, risks = curves
    before = plt.get_fignums()
    for fig in (tradeoff_figure(sweeps, points), risk_figure(risks), precision_figure(precision)):
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=60)
        data = buffer.getvalue()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert plt.get_fignums() == before


def test_a_single_distinct_score_still_draws():
    sweep = threshold_sweep(np.full(5, 0.3), np.array([True, True, False, True, True]))
    fig = tradeoff_figure({("pl_knn", "native"): sweep}, {("pl_knn", "native"): (0.0, 0.8)})
    line = labelled_lines(fig.axes[0])["pl_knn (native)"]
    assert list(line.get_xdata()) == [0.0] and list(line.get_ydata()) == [80.0]


def test_every_catalog_method_has_a_fixed_colour_of_its_own():
    assert set(METHODS) <= set(METHOD_COLOURS), "give every method of pll.experiment.catalog a colour in pll.reporting.plots"
    colours = [METHOD_COLOURS[m] for m in METHODS]
    assert len({c.lower() for c in colours}) == len(colours)
    for a, b in combinations(METHODS, 2):
        assert not np.allclose(to_rgb(METHOD_COLOURS[a]), to_rgb(METHOD_COLOURS[b]), atol=0.1), (a, b)
        assert not same_hue(METHOD_COLOURS[a], METHOD_COLOURS[b]), (a, b)
    # The fallback colours never pass an unknown method off as a catalog one.
    assert not {c.lower() for c in EXTRA_COLOURS} & {c.lower() for c in colours}
    assert (METHOD_COLOURS["dst_pll"], METHOD_COLOURS["pl_aknn"], METHOD_COLOURS["pl_knn"]) == (
        "#0072B2", "#D55E00", "#009E73")


@pytest.mark.parametrize("name", ["pl_knn", "pl_knn k=10", "pl_knn(n_neighbors=10)", " pl_knn  k=5"])
def test_a_run_name_is_drawn_in_its_base_methods_colour(name):
    assert base_method(name) == "pl_knn"
    assert method_colour(name) == METHOD_COLOURS["pl_knn"]
    assert base_method("pl_classifier estimator=hist_gradient_boosting") == "pl_classifier"


def test_runs_of_one_method_get_distinct_shades_of_its_colour():
    keys = [("pl_knn k=10", "native"), ("pl_knn k=5", "native"), ("pl_knn k=5", "trust"), ("pl_aknn", "native")]
    styles = figure_styles(keys)
    k5, k10, aknn = styles["pl_knn k=5", "native"]["color"], styles["pl_knn k=10", "native"]["color"], \
        styles["pl_aknn", "native"]["color"]
    assert k5 != k10
    assert same_hue(k5, METHOD_COLOURS["pl_knn"]) and same_hue(k10, METHOD_COLOURS["pl_knn"])
    assert not same_hue(k5, aknn) and not same_hue(k10, aknn)
    assert aknn == METHOD_COLOURS["pl_aknn"]  # alone in the figure: the method's own colour
    # Darker to lighter, numbers read as numbers: k=5 before k=10.
    assert rgb_to_hsv(to_rgb(k5))[2] < rgb_to_hsv(to_rgb(k10))[2]
    # One name, one colour; the option shows in the line style.
    assert styles["pl_knn k=5", "trust"]["color"] == k5
    assert styles["pl_knn k=5", "trust"]["linestyle"] == "--" and styles["pl_knn k=5", "native"]["linestyle"] == "-"
    assert styles["pl_knn k=10", "native"]["label"] == "pl_knn k=10 (native)"
    # The same lines in any order get the same styles.
    assert figure_styles(reversed(keys)) == styles


@pytest.mark.parametrize("method", sorted(METHOD_COLOURS) + ["sklearn_svc"])
@pytest.mark.parametrize("n", [2, 3, 6])
def test_shades_keep_the_hue_and_stay_apart(method, n):
    shades = method_shades(method, n)
    assert len(set(shades)) == n
    colour = method_colour(method)
    if rgb_to_hsv(to_rgb(colour))[1] > 0:  # greys and black have no hue to keep
        assert all(same_hue(shade, colour) for shade in shades)
    assert all(to_rgb(shade) != (1.0, 1.0, 1.0) for shade in shades)


def test_unknown_runs_share_their_base_methods_fallback_colour():
    styles = figure_styles([("sklearn_svc C=1", "native")])
    assert styles["sklearn_svc C=1", "native"]["color"] == method_colour("sklearn_svc") in EXTRA_COLOURS


def line_colours(ax):
    return {label: line.get_color() for label, line in labelled_lines(ax).items()}


def test_drawn_figures_tell_pl_aknn_and_pl_knn_runs_apart(curves):
    sweeps, precision, points, _ = curves
    run = {"pl_aknn": ("dst_pll", "native"), "pl_knn k=5": ("pl_knn", "native"), "pl_knn k=10": ("pl_knn", "trust")}
    keys = [(name, "native") for name in run]
    fig = tradeoff_figure({(n, o): sweeps[run[n]] for n, o in keys}, {(n, o): points[run[n]] for n, o in keys})
    (ax,) = fig.axes
    colours = line_colours(ax)
    assert len(set(colours.values())) == 3
    assert colours["pl_aknn (native)"] == METHOD_COLOURS["pl_aknn"]
    for name in ("pl_knn k=5", "pl_knn k=10"):
        assert same_hue(colours[f"{name} (native)"], METHOD_COLOURS["pl_knn"])
        # The operating point wears its line's colour.
        marks = [ln for ln in ax.get_lines() if ln.get_label().startswith("_")
                 and ln.get_color() == colours[f"{name} (native)"]]
        assert len(marks) == 1
    risk_keys = [("pl_aknn", "native"), ("pl_knn", "native"), ("pl_knn", "trust"), ("pl_knn(n_neighbors=10)", "native")]
    figs = [risk_figure(risks_of(risk_keys)),
            precision_figure({key: precision[KEYS[i % len(KEYS)]] for i, key in enumerate(risk_keys)})]
    for fig in figs:
        for ax in fig.axes:
            colours = line_colours(ax)
            assert colours["pl_aknn (native)"] != colours["pl_knn (native)"]
            assert colours["pl_knn (native)"] == colours["pl_knn (trust)"]
            assert colours["pl_knn (native)"] != colours["pl_knn(n_neighbors=10) (native)"]
            assert same_hue(colours["pl_knn(n_neighbors=10) (native)"], METHOD_COLOURS["pl_knn"])
            assert not same_hue(colours["pl_knn (native)"], colours["pl_aknn (native)"])

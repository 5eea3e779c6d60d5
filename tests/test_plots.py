"""Figures draw exactly the evaluation's numbers, readably, with one colour per method everywhere."""

import io

import matplotlib.pyplot as plt
import numpy as np
import pytest

from pll.evaluation import precision_at_percentile, threshold_sweep
from pll.plots import (
    EXTRA_COLOURS,
    METHOD_COLOURS,
    method_colour,
    option_marker,
    option_style,
    precision_figure,
    risk_figure,
    tradeoff_figure,
)
from pll.tables import risk_table

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
    metrics = {}
    for i, (m, o) in enumerate(KEYS):
        for lam in (0.0, 0.1, 0.2):
            metrics[f"{m}.{o}.risk_{lam:.2f}"] = 0.1 + lam * (i + 1)
            metrics[f"{m}.{o}.cal_risk_{lam:.2f}"] = 0.05 + lam * i
    return sweeps, precision, points, risk_table(metrics)


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

"""The papers' protocols as presets: the authors' script's operating point and aggregation, the t-tests, the noise."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import pll
from pll.experiment import catalog
from pll.errors import InvalidParameterError
from pll.experiment import run_protocol
from pll.experiment.grid import parse_grid
from pll.noise import class_dependent, instance_flip_probabilities, class_probabilities, partner_classes
from pll.experiment.presets import (
    PRESETS,
    SCRIPT_MIN_ACCEPTED,
    SCRIPT_RULES,
    ScriptRule,
    aggregate_risk,
    preset_noise_params,
    script_operating_point,
    two_sided_p,
)


def script_oracle(score, correct, rule):
    """The authors' plotting script's loop, written out: every threshold, skip those accepting 10 rows or fewer."""
    points = []
    for t in np.arange(rule.start, 1.01, 0.01):
        accepted = score > t if rule.strict else score >= t
        if accepted.sum() <= SCRIPT_MIN_ACCEPTED:
            continue
        points.append((t, 1 - accepted.mean(), correct[accepted].mean()))
    if not points:
        return None
    return points[int(np.argmin([abs(t - rule.target) for t, _, _ in points]))]


rules = st.sampled_from(list(SCRIPT_RULES.values()) + [ScriptRule(strict=True, start=0.0, target=0.3)])


@settings(max_examples=150, deadline=None)
@given(rule=rules, n=st.integers(1, 60), seed=st.integers(0, 2**31 - 1), grid=st.booleans())
def test_script_operating_point_equals_the_scripts_loop(rule, n, seed, grid):
    rng = np.random.default_rng(seed)
    # Scores on the script's own 0.01 grid hit the strict/non-strict edge; others do not.
    score = np.round(rng.uniform(rule.start, 1.0, n), 2) if grid else rng.uniform(rule.start - 0.1, 1.1, n)
    correct = rng.random(n) < 0.7
    got = script_operating_point(score, correct, rule)
    want = script_oracle(score, correct, rule)
    if want is None:
        assert np.isnan(got["script_rejection_rate"]) and np.isnan(got["script_covered_accuracy"])
        return
    assert got["script_threshold"] == pytest.approx(want[0], abs=1e-12)
    assert got["script_rejection_rate"] == pytest.approx(want[1], abs=1e-12)
    assert got["script_covered_accuracy"] == pytest.approx(want[2], abs=1e-12)


def test_script_rule_strictness_decides_rows_at_the_threshold():
    score = np.r_[np.full(20, 0.5), np.full(20, 0.9)]
    correct = np.r_[np.zeros(20, bool), np.ones(20, bool)]
    at_least = script_operating_point(score, correct, ScriptRule(strict=False, start=0.0, target=0.5))
    above = script_operating_point(score, correct, ScriptRule(strict=True, start=0.0, target=0.5))
    assert (at_least["script_rejection_rate"], at_least["script_covered_accuracy"]) == (0.0, 0.5)
    assert (above["script_rejection_rate"], above["script_covered_accuracy"]) == (0.5, 1.0)


def test_authors_risk_aggregation_forms_the_risk_from_means_and_eq1_averages_risks():
    runs = pd.DataFrame({"script_covered_accuracy": [0.9, 0.7, np.nan], "script_rejection_rate": [0.2, 0.4, 0.5],
                         "risk_0.10": [0.1, 0.3, 0.2]})
    mean, std = aggregate_risk(runs, 0.10, "authors_script")
    assert mean == pytest.approx((1 - 0.8) + 0.10 * 0.3)  # the NaN run left out, means first
    assert std == pytest.approx(np.sqrt(np.std([0.9, 0.7], ddof=1) ** 2 + 0.10 * np.std([0.2, 0.4], ddof=1) ** 2))
    assert aggregate_risk(runs, 0.10, "eq1") == (pytest.approx(0.2), pytest.approx(0.1))
    with pytest.raises(InvalidParameterError, match="unknown risk aggregation 'eq2'"):
        aggregate_risk(runs, 0.10, "eq2")


def test_t_tests_are_scipys_paired_on_shared_observations_and_unpaired():
    rng = np.random.default_rng(0)
    index = pd.MultiIndex.from_product([["a", "b"], range(5)], names=["set", "seed"])
    a = pd.Series(rng.normal(0.8, 0.05, 10), index=index)
    b = pd.Series(rng.normal(0.7, 0.05, 10), index=index)
    assert two_sided_p(a, b.iloc[::-1], "paired") == pytest.approx(stats.ttest_rel(a, b).pvalue)
    assert two_sided_p(a, b, "unpaired") == pytest.approx(stats.ttest_ind(a, b).pvalue)
    assert two_sided_p(a, a, "paired") == two_sided_p(a, a, "unpaired") == 1.0
    assert np.isnan(two_sided_p(a.iloc[:1], b.iloc[:1], "paired"))
    assert np.isnan(two_sided_p(a.iloc[:2], b.iloc[:2], "paired"))  # the one paired test: at least MIN_PAIRS pairs


def test_presets_fill_in_noise_parameters_the_caller_leaves_out():
    assert list(PRESETS) == list(catalog.PRESETS)
    assert preset_noise_params("paper_text", "uniform") == {"p": 0.7, "r": 3}
    assert preset_noise_params("authors_code", "class_dependent", {"eps": 0.5}) == {"p": 0.7, "eps": 0.5, "r": 1}
    assert preset_noise_params("authors_code", "remove_true_label", {"nu": 0.2}) == {"nu": 0.2}
    with pytest.raises(InvalidParameterError, match="unknown preset 'paper'"):
        preset_noise_params("paper", "uniform")


def test_a_grids_preset_sets_the_cells_noise_and_explicit_values_win():
    spec = {"name": "p", "datasets": ["iris"], "seeds": [0], "methods": {"pl_knn": {}}, "preset": "authors_code",
            "noise": ["uniform", {"model": "uniform", "p": 0.9}, "instance_dependent"]}
    grid = parse_grid(spec)
    assert [c.noise_params for c in grid.cells] == [{"p": 0.5, "r": 2}, {"p": 0.9, "r": 2},
                                                    {"classifier": "authors_sgd"}]
    with pytest.raises(InvalidParameterError, match="preset: unknown value 'x'"):
        parse_grid({**spec, "preset": "x"})


def test_paper_text_class_dependent_noise_adds_exactly_the_partner():
    y = np.repeat(np.arange(6), 50)
    S = class_dependent(y, 6, **PRESETS["paper_text"].noise["class_dependent"], random_state=3)
    partner = partner_classes(6, random_state=3)
    extra = S.sum(axis=1) == 2
    assert 0.6 < extra.mean() < 0.8  # p = 0.7
    assert S[np.flatnonzero(extra), partner[y[extra]]].all()


@pytest.mark.deep
def test_the_authors_noise_network_spreads_flip_probabilities_more_evenly_than_a_fitted_one():
    """Its 10 epochs of SGD leave it near its initialisation: the wrong labels' chances differ less within a row."""
    ds = pll.load_dataset("digits")
    X, y = ds.X[:600], ds.y[:600]
    spread = {}
    for name in ("mlp", "authors_sgd"):
        q = instance_flip_probabilities(class_probabilities(X, y, 10, random_state=0, classifier=name), y)
        wrong = np.where(np.eye(10, dtype=bool)[y], np.nan, q)
        spread[name] = np.nanmean(np.nanmax(wrong, axis=1) - np.nanmin(wrong, axis=1))
    assert spread["authors_sgd"] < 0.75 * spread["mlp"]


def test_unknown_noise_classifier_is_refused_before_any_data_is_read():
    with pytest.raises(InvalidParameterError, match="unknown classifier 'svm'; choose from mlp, authors_sgd"):
        pll.noise.check_noise("instance_dependent", {"classifier": "svm"})


def test_native_options_of_the_papers_methods_log_the_scripts_operating_point():
    result = run_protocol(pll.load_dataset("wine"), seed=1, methods=["pl_knn", "dst_pll", "pl_aknn"],
                          conformal_alpha=None)
    table = result.evaluation.table.set_index(["method", "reject"])
    assert set(SCRIPT_RULES) == set(pll.methods.METHODS)
    for method in ("pl_knn", "dst_pll"):
        row = table.loc[(method, "native")]
        assert 0.0 <= row["script_rejection_rate"] <= 1.0 and 0.0 <= row["script_covered_accuracy"] <= 1.0
    aknn = table.loc[("pl_aknn", "native")]  # not one of the paper's: its own rule, score > 0, as DST-PLL's
    assert aknn["script_rejection_rate"] == pytest.approx(aknn["rejection_rate"])
    assert table.loc[("pl_knn", "trust"), ["script_rejection_rate"]].isna().all()
    # DST-PLL's operating point is its own rule, Δ > 0, whenever more than 10 test rows pass it (the script's
    # grid, np.arange(-1, 1.01, 0.01), puts its "0" at 8.9e-16, which no Δ here falls below).
    dst = table.loc[("dst_pll", "native")]
    assert dst["script_threshold"] == pytest.approx(0.0, abs=1e-15)
    assert dst["script_rejection_rate"] == pytest.approx(dst["rejection_rate"])

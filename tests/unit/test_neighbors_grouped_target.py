"""The trust score's cell search held to a target agreement with exact search, else searched exactly."""

import numpy as np
import pytest

import pll.neighbors.grouped as grouped_module
from pll.neighbors.grouped import (
    AGREEMENT_THRESHOLD,
    GroupedExactIndex,
    TargetedCellSearch,
    nearest_by_group,
    nearest_own_and_other,
)
from pll.neighbors.grouped_cells import GroupedCellIndex
from pll.reject.trust_score import DEFAULT_THRESHOLD


@pytest.fixture(scope="module")
def flat():
    """Four overlapping classes in 16 features, a third of the queries trusted (ratio >= 1.5): cells of 16
    rows probed one at a time get about 17 % of the trust decisions wrong.  Queries are drawn like the rows."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(4, 16))
    groups, own = rng.integers(4, size=3000), rng.integers(4, size=600)
    X = centres[groups] + rng.standard_normal((3000, 16))
    return X, groups, centres[own] + rng.standard_normal((600, 16)), own


def targeted(X, groups, target, exact_price):
    cells = GroupedCellIndex(X, groups, 4, cell_rows=16, n_probe=1)
    search = TargetedCellSearch(cells, X, groups, 4, target, 300, 0)
    measured = search._exact_sample

    def priced(run, rows, n_query):  # the price of exact search, fixed: no dependence on this machine's speed
        return measured(run, rows, n_query)[0], exact_price

    search._exact_sample = priced
    return search


def decisions(distances):
    return distances[:, 1] >= AGREEMENT_THRESHOLD * distances[:, 0]


def test_the_agreement_is_that_of_the_trust_scores_default_decision():
    assert AGREEMENT_THRESHOLD == DEFAULT_THRESHOLD


def test_probing_more_cells_meets_the_target_agreement(flat):
    X, groups, Q, own = flat
    exclude = np.full(len(Q), -1)
    _, true = GroupedExactIndex(X, groups, 4).search_own_and_other(Q, exclude, own)
    default = GroupedCellIndex(X, groups, 4, cell_rows=16, n_probe=1)
    assert np.mean(decisions(default.search_own_and_other(Q, exclude, own)[1]) == decisions(true)) < 0.9
    search = targeted(X, groups, 0.98, exact_price=1e9)
    _, found = search.search_own_and_other(Q, exclude, own)
    assert search.report["agreement"] >= 0.98 and search.report["n_probe"] > 1 and search.report["steps"] >= 1
    assert np.mean(decisions(found) == decisions(true)) >= 0.95  # every query, not just the sample
    assert (found >= true * (1 - 1e-12)).all()  # never below the exact distance
    assert "cells: agreement" in search.report["decision"]


def test_every_group_searched_to_the_target(flat):
    X, groups, Q, _ = flat
    exclude = np.full(len(Q), -1)
    _, true = GroupedExactIndex(X, groups, 4).search(Q, exclude)
    search = targeted(X, groups, 0.97, exact_price=1e9)
    _, found = search.search(Q, exclude)
    assert search.report["agreement"] >= 0.97 and np.mean(np.isclose(found, true, rtol=1e-12)) >= 0.93


def test_escalation_priced_above_exact_search_searches_exactly(flat):
    X, groups, Q, own = flat
    exclude = np.full(len(Q), -1)
    search = targeted(X, groups, 0.98, exact_price=0.0)
    idx, dist = search.search_own_and_other(Q, exclude, own)
    exact_idx, exact_dist = GroupedExactIndex(X, groups, 4).search_own_and_other(Q, exclude, own)
    np.testing.assert_array_equal(idx, exact_idx)
    np.testing.assert_array_equal(dist, exact_dist)
    assert search.report["agreement"] is None and search.report["decision"].startswith("exact search")


def test_auto_reports_how_its_cell_search_ended(monkeypatch, flat):
    X, groups, Q, own = flat
    monkeypatch.setattr(grouped_module, "AUTO_EXACT_MAX_ROWS", 1000)
    report = {}
    nearest_own_and_other(X, groups, 4, own, Q, "auto", report=report)
    assert {"agreement", "n_probe", "decision"} <= set(report)
    report = {}
    nearest_by_group(X, groups, 4, Q, "exact", report=report)
    assert report == {}
    nearest_by_group(X, groups, 4, Q, "auto", report=report, target_recall=0)  # no target: cells as they are
    assert report == {}


def test_the_trust_score_reports_how_its_cell_search_ended(flat):
    """``auto`` beyond its exact threshold: the report says how the search ended, held to the target against exact."""
    import pll

    X, groups, Q, own = flat
    options = {"exact_max_rows": 100, "target_recall": 0.97}
    cells = pll.TrustScore(knn="auto", knn_options=options).fit(X, groups)
    exact = pll.TrustScore(knn="exact").fit(X, groups)
    report = {}
    found = cells.score(Q, own, report=report)
    assert report["decision"].startswith(("cells: agreement", "exact search:")), report
    if report["agreement"] is not None:
        assert report["agreement"] >= 0.97
    true = exact.score(Q, own)
    assert np.mean((found >= DEFAULT_THRESHOLD) == (true >= DEFAULT_THRESHOLD)) >= 0.95  # every query
    untouched = {}
    exact.score(Q, own, report=untouched)
    assert untouched == {}  # exact search by choice: nothing to report

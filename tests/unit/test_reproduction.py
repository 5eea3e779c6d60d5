"""The results page: the papers' numbers beside means, stds, differences and tests computed from grid tables."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pll.reporting.reproduction import DST_PLL_TABLE_1, ReportOptions, noise_sweep, native_runs, results_page, table_1, table_2, table_2_ordering

PAPER_TEXT = ReportOptions("paper_text", "eq1", "paired")
AUTHORS = ReportOptions("authors_code", "authors_script", "unpaired")


def grid_table(rng):
    """A grid_metrics table as `pll benchmark` logs it: native and trust rows per cell."""
    rows = []
    settings = [("../shared/data/uci/ecoli.arff", "class_dependent(p=0.7, eps=0.7, r=1)"),
                ("../shared/data/uci/flare.arff", "class_dependent(p=0.7, eps=0.7, r=1)"),
                ("../shared/data/uci/ecoli.arff", "uniform(p=0.5, r=2)"),
                ("../shared/data/realworld/bird-song.mat", "none"),
                ("../shared/data/realworld/msrc-v2.mat", "remove_true_label(nu=0.0)"),
                ("../shared/data/realworld/msrc-v2.mat", "remove_true_label(nu=0.3)")]
    for dataset, noise in settings:
        for seed in range(4):
            for variant, base in (("pl_knn k=10", 0.80), ("dst_pll k=10", 0.78), ("ipal k=10", 0.75),
                                  ("pl_aknn max_neighbors=50", 0.70)):
                nu = 0.3 if "0.3" in noise else 0.0
                acc = base - (0.5 * nu if variant.startswith("pl_knn") else 0.0) + rng.normal(0, 0.01)
                for reject in ("native", "trust"):
                    rows.append({
                        "cell": f"{dataset}{noise}{seed}{variant}", "dataset": dataset, "noise": noise, "seed": seed,
                        "variant": variant, "features": "minmax", "knn": "exact", "method": variant,
                        "reject": reject, "accuracy": acc,
                        **{f"risk_{lam:.2f}": rng.uniform(lam, lam + 0.1) for lam in (0.0, 0.05, 0.1, 0.15, 0.2)},
                        "script_covered_accuracy": rng.uniform(0.8, 1.0) if reject == "native" else np.nan,
                        "script_rejection_rate": rng.uniform(0.0, 0.5) if reject == "native" else np.nan,
                    })
    return pd.DataFrame(rows)


def test_table_1_sets_the_papers_numbers_beside_the_mean_over_data_sets_and_seeds():
    table = grid_table(np.random.default_rng(0))
    runs = native_runs(table)
    t1 = table_1(runs, PAPER_TEXT).set_index(["setting", "method"])
    uci = runs[(runs["kind"] == "uci") & (runs["model"] == "class_dependent")]
    for method, name in (("pl_knn", "PL-kNN"), ("dst_pll", "DST-PLL"), ("ipal", "IPAL")):
        acc = uci.loc[uci["method"] == method, "accuracy"] * 100
        row = t1.loc[("uci / class_dependent", name)]
        assert row["project"] == f"{acc.mean():.1f} (± {acc.std(ddof=1):.1f})"
        assert (row["data sets"], row["runs"]) == (2, 8)
        paper_mean, paper_std = DST_PLL_TABLE_1[("uci", "class_dependent")][method]
        diff = acc.mean() - paper_mean
        assert row["difference"] == f"{diff:+.1f}"
        assert row["within ±2"] == ("yes" if abs(diff) <= 2 else "no")
        assert row["within paper std"] == ("yes" if abs(diff) <= paper_std else "no")
    # The test against DST-PLL: paired by (data set, seed) in the text's reading, unpaired in the script's.
    knn = uci[uci["method"] == "pl_knn"].sort_values(["set", "seed"])["accuracy"].to_numpy()
    dst = uci[uci["method"] == "dst_pll"].sort_values(["set", "seed"])["accuracy"].to_numpy()
    assert float(t1.loc[("uci / class_dependent", "PL-kNN"), "p vs DST-PLL"]) == pytest.approx(
        stats.ttest_rel(knn, dst).pvalue, rel=1e-2)
    unpaired = table_1(runs, AUTHORS).set_index(["setting", "method"])
    assert float(unpaired.loc[("uci / class_dependent", "PL-kNN"), "p vs DST-PLL"]) == pytest.approx(
        stats.ttest_ind(knn, dst).pvalue, rel=1e-2)
    # Settings without runs leave no rows; PL A-kNN is not one of the paper's methods.
    assert "uci / instance_dependent" not in t1.index.get_level_values(0)
    assert "PL A-kNN" not in t1.index.get_level_values(1)


def test_table_2_averages_every_table_setting_and_its_ordering_is_checked_under_both_aggregations():
    table = grid_table(np.random.default_rng(1))
    runs = native_runs(table)
    t2 = table_2(runs, PAPER_TEXT).set_index("method")
    # Four table settings (two UCI class-dependent, one uniform, one real-world) x 4 seeds; the sweeps left out.
    assert t2.loc["DST-PLL", "runs"] == 16
    covered = runs[(runs["method"] == "dst_pll") & (runs["model"] != "remove_true_label")]
    assert t2.loc["DST-PLL", "_mean_0.10"] == pytest.approx(covered["risk_0.10"].mean())
    order = table_2_ordering(runs).set_index("risk aggregation")
    knn = runs[(runs["method"] == "pl_knn") & (runs["model"] != "remove_true_label")]
    below = covered["risk_0.10"].mean() < knn["risk_0.10"].mean()
    assert order.loc["eq1", "λ=0.10"].startswith("yes" if below else "no")
    authors = (1 - covered["script_covered_accuracy"].mean()) + 0.1 * covered["script_rejection_rate"].mean()
    assert f"{authors:.3f} vs" in order.loc["authors_script", "λ=0.10"]


def test_noise_sweep_compares_pl_aknn_with_10_nn_per_noise_level():
    runs = native_runs(grid_table(np.random.default_rng(2)))
    sweep = noise_sweep(runs, dataset="msrc-v2", model="remove_true_label").set_index("nu")
    assert list(sweep.index) == [0.0, 0.3] and (sweep["seeds"] == 4).all()
    at = runs[(runs["set"] == "msrc-v2") & runs["noise"].str.contains("0.3")]
    a = at[at["method"] == "pl_aknn"].sort_values("seed")["accuracy"] * 100
    b = at[at["method"] == "pl_knn"].sort_values("seed")["accuracy"] * 100
    assert sweep.loc[0.3, "difference"] == f"{a.mean() - b.mean():+.1f}"
    assert float(sweep.loc[0.3, "p"]) == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-2)


def test_results_page_names_its_sources_and_says_what_it_cannot_cover():
    table = grid_table(np.random.default_rng(3))
    sources = [{"grid": "g", "run": "abc", "status": "FINISHED", "cells finished": 10, "minutes": 1.5}]
    page = results_page(table, AUTHORS, sources, "pll report e")
    assert page.startswith("# Reproducing the papers' tables")
    assert "Written by `pll report e`" in page and "| g    | abc |" in page
    assert "preset `authors_code`; risks aggregated as `authors_script`; t-tests `unpaired`" in page
    assert "mir-flickr and yahoo-news, not available here" in page
    assert "mfeat-fourier with cluster-dependent bags" in page and "_No runs of this table were found._" in page
    # The checks: Table 1 cells within ±2 per setting, and the sweep's direction (PL A-kNN is 0.10 below 10-NN at
    # nu = 0 and 0.05 above at nu = 0.3 here).
    assert "- Table 1, uci / class_dependent: " in page and " of 3 methods within ±2 points." in page
    assert "- msrc-v2, true label removed: PL A-kNN above 10-NN at 1 of 2 noise levels" in page

"""The run report and the result tables it is made of."""

import re

import numpy as np
import pandas as pd

from pll.evaluation import compare_methods
from pll.reporting.report import run_report
from pll.reporting.tables import markdown_table, risk_table, significance_table

# A run's comparison table (pll.experiment.Evaluation.table): a row per method run and reject option.
TABLE = pd.DataFrame([
    {"method": "dst_pll", "reject": "native", "accuracy": 0.9, "risk_0.00": 0.02, "risk_0.10": 0.05,
     "cal_threshold_0.10": 0.25, "cal_risk_0.10": 0.04, "cal_rejection_rate_0.10": 0.2},
    {"method": "pl_knn k=5", "reject": "trust", "accuracy": 0.8, "risk_0.00": 0.1, "risk_0.10": 0.12,
     "cal_threshold_0.10": 1.5, "cal_risk_0.10": 0.11, "cal_rejection_rate_0.10": 0.05},
])


def test_risk_table_pairs_own_and_calibrated_risks_per_lambda():
    table = risk_table(TABLE)
    assert list(table.columns[:4]) == ["method", "reject", "lambda", "risk"]
    row = table[(table["method"] == "pl_knn k=5") & (table["lambda"] == 0.1)].iloc[0]
    assert (row["reject"], row["risk"], row["cal_risk"], row["cal_threshold"]) == ("trust", 0.12, 0.11, 1.5)
    assert row["cal_rejection_rate"] == 0.05
    # λ = 0 has no calibrated value here: missing, not invented.
    zero = table[(table["method"] == "dst_pll") & (table["lambda"] == 0.0)].iloc[0]
    assert zero["risk"] == 0.02 and np.isnan(zero["cal_risk"])
    assert risk_table(pd.DataFrame({"method": ["m"], "reject": ["native"], "accuracy": [1.0]})).empty


def test_significance_table_bolds_the_marked_methods():
    rows = []
    for ds in ("x", "y"):
        for seed in range(4):
            rows.append({"dataset": ds, "seed": seed, "method": "a", "value": 0.9 + 0.01 * seed})
            rows.append({"dataset": ds, "seed": seed, "method": "b", "value": 0.5 + 0.02 * (seed % 2)})
    table = significance_table(compare_methods(pd.DataFrame(rows)), scale=100, digits=1)
    assert list(table.columns) == ["method", "x", "y"]
    a = table.set_index("method").loc["a"]
    assert a["x"] == "**91.5 (± 1.3)**"
    assert not table.set_index("method").loc["b", "x"].startswith("**")


def test_report_puts_tables_and_relative_figure_links_together():
    figures = {"Reject trade-off": "figures/tradeoff.png", "Risk against λ": "figures/risk.png"}
    summary = {"name": "digits", "rows": 1797, "classes": 10, "average_bag_size": 1.35, "noise": "class_dependent"}
    text = run_report(summary, TABLE, risk_table(TABLE), figures, truth="true labels")
    assert text.startswith("# Reject-option evaluation: digits")
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert links == ["figures/tradeoff.png", "figures/risk.png"]
    assert all(not link.startswith(("/", "http")) for link in links)
    assert "| correct means | true labels |" in text and "| average bag size | 1.350 |" in text
    own_header = next(line for line in text.splitlines() if line.startswith("| method"))
    assert "accuracy" in own_header and "cal_" not in own_header  # calibrated values go to their own table
    assert markdown_table(risk_table(TABLE)) in text
    assert "`cal_threshold_<λ>`" in text  # the metric names are explained


def test_report_without_calibration_leaves_that_section_out():
    text = run_report({"name": "d"}, pd.DataFrame({"method": ["m"], "reject": ["native"]}), pd.DataFrame(), {})
    assert "calibrated" not in text.split("## Metric names")[0].lower()
    assert "| m      | native |" in text

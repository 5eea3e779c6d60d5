"""Reject thresholds calibrated from bags alone against thresholds calibrated with true labels (issue #17).

Data: the real partial-label sets bird-song and msrc-v2, bags as loaded (the pipeline's ``auto`` noise
keeps them) and their true labels ``ds.y``, used here only to judge.  For each seed the split of
:func:`pll.experiment.make_split`; features as a run makes them (min-max for PL-kNN and DST-PLL,
``pl_aknn_real`` for PL A-kNN, fitted on all training rows); as :func:`pll.experiment.run_method` does,
a model fitted on the fitting rows predicts the validation hold-out and one fitted on all training rows
predicts the test rows.  On the hold-out, per λ, two thresholds: :func:`pll.evaluation.calibrate_thresholds`
with true labels, and :func:`pll.evaluation.bag_bounds.calibrate_thresholds_from_bags` (the smallest upper bound of
R_λ, from bags only).  Printed: each threshold with the test R_λ it gives (and test rejection rate), the
hold-out bounds at the bag threshold with the true hold-out R_λ between them, and whether it rejects all;
then means over seeds; then PL-kNN's per-k table (:func:`pll.evaluation.bag_bounds.bounds_by_setting`), averaged
over seeds, with the true values beside the bounds.

Run: ``.venv/bin/python benchmarks/bag_bounds.py``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

import pll
from pll.evaluation.bag_bounds import bounds_by_setting, calibrate_thresholds_from_bags
from pll.evaluation import calibrate_thresholds, calibrated_metrics
from pll.experiment import make_split
from pll.preprocessing import featurize

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "realworld"  # ../shared/data beside the checkout
DATASETS = ("bird-song", "msrc-v2")
METHODS = {"pl_knn": (pll.PlKnn, "minmax"), "dst_pll": (pll.DstPll, "minmax"), "pl_aknn": (pll.PlAknn, "pl_aknn_real")}
LAMBDAS = (0.05, 0.10, 0.20)
SEEDS = (0, 1, 2)
KS = (5, 10, 20)


class Split:
    """One seed's rows of a data set, features per pipeline, and the hold-out's and test rows' truth."""

    def __init__(self, ds, seed):
        self.rows = make_split(ds.n_rows, seed)
        val = self.rows.train[self.rows.val]
        self.bags_val, self.y_val, self.y_test = ds.S[val], ds.y[val], ds.y[self.rows.test]
        names = {features for _, features in METHODS.values()}
        self.features = {name: featurize(ds, self.rows.train, self.rows.test, name) for name in names}

    def predict(self, make, features):
        """Hold-out rows predicted by a model fitted on the fitting rows, test rows by one fitted on all of train."""
        split, rows = self.features[features], self.rows
        holdout = make().fit(split.X_train[rows.fit], split.train.S[rows.fit])
        full = make().fit(split.X_train, split.train.S)
        return holdout.predict_with_reject(split.X_train[rows.val]), full.predict_with_reject(split.X_test)


def compare(split, val, test):
    """Per λ: the true-label and the bag-based threshold, the test R_λ of each, and the hold-out bounds."""
    true_cal = calibrate_thresholds(val.score, val.labels == split.y_val, LAMBDAS)
    bag_cal = calibrate_thresholds_from_bags(val.score, val.labels, split.bags_val, LAMBDAS)
    test_correct = test.labels == split.y_test
    true_test = calibrated_metrics(true_cal, test.score, test_correct)
    bag_test = calibrated_metrics(bag_cal, test.score, test_correct)
    bag_val = calibrated_metrics(bag_cal, val.score, val.labels == split.y_val)
    for lam, row in zip(LAMBDAS, bag_cal.itertuples()):
        s = f"{lam:.2f}"
        yield {
            "lambda": lam,
            "true_thr": true_test[f"cal_threshold_{s}"],
            "true_test_R": true_test[f"cal_risk_{s}"],
            "true_test_rej": true_test[f"cal_rejection_rate_{s}"],
            "bag_thr": row.threshold,
            "bag_test_R": bag_test[f"cal_risk_{s}"],
            "bag_test_rej": bag_test[f"cal_rejection_rate_{s}"],
            "val_lower": row.risk_lower,
            "val_true": bag_val[f"cal_risk_{s}"],
            "val_upper": row.risk_upper,
            "rejects_all": row.rejects_all,
        }


def per_k(split, seed):
    """PL-kNN's bag-based table per k, with the true hold-out accuracy and R_λ and the test R_λ beside it."""
    runs = {k: split.predict(lambda k=k: pll.PlKnn(n_neighbors=k, random_state=seed), "minmax") for k in KS}
    table = bounds_by_setting({k: (val.score, val.labels) for k, (val, _) in runs.items()}, split.bags_val, LAMBDAS)
    parts = []
    for k, (val, test) in runs.items():
        part = table[table["setting"] == k]
        val_true = calibrated_metrics(part, val.score, val.labels == split.y_val)
        test_true = calibrated_metrics(part, test.score, test.labels == split.y_test)
        parts.append(part.assign(
            val_accuracy=np.mean(val.labels == split.y_val),
            val_true=[val_true[f"cal_risk_{lam:.2f}"] for lam in LAMBDAS],
            test_R=[test_true[f"cal_risk_{lam:.2f}"] for lam in LAMBDAS],
        ))
    return pd.concat(parts).rename(columns={"setting": "k"})


def show(title, table):
    print(f"\n{title}")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


def collect():
    """The per-seed comparison rows and PL-kNN's per-k rows of every data set."""
    rows, ks = [], []
    for name in DATASETS:
        ds = pll.load_dataset(f"{DATA}/{name}.mat")
        if ds.y is None or not ds.S[np.arange(ds.n_rows), ds.y].all():
            raise SystemExit(f"{name}: needs true labels inside every bag to judge the bounds")
        single = np.mean(ds.S.sum(axis=1) == 1)
        print(f"{name}: {ds.n_rows} rows, {ds.n_classes} classes, single-label bags {single:.1%}")
        for seed in SEEDS:
            split = Split(ds, seed)
            for method, (cls, features) in METHODS.items():
                val, test = split.predict(lambda cls=cls: cls(random_state=seed), features)
                rows += [{"data": name, "method": method, "seed": seed, **r} for r in compare(split, val, test)]
            ks.append(per_k(split, seed).assign(data=name, seed=seed))
    return pd.DataFrame(rows), pd.concat(ks, ignore_index=True)


def bounds_hold(lower, true, upper):
    """Whether every true hold-out R_λ lies within its bounds (float slack only)."""
    return bool(((lower <= true + 1e-12) & (true <= upper + 1e-12)).all())


def main():
    t0 = time.perf_counter()
    detail, ks = collect()
    show("Per seed (thresholds on the validation hold-out; R on test rows unless val_*):", detail)
    means = detail.groupby(["data", "method", "lambda"], sort=False).agg(
        true_test_R=("true_test_R", "mean"), bag_test_R=("bag_test_R", "mean"), true_test_rej=("true_test_rej", "mean"),
        bag_test_rej=("bag_test_rej", "mean"), val_lower=("val_lower", "mean"), val_true=("val_true", "mean"),
        val_upper=("val_upper", "mean"), rejects_all=("rejects_all", "sum"),
    ).reset_index()
    show(f"Means over {len(SEEDS)} seeds (rejects_all: number of seeds):", means)
    k_table = ks.groupby(["data", "k", "lambda"], sort=False).agg(
        accuracy_lower=("accuracy_lower", "mean"), val_accuracy=("val_accuracy", "mean"),
        accuracy_upper=("accuracy_upper", "mean"), val_lower=("risk_lower", "mean"), val_true=("val_true", "mean"),
        val_upper=("risk_upper", "mean"), test_R=("test_R", "mean"), rejects_all=("rejects_all", "sum"),
    ).reset_index()
    show(f"PL-kNN per k, bag-based thresholds, means over {len(SEEDS)} seeds "
         "(val_accuracy, val_true, test_R: true labels):", k_table)
    holds = bounds_hold(detail["val_lower"], detail["val_true"], detail["val_upper"]) and bounds_hold(
        ks["risk_lower"], ks["val_true"], ks["risk_upper"])
    print(f"\nlower <= true <= upper on every hold-out: {holds}; {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

"""Auditing bags (`pll.audit`): are the bags that miss their true label found, and better than a majority vote?

Data where the truth is known: digits with class-dependent bags (:func:`pll.noise.class_dependent`,
defaults p = 0.7, ε = 0.7, r = 1) and bird-song with its own bags -- every bag holds its true label,
which is checked -- then :func:`pll.noise.remove_true_label` at ν = 0.1 and 0.3, which makes exactly
the bags without their true label.  The seed drives both noise draws.  Features min-max scaled
(``make_features("minmax")``, fitted on all rows: the audit judges the training rows themselves).
Emptied bags are trivially found (their suspicion is 1 and they rank first): they are counted apart
and left out of every metric.  On the non-empty rows: the base rate (fraction of wrong bags, the
precision of a random ranking), the precision of the top 5 % and 10 %
(:func:`pll.audit.precision_at_top`) and the AUC (:func:`pll.audit.ranking_auc`) of

* ``audit``: :func:`pll.audit.audit_bags` with its defaults (k = 10, distance weights, prior 1,
  refinement on), chosen once on msrc-v2, mfeat-fourier and semeion (seeds 100-104), not on these;
* ``majority``: :func:`pll.audit.majority_disagreement` (k = 10), the baseline;
* ``audit_1hop``: ``audit_bags(refine=False)``, an ablation, shown, not tested.

Mean ± std over 5 seeds, a paired t-test (:func:`scipy.stats.ttest_rel`, two-sided) of AUC audit vs
majority per setting and per data set (both ν, 10 pairs), and the run time of audit over majority in
the same run: both on one shared neighbor search, and each with its own search.

Run: ``.venv/bin/python benchmarks/audit.py``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import ttest_rel

import pll
from pll.audit import audit_bags, majority_disagreement, precision_at_top, ranking_auc
from pll.preprocessing import make_features
from pll.neighbors import kneighbors

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "realworld"  # ../shared/data beside the checkout
SEEDS = range(5)
NUS = (0.1, 0.3)
QS = (0.05, 0.10)
K = 10
METHODS = ("audit", "majority", "audit_1hop")


def base_bags(name, ds, seed):
    """The bags before removal: class-dependent for digits, the data's own for bird-song."""
    if name == "digits":
        return pll.noise.class_dependent(ds.y, ds.n_classes, random_state=seed)
    return ds.S


def suspicion(table, n):
    """The audit table's suspicion in row order."""
    out = np.empty(n)
    out[table["row"].to_numpy()] = table["suspicion"].to_numpy()
    return out


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def one_setting(X, S, y):
    """Metrics of every method, the counts, and the run times on one set of bags."""
    n = S.shape[0]
    wrong = ~S[np.arange(n), y]
    empty = ~S.any(axis=1)
    nb, t_knn = timed(lambda: kneighbors(X, None, k=K))
    scores, seconds = {}, {}
    table, seconds["audit"] = timed(lambda: audit_bags(X, S, n_neighbors=K, neighbors=nb))
    scores["audit"] = suspicion(table, n)
    scores["majority"], seconds["majority"] = timed(lambda: majority_disagreement(X, S, n_neighbors=K, neighbors=nb))
    scores["audit_1hop"] = suspicion(audit_bags(X, S, n_neighbors=K, neighbors=nb, refine=False), n)
    _, own_audit = timed(lambda: audit_bags(X, S, n_neighbors=K))
    _, own_majority = timed(lambda: majority_disagreement(X, S, n_neighbors=K))
    n_empty = int(empty.sum())  # the audit ranks exactly the empty bags first
    assert table["empty_bag"].iloc[:n_empty].all() and set(table["row"].iloc[:n_empty]) == set(np.flatnonzero(empty))
    rows = []
    for method, score in scores.items():
        row = {"method": method, "auc": ranking_auc(score, wrong, empty=empty)}
        row.update({f"p@{q:.0%}": precision_at_top(score, wrong, q, empty=empty) for q in QS})
        rows.append(row)
    counts = {
        "rows": n,
        "empty": int(empty.sum()),
        "wrong_nonempty": int((wrong & ~empty).sum()),
        "base_rate": float(wrong[~empty].mean()),
    }
    times = {
        "shared": seconds["audit"] / seconds["majority"],
        "own": own_audit / own_majority,
        "knn_s": t_knn,
        "audit_s": seconds["audit"],
        "majority_s": seconds["majority"],
    }
    return rows, counts, times


def collect():
    rows, counts, times = [], [], []
    for name in ("digits", "bird-song"):
        ds = pll.load_dataset("digits" if name == "digits" else str(DATA / f"{name}.mat"))
        X = make_features("minmax").fit_transform(ds.X)
        for seed in SEEDS:
            S0 = base_bags(name, ds, seed)
            if not S0[np.arange(ds.n_rows), ds.y].all():
                raise SystemExit(f"{name}: a bag misses its true label before removal; the truth is not known")
            for nu in NUS:
                S = pll.noise.remove_true_label(S0, ds.y, nu, random_state=seed)
                r, c, t = one_setting(X, S, ds.y)
                key = {"data": name, "nu": nu, "seed": seed}
                rows += [{**key, **row} for row in r]
                counts.append({**key, **c})
                times.append({**key, **t})
    return pd.DataFrame(rows), pd.DataFrame(counts), pd.DataFrame(times)


def mean_std(values):
    return f"{values.mean():.3f} ± {values.std(ddof=1):.3f}"


def main():
    t0 = time.perf_counter()
    detail, counts, times = collect()
    metrics = ["p@5%", "p@10%", "auc"]
    print(f"k = {K}; {len(SEEDS)} seeds; mean ± std over seeds; metrics on non-empty bags only\n")
    c = counts.groupby(["data", "nu"]).agg(
        rows=("rows", "first"), empty_bags=("empty", "mean"), wrong_bags=("wrong_nonempty", "mean"),
        base_rate=("base_rate", "mean"),
    ).reset_index()
    print("Bags (means over seeds); the empty bags rank first in every audit table (checked), "
          "and are left out below:")
    print(c.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    table = []
    for (data, nu, method), group in detail.groupby(["data", "nu", "method"], sort=False):
        base = counts[(counts["data"] == data) & (counts["nu"] == nu)]["base_rate"]
        table.append({"data": data, "nu": nu, "method": method, "base_rate": f"{base.mean():.3f}",
                      **{m: mean_std(group[m]) for m in metrics}})
    print("\nRanking of wrong bags:")
    print(pd.DataFrame(table).to_string(index=False))

    print("\nPaired t-test of AUC, audit vs majority (two-sided):")
    tests = []
    wide = detail.pivot_table(index=["data", "nu", "seed"], columns="method", values="auc")
    for key, group in list(wide.groupby(level=["data", "nu"])) + list(wide.groupby(level="data")):
        key = key if isinstance(key, tuple) else (key, "both")
        diff = group["audit"] - group["majority"]
        tests.append({"data": key[0], "nu": key[1], "pairs": len(group), "auc_audit": group["audit"].mean(),
                      "auc_majority": group["majority"].mean(), "diff": diff.mean(),
                      "wins": f"{int((diff > 0).sum())}/{len(group)}",
                      "p_value": ttest_rel(group["audit"], group["majority"]).pvalue})
    print(pd.DataFrame(tests).to_string(index=False, float_format=lambda v: f"{v:.4g}"))

    print("\nRun time, audit / majority (median over settings):")
    ratio = times.groupby("data").agg(
        shared_neighbors=("shared", "median"), own_search=("own", "median"), knn_s=("knn_s", "median"),
        audit_s=("audit_s", "median"), majority_s=("majority_s", "median"),
    ).reset_index()
    print(ratio.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

"""Conformal prediction sets from partial labels on real data: coverage, size and the reject option they give.

Data: bird-song and msrc-v2, with their bags as loaded (noise ``none``) and their true labels ``ds.y``,
which are used only to judge.  Every real bag of both files holds its true label (checked, and
counted, below), as the guarantee of :mod:`pll.conformal` assumes.

For each of 5 seeds, each α in {0.1, 0.2}, and the methods PL-kNN, DST-PLL (min-max features) and
PL A-kNN (``pl_aknn_real`` features, the pipeline's default):

* ``max`` (the guaranteed variant): the metrics ``<method>.conformal.*`` of
  :func:`pll.experiment.run_protocol` with ``noise="none"`` and ``conformal_alpha=α``: features,
  model and kNN index fitted on the fitting rows alone, ``q̂`` calibrated on the validation rows'
  bags, sets built on the test rows; the reject option accepts a row iff its set is one label.
* ``min`` (no guarantee) and ``max∩bag`` (the guaranteed sets intersected with each test row's own
  bag, which keeps the guarantee but uses the test bag), with :class:`pll.ConformalSets` directly,
  on the same :func:`pll.experiment.calibration_split` and the same model as the run builds.  The
  same code also rebuilds ``max`` and checks that it gives the run's metrics exactly.

Measured on the test rows: coverage of the true label (and its lowest per-class value), mean set
size, singleton and empty rates, and the reject option's covered accuracy and rejection rate
(covered accuracy is left out of the mean for a seed that accepts no row, where the library
reports 1.0 by convention).  ``q̂`` is the calibrated threshold on ``1 − p̂(y | x)``.  A ``q̂`` of
1 means every class is in every set.  Printed: one line per data set (classes = size of the trivial
set that always covers, share of single-label bags, mean bag size), one table per data set × α
(mean ± std over seeds), and for ``max`` the number of seeds whose coverage fell below 1 − α.

Run: ``.venv/bin/python benchmarks/conformal_sets.py`` (about 20 s on 2 shared cores).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

import pll
from pll.conformal import ConformalSets, set_report
from pll.evaluation import reject_report
from pll.experiment import calibration_split, plan_run, run_protocol
from pll.methods import make_method
from pll.neighbors.registry import DEFAULT_BACKEND

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "realworld"  # ../shared/data beside the checkout
DATASETS = ("bird-song", "msrc-v2")
METHODS = ("pl_knn", "dst_pll", "pl_aknn")
ALPHAS = (0.1, 0.2)
SEEDS = (0, 1, 2, 3, 4)
VARIANTS = ("max", "min", "max∩bag")
COLUMNS = ("coverage", "worst_class_cov", "mean_set_size", "singleton_rate", "empty_rate", "covered_accuracy",
           "rejection_rate", "q_hat")


def _row(m, accepted_any):
    """The columns of a table row from set and reject metrics ``m`` (covered accuracy NaN when nothing is accepted)."""
    return {
        "coverage": m["coverage"],
        "worst_class_cov": min(v for k, v in m.items() if k.startswith("coverage_")),
        "mean_set_size": m["mean_set_size"],
        "singleton_rate": m["singleton_rate"],
        "empty_rate": m["empty_rate"],
        "covered_accuracy": m["covered_accuracy"] if accepted_any else math.nan,
        "rejection_rate": m["rejection_rate"],
    }


def summary(sets, labels, accept, y_test, n_classes):
    """The set metrics and the reject option's covered accuracy and rejection rate, from predictions."""
    return _row({**set_report(sets, y_test), **reject_report(y_test, labels, accept, n_classes=n_classes)}, accept.any())


def from_run(metrics, method):
    """The ``conformal.*`` metrics of the run's method run ``method``, in the names of :func:`summary`."""
    m = {k.split(".", 1)[1]: v for k, v in metrics[method].items() if k.startswith("conformal.")}
    return _row(m, m["rejection_rate"] < 1.0)


def direct(data, rows, seed):
    """Per method, α and variant: the sets of :class:`ConformalSets` on the run's calibration split and model."""
    plan = plan_run(METHODS)
    y_test, S_test = data.y[rows.test], data.S[rows.test]
    out = {}
    for group in plan.groups:
        cal = calibration_split(data, rows, group.features, group.k, DEFAULT_BACKEND)
        S_val = cal.split.test.S[: cal.n_val]
        for run in group.runs:
            method = run.name
            holdout = make_method(run.method, run.params, random_state=seed)
            holdout.fit(cal.split.X_train, cal.split.train.S)
            for alpha in ALPHAS:
                for variant in VARIANTS:
                    sets = ConformalSets(holdout, alpha=alpha, variant=variant.split("∩")[0])
                    sets.fit(cal.X_val, S_val, neighbors=cal.val)
                    pred = sets.predict_with_reject(cal.X_test, neighbors=cal.test,
                                                    candidates=S_test if variant == "max∩bag" else None)
                    out[method, alpha, variant] = {
                        **summary(pred.sets, pred.labels, pred.accept, y_test, data.n_classes),
                        "q_hat": sets.quantile_,
                    }
    return out


def same(a, b):
    return all((math.isnan(a[k]) and math.isnan(b[k])) or a[k] == b[k] for k in a)


def collect(name):
    """One row per seed, α, method and variant; and whether the rebuilt ``max`` sets equal the run's."""
    ds = pll.load_dataset(DATA / f"{name}.mat")
    size = ds.S.sum(axis=1)
    missing = int((~ds.S[np.arange(ds.n_rows), ds.y]).sum())
    print(f"{name}: {ds.n_rows} rows, {ds.n_classes} classes (trivial always-covering set: {ds.n_classes} labels), "
          f"single-label bags {np.mean(size == 1):.1%}, mean bag size {size.mean():.3f}, "
          f"bags without their true label: {missing}, empty bags: {int((size == 0).sum())}")
    rows, reproduced, test_bag = [], True, []
    for seed in SEEDS:
        runs = {alpha: run_protocol(ds, seed=seed, methods=list(METHODS), noise="none", conformal_alpha=alpha)
                for alpha in ALPHAS}
        result = runs[ALPHAS[0]]
        test_bag.append(result.data.S[result.rows.test].sum(axis=1).mean())
        rebuilt = direct(result.data, result.rows, seed)
        for (method, alpha, variant), values in rebuilt.items():
            if variant == "max":
                run = from_run(runs[alpha].metrics, method)
                reproduced &= same(run, {k: values[k] for k in run})
                values = {**run, "q_hat": values["q_hat"]}
            rows.append({"data": name, "alpha": alpha, "method": method, "variant": variant, "seed": seed, **values})
    print(f"  mean bag size of the test rows over seeds: {np.mean(test_bag):.3f}; "
          f"max variant rebuilt from the library equals run_protocol's metrics: {reproduced}")
    return pd.DataFrame(rows)


def pm(values):
    values = values.dropna()
    if values.empty:
        return "—"
    return f"{values.mean():.3f} ± {values.std(ddof=1) if values.size > 1 else 0.0:.3f}"


def table(frame):
    out = frame.groupby(["method", "variant"], sort=False).agg(**{c: (c, pm) for c in COLUMNS}).reset_index()
    return out.rename(columns={"worst_class_cov": "worst class cov", "mean_set_size": "set size",
                               "singleton_rate": "singleton", "empty_rate": "empty",
                               "covered_accuracy": "cov. acc", "rejection_rate": "rejection", "q_hat": "q̂"})


def main():
    t0 = time.perf_counter()
    frames = []
    for name in DATASETS:
        frame = collect(name)
        frames.append(frame)
        for alpha in ALPHAS:
            part = frame[frame["alpha"] == alpha]
            print(f"\n{name}, α = {alpha} (target coverage ≥ {1 - alpha:.2f}; mean ± std over {len(SEEDS)} seeds, "
                  "test rows; cov. acc over seeds that accept a row):")
            print(table(part).to_string(index=False))
            guaranteed = part[part["variant"] == "max"]
            for method, g in guaranteed.groupby("method", sort=False):
                below = int((g["coverage"] < 1 - alpha).sum())
                print(f"  {method} max: coverage below {1 - alpha:.2f} in {below} of {len(g)} seeds, "
                      f"lowest {g['coverage'].min():.3f}; seeds with q̂ = 1 (every set all classes): "
                      f"{int((g['q_hat'] >= 1.0).sum())}")
        print()
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

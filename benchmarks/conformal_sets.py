"""Conformal prediction sets from partial labels: each procedure's set size and coverage beside an oracle's.

The oracle is calibrated on the true labels (bags of one true label each), with the same model and
score: the smallest sets a calibration can give at its coverage.  The procedures of
:mod:`pll.conformal` calibrate on the bags alone; the true labels only judge them.

Data: sklearn digits with class-dependent noise (:func:`pll.noise.class_dependent`, default
parameters, seeded per split), and ``../shared/data/realworld/bird-song.mat`` and ``msrc-v2.mat``
with their real bags.  Ten seeds of a 60/20/20 split: the method is fitted (min-max features fitted
on the same rows) on 60 %, calibrated on 20 %, judged on the other 20 %.  α ∈ {0.1, 0.2}.

Printed:

1. Per method (DST-PLL, PL-kNN, PL A-kNN on its paper's features), data set and α, the oracle's mean
   set size with each score of :data:`pll.conformal.SCORES`; per method, each score's geometric mean
   size ratio to the smallest, beside the default of :data:`pll.conformal.DEFAULT_SCORES` (the one
   with the smallest ratio).
2. Per method with its default score, data set and α: each procedure's mean set size, its ratio to
   the oracle's, its coverage of the true label and its rejection rate (a row is accepted iff its
   set is one label), and the label-free bounds of the calibration coverage.  ``target`` marks the
   issue's bar for the default procedure (set for DST-PLL): size ≤ 1.15 × the oracle's and coverage
   ≥ 1 − α − 0.015.
3. Beyond the bar, DST-PLL on five UCI data sets (``../shared/data/uci``) with uniform and with
   instance-dependent noise (:mod:`pll.noise` defaults, drawn per seed), 5 seeds, α = 0.1: the oracle's
   size and coverage beside ``monte_carlo``'s and ``conservative``'s.
4. The calibration time of ``monte_carlo`` (which fits a temperature) as a ratio to ``conservative``'s.

Run: ``.venv/bin/python benchmarks/conformal_sets.py`` (parts 1–2 about 20 s on 2 shared cores; part 3 a few
minutes, most of it fitting instance-dependent noise).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

import pll
from pll.conformal import DEFAULT_PROCEDURE, DEFAULT_SCORES, PROCEDURES, SCORES, ConformalSets, set_report
from pll.features import make_features
from pll.methods import METHODS as REGISTRY
from pll.methods import make_method

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"  # ../shared/data beside the checkout
DATA = SHARED / "realworld"
DATASETS = ("digits", "bird-song", "msrc-v2")
UCI = ("ecoli", "pendigits", "semeion", "statlog-landsat-satellite", "mfeat-fourier")
UCI_NOISE = ("uniform", "instance_dependent")
METHODS = {"dst_pll": "minmax", "pl_knn": "minmax", "pl_aknn": "pl_aknn_real"}
ALPHAS = (0.1, 0.2)
SEEDS = range(10)
SIZE_BAR, COVERAGE_SLACK = 1.15, 0.015


class Precomputed:
    """A fitted method's conformity, computed once: rows of ``X`` are row numbers into it."""

    def __init__(self, values, classes):
        self.values, self.classes_ = values, classes

    def conformity(self, X, neighbors=None):
        return self.values[np.asarray(X, dtype=np.int64)[:, 0]]


def load(name):
    if name == "digits":
        return pll.load_dataset("digits")
    return pll.load_dataset(DATA / f"{name}.mat")


def splits(ds, name):
    """Per seed: bags (digits: class-dependent noise drawn with the seed), and fit, calibration and test rows."""
    for seed in SEEDS:
        S = pll.noise.class_dependent(ds.y, ds.n_classes, random_state=seed) if name == "digits" else ds.S
        perm = np.random.default_rng(seed).permutation(ds.n_rows)
        yield seed, S, np.split(perm, [int(0.6 * ds.n_rows), int(0.8 * ds.n_rows)])


def scored_rows(ds, S, rows, method, features, seed):
    """The method fitted on the fitting rows, its conformity on the calibration and test rows computed once."""
    fit, cal, test = rows
    transformer = make_features(features)
    X_fit = transformer.fit_transform(ds.X[fit]) if features == "minmax" else transformer.fit_transform(ds.X[fit], S[fit])
    model = make_method(method, None, random_state=seed).fit(X_fit, S[fit])
    values = model.conformity(transformer.transform(ds.X[np.concatenate([cal, test])]))
    return Precomputed(values, model.classes_), np.arange(cal.size)[:, None], np.arange(cal.size, values.shape[0])[:, None]


def default_score(method):
    return DEFAULT_SCORES[REGISTRY[method].__name__]


def judge(sets, y):
    report = set_report(sets, y)
    return {"size": report["mean_set_size"], "coverage": report["coverage"], "rejection": 1.0 - report["singleton_rate"]}


def measure():
    """One row per data set, seed, α, method, score and procedure (``oracle`` among them)."""
    rows, seconds = [], {"monte_carlo": 0.0, "conservative": 0.0}
    for name in DATASETS:
        ds = load(name)
        for seed, S, (fit, cal, test) in splits(ds, name):
            truth = np.eye(ds.n_classes, dtype=bool)[ds.y[cal]]
            for method, features in METHODS.items():
                model, X_cal, X_test = scored_rows(ds, S, (fit, cal, test), method, features, seed)
                for alpha in ALPHAS:
                    for score in SCORES:
                        procedures = PROCEDURES if score == default_score(method) else ()
                        for procedure in ("oracle", *procedures):
                            t0 = time.perf_counter()
                            sets = ConformalSets(model, alpha, procedure="conservative" if procedure == "oracle"
                                                 else procedure, score=score)
                            sets.fit(X_cal, truth if procedure == "oracle" else S[cal])
                            if procedure in seconds:
                                seconds[procedure] += time.perf_counter() - t0
                            rows.append({"data": name, "seed": seed, "alpha": alpha, "method": method, "score": score,
                                         "procedure": procedure, **sets.bounds_,
                                         **judge(sets.predict_sets(X_test), ds.y[test])})
    return pd.DataFrame(rows), seconds


def uci_table():
    """DST-PLL on UCI data with synthetic noise: the oracle, ``monte_carlo`` and ``conservative`` at α = 0.1."""
    rows = []
    for name in UCI:
        ds = pll.load_dataset(SHARED / "uci" / f"{name}.arff")
        for noise in UCI_NOISE:
            for seed in range(5):
                S = pll.noise.apply_noise(ds, noise, None, seed).S
                fit, cal, test = np.split(np.random.default_rng(seed).permutation(ds.n_rows),
                                          [int(0.6 * ds.n_rows), int(0.8 * ds.n_rows)])
                model, X_cal, X_test = scored_rows(ds, S, (fit, cal, test), "dst_pll", "minmax", seed)
                truth = np.eye(ds.n_classes, dtype=bool)[ds.y[cal]]
                for procedure in ("oracle", DEFAULT_PROCEDURE, "conservative"):
                    sets = ConformalSets(model, 0.1, procedure="conservative" if procedure == "oracle" else procedure)
                    sets.fit(X_cal, truth if procedure == "oracle" else S[cal])
                    rows.append({"data": name, "noise": noise, "procedure": procedure,
                                 **judge(sets.predict_sets(X_test), ds.y[test])})
    mean = pd.DataFrame(rows).groupby(["data", "noise", "procedure"], sort=False)[["size", "coverage"]].mean()
    table = mean.unstack("procedure")
    for procedure in (DEFAULT_PROCEDURE, "conservative"):
        table[("size/oracle", procedure)] = table[("size", procedure)] / table[("size", "oracle")]
    return table.round(3)


def score_table(frame):
    """Oracle sizes per score; per method, the geometric mean over data sets and α of each score's size over the smallest."""
    oracle = frame[frame["procedure"] == "oracle"]
    table = oracle.pivot_table(index=["method", "data", "alpha"], columns="score", values="size", sort=False)[list(SCORES)]
    ratio = table.div(table.min(axis=1), axis=0)
    overall = np.exp(np.log(ratio).groupby(level="method", sort=False).mean())
    overall["smallest"] = overall.idxmin(axis=1)
    overall["default"] = [default_score(m) for m in overall.index]
    return table.round(3), overall.round(3)


def procedure_table(frame):
    """Per method (with its default score), data set and α: each procedure's means over seeds beside the oracle's."""
    part = frame[[score == default_score(m) for m, score in zip(frame["method"], frame["score"])]]
    mean = part.groupby(["method", "data", "alpha", "procedure"], sort=False).mean(numeric_only=True).reset_index()
    oracle = mean[mean["procedure"] == "oracle"].set_index(["method", "data", "alpha"])["size"]
    mean["size/oracle"] = mean["size"] / oracle.loc[list(zip(mean["method"], mean["data"], mean["alpha"]))].to_numpy()
    bar = (mean["size/oracle"] <= SIZE_BAR) & (mean["coverage"] >= 1 - mean["alpha"] - COVERAGE_SLACK)
    mean["target"] = np.where(mean["procedure"] == DEFAULT_PROCEDURE, np.where(bar, "met", "MISSED"), "")
    columns = ["method", "data", "alpha", "procedure", "size", "size/oracle", "coverage", "rejection",
               "coverage_if_worst", "coverage_if_best", "target"]
    return mean[columns].round(3)


def main():
    t0 = time.perf_counter()
    frame, seconds = measure()
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        sizes, overall = score_table(frame)
        print(f"Oracle mean set size per score (true-label calibration; {len(SEEDS)} seeds, 60/20/20):")
        print(sizes.to_string())
        print("\nPer method, geometric mean over data sets and alpha of the oracle size over the smallest score's:")
        print(overall.to_string())
        print(f"\nEach method with its default score: each procedure beside the oracle (mean over {len(SEEDS)} seeds; "
              f"target of {DEFAULT_PROCEDURE}: size <= {SIZE_BAR} x oracle, coverage >= 1 - alpha - {COVERAGE_SLACK}):")
        print(procedure_table(frame).to_string(index=False))
        print("\nDST-PLL on UCI data with synthetic noise, alpha = 0.1, mean over 5 seeds:")
        print(uci_table().to_string())
    print(f"\ncalibration time, monte_carlo / conservative: {seconds['monte_carlo'] / seconds['conservative']:.2f}x "
          f"({seconds['monte_carlo']:.2f} s / {seconds['conservative']:.2f} s)")
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

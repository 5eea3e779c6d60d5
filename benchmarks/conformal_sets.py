"""Conformal prediction sets from partial labels: coverage and size of each procedure beside an oracle's, every method.

The oracle is calibrated on the true labels (bags of one true label each), with the same model and
score: the smallest sets a calibration can give at its coverage.  The procedures of
:mod:`pll.reject.conformal` calibrate on the bags alone; the true labels only judge them.

Protocol (as the issue that set the bar): ten seeds of a 60/20/20 split; the method is fitted on 60 %
(min-max features fitted on the same rows; PL A-kNN on its paper's features; Proden on the features as
loaded, which it scales itself), calibrated on 20 %, judged on the other 20 %; α ∈ {0.1, 0.2}.
Data: sklearn digits with class-dependent noise drawn per seed; ``../shared/data/realworld/bird-song.mat``
and ``msrc-v2.mat`` with their real bags, and any other ``.mat`` set given by path (``--datasets``); the
UCI sets of ``../shared/data/uci`` under each noise model of the grids (uniform, class-dependent,
instance-dependent; :mod:`pll.noise` defaults, drawn per seed).

Printed:

0. The oracle's set size with each score of :data:`pll.reject.conformal.SCORES`, and per method each score's
   geometric mean size ratio to the smallest, beside its default (:data:`pll.reject.conformal.DEFAULT_SCORES`).
1. Per method, data set and α: the oracle's mean set size and coverage, and for each procedure —
   ``monte_carlo`` with the method's plausibility (``method``), with cross-fitted DST-PLL weights
   (``crossfit``), with the default check between the two (``auto``), and ``conservative`` — its
   coverage and its size over the oracle's; ``switched``: how often ``auto`` took the cross-fitted
   weights.  ``bar``: the default's coverage ≥ 1 − α − 0.015 (``cov``) and size ≤ 1.15 × the oracle's
   (``size``).
2. A summary: per procedure, the settings under the coverage bar and the geometric mean size ratio.
3. The calibration time of ``auto`` (which cross-fits five DST-PLLs) as a ratio to ``method``'s.

Run: ``.venv/bin/python benchmarks/conformal_sets.py`` (the whole grid: about an hour on 2 shared cores,
most of it fitting PlClassifier and Proden and the instance-dependent noise);
``--datasets bird-song msrc-v2 --methods dst_pll pl_knn`` for a part, ``--uci`` to choose UCI sets
(none: ``--uci``), ``--seeds`` for fewer seeds.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.preprocessing import FunctionTransformer

import pll
from pll.reject.conformal import DEFAULT_SCORE, DEFAULT_SCORES, SCORES, ConformalSets, set_report
from pll.preprocessing import make_features
from pll.methods import METHODS, make_method

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"  # ../shared/data beside the checkout
REAL = ("digits", "bird-song", "msrc-v2")
UCI = ("ecoli", "flare", "pendigits", "semeion", "statlog-landsat-satellite", "mfeat-fourier", "first-order-theorem")
UCI_NOISE = ("uniform", "class_dependent", "instance_dependent")
UCI_METHODS = ("pl_knn", "dst_pll", "pl_aknn", "ipal")
FEATURES = {"pl_aknn": "pl_aknn_real", "proden": None}
ALPHAS = (0.1, 0.2)
PROCEDURES = {"method": {"weights": "method"}, "crossfit": {"weights": "crossfit"}, "auto": {},
              "conservative": {"procedure": "conservative"}}
SIZE_BAR, COVERAGE_SLACK = 1.15, 0.015


class Scored:
    """A fitted method whose conformity is computed once per feature matrix (the procedures share it)."""

    def __init__(self, model):
        self.model, self.classes_, self._memo = model, model.classes_, {}

    def conformity(self, X, neighbors=None):
        key = (X.__array_interface__["data"][0], X.shape)
        if key not in self._memo:
            self._memo[key] = pll.reject.conformal.conformity(self.model, X)
        return self._memo[key]


def load(name):
    """A data set and its noise model (None: the bags as loaded) from a name, ``uci-name:noise`` or a ``.mat`` path."""
    if name == "digits":
        return pll.load_dataset("digits"), "class_dependent"
    if ":" in name:
        base, noise = name.split(":")
        return pll.load_dataset(SHARED / "uci" / f"{base}.arff"), noise
    path = Path(name) if name.endswith(".mat") else SHARED / "realworld" / f"{name}.mat"
    return pll.load_dataset(path), None


def features(method):
    spec = FEATURES.get(method, "minmax")
    return FunctionTransformer() if spec is None else make_features(spec)


def measure_split(ds, S, rows, method, seed):
    """One method on one split: a row per α and procedure (``oracle`` among them), and each procedure's seconds."""
    fit, cal, test = rows
    transformer = features(method)
    X_fit = transformer.fit_transform(ds.X[fit], S[fit])
    model = Scored(make_method(method, None, random_state=seed).fit(X_fit, S[fit]))
    X_cal, X_test = transformer.transform(ds.X[cal]), transformer.transform(ds.X[test])
    score = DEFAULT_SCORES.get(METHODS[method].__name__, DEFAULT_SCORE)
    truth = np.eye(ds.n_classes, dtype=bool)[ds.y[cal]]
    out, seconds = [], {}
    for alpha in ALPHAS:
        for other in SCORES:  # the oracle of every score: which gives the smallest sets (DEFAULT_SCORES)
            sets = ConformalSets(model, alpha, procedure="conservative", score=other).fit(X_cal, truth)
            out.append({"alpha": alpha, "procedure": f"oracle {other}",
                        "size": set_report(sets.predict_sets(X_test))["mean_set_size"]})
        for name, params in {"oracle": {"procedure": "conservative"}, **PROCEDURES}.items():
            t0 = time.perf_counter()
            sets = ConformalSets(model, alpha, score=score, **params).fit(X_cal, truth if name == "oracle" else S[cal])
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t0
            report = set_report(sets.predict_sets(X_test), ds.y[test])
            out.append({"alpha": alpha, "procedure": name, "size": report["mean_set_size"],
                        "coverage": report["coverage"], "switched": float(sets.weights_ == "crossfit")})
    return out, seconds


def measure(datasets, methods, seeds):
    """One row per data set, seed, α, method and procedure; the procedures' total calibration seconds."""
    rows, seconds = [], {}
    for name in datasets:
        ds, noise = load(name)
        for seed in range(seeds):
            S = ds.S if noise is None else pll.noise.apply_noise(ds, noise, None, seed).S
            split = np.split(np.random.default_rng(seed).permutation(ds.n_rows), [int(0.6 * ds.n_rows),
                                                                                   int(0.8 * ds.n_rows)])
            for method in methods:
                out, took = measure_split(ds, S, split, method, seed)
                rows += [{"data": Path(name).stem, "method": method, "seed": seed, **row} for row in out]
                for key, value in took.items():
                    seconds[key] = seconds.get(key, 0.0) + value
        print(f"  {name}: done", flush=True)
    return pd.DataFrame(rows), seconds


def table(frame):
    """Per method, data set and α: the oracle's size and coverage, each procedure's coverage and size ratio."""
    mean = frame.groupby(["data", "method", "alpha", "procedure"], sort=False).mean(numeric_only=True)
    oracle = mean.xs("oracle", level="procedure")
    out = oracle[["size", "coverage"]].rename(columns={"size": "oracle size", "coverage": "oracle cov"})
    for name in PROCEDURES:
        part = mean.xs(name, level="procedure")
        out[f"{name} cov"] = part["coverage"]
        out[f"{name} size/oracle"] = part["size"] / oracle["size"]
    out["switched"] = mean.xs("auto", level="procedure")["switched"]
    alpha = out.index.get_level_values("alpha").to_numpy()
    low = out["auto cov"] < 1 - alpha - COVERAGE_SLACK
    big = out["auto size/oracle"] > SIZE_BAR
    out["bar"] = np.where(low, "COV", np.where(big, "size", "met"))
    return out.round(3)


def score_table(frame):
    """The oracle's mean set size per score; per method, each score's geometric mean size over the smallest."""
    oracle = frame[frame["procedure"].str.startswith("oracle ")].assign(
        score=lambda f: f["procedure"].str.removeprefix("oracle "))
    sizes = oracle.pivot_table(index=["method", "data", "alpha"], columns="score", values="size", sort=False)
    sizes = sizes[list(SCORES)]
    ratio = np.exp(np.log(sizes.div(sizes.min(axis=1), axis=0)).groupby(level="method", sort=False).mean())
    ratio["smallest"] = ratio.idxmin(axis=1)
    ratio["default"] = [DEFAULT_SCORES.get(METHODS[m].__name__, DEFAULT_SCORE) for m in ratio.index]
    return sizes.round(3), ratio.round(3)


def summary(out):
    """Per procedure: settings under the coverage bar, and the geometric mean size over the oracle's."""
    alpha = out.index.get_level_values("alpha").to_numpy()
    rows = {}
    for name in PROCEDURES:
        rows[name] = {"settings": len(out), "under coverage bar": int((out[f"{name} cov"] < 1 - alpha - COVERAGE_SLACK).sum()),
                      "size/oracle (geo. mean)": float(np.exp(np.log(out[f"{name} size/oracle"]).mean())),
                      "size/oracle (max)": float(out[f"{name} size/oracle"].max())}
    return pd.DataFrame(rows).T.round(3)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="*", default=list(REAL), help="digits, bird-song, msrc-v2 or .mat paths")
    parser.add_argument("--methods", nargs="*", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--uci", nargs="*", default=list(UCI), help="UCI sets, each under every noise model")
    parser.add_argument("--uci-noise", nargs="*", default=list(UCI_NOISE))
    parser.add_argument("--uci-methods", nargs="*", default=list(UCI_METHODS), choices=list(METHODS))
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    frame, seconds = measure(args.datasets, args.methods, args.seeds)
    uci = [f"{name}:{noise}" for name in args.uci for noise in args.uci_noise]
    if uci:
        more, took = measure(uci, args.uci_methods, args.seeds)
        frame = pd.concat([frame, more], ignore_index=True)
        seconds = {key: seconds.get(key, 0.0) + value for key, value in took.items()}
    sizes, ratio = score_table(frame)
    out = table(frame[~frame["procedure"].str.startswith("oracle ")])
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.max_rows", 1000):
        print("\nOracle mean set size per score (true-label calibration):")
        print(sizes.to_string())
        print("\nPer method, geometric mean over data sets and alpha of each score's oracle size over the smallest:")
        print(ratio.to_string())
        print(f"\nMean over {args.seeds} seeds (60/20/20); bar of auto, the default: coverage >= 1 - alpha - "
              f"{COVERAGE_SLACK}, size <= {SIZE_BAR} x oracle:")
        print(out.to_string())
        print("\nSummary over the settings above:")
        print(summary(out).to_string())
    print(f"\ncalibration time, auto / method: {seconds['auto'] / seconds['method']:.1f}x "
          f"({seconds['auto']:.1f} s / {seconds['method']:.1f} s)")
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

"""What `pll.PlClassifier`'s defaults are worth: test accuracy of one change at a time, against DST-PLL.

Every variant is ``pll.PlClassifier(estimator, **change)`` fitted on the training part of an 80/20
split (seeds 0-2) and scored on the test part: mean ± std over the seeds (%), and the seconds the
variant's line took (loading, fitting and predicting).  The data sets: bird-song and msrc-v2 as loaded, bags as given
(``pll.train_test_split``); ecoli with uniform noise, every bag the true label and two others
(``pll.noise.uniform``, a seeded permutation split).  Trees get the features as they are, logistic
regression standardized ones (fitted on the training rows); DST-PLL gets min-max scaled ones, its
protocol.

Run: ``nice .venv/bin/python benchmarks/pl_classifier_defaults.py [--datasets bird-song ...] [--variants NAME ...]``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import MinMaxScaler, StandardScaler

import pll

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
SEEDS = (0, 1, 2)
ESTIMATORS = {
    "boosting": HistGradientBoostingClassifier,
    "forest": RandomForestClassifier,
    "logistic": lambda: LogisticRegression(max_iter=1000),
}
# name -> (estimator, PlClassifier parameters); "dst_pll" is the baseline.
VARIANTS = {
    "dst_pll": (None, None),
    "boosting, defaults": ("boosting", {}),
    "boosting, uniform start": ("boosting", {"init": "uniform"}),
    "boosting, uniform start, 5 rounds (the old defaults)": ("boosting", {"init": "uniform", "max_rounds": 5,
                                                                          "class_balance": False}),
    "boosting, no class balance": ("boosting", {"class_balance": False}),
    "boosting, 0 rounds": ("boosting", {"max_rounds": 0}),
    "boosting, 5 rounds": ("boosting", {"max_rounds": 5}),
    "forest, defaults": ("forest", {}),
    "forest, no class balance": ("forest", {"class_balance": False}),
    "forest, 0 rounds": ("forest", {"max_rounds": 0}),
    "logistic, defaults": ("logistic", {}),
    "logistic, 0 rounds": ("logistic", {"max_rounds": 0}),
    "logistic, 5 rounds": ("logistic", {"max_rounds": 5}),
}


def splits(name, seed):
    """Training and test parts of data set ``name`` for ``seed``: (X, S) and (X, y)."""
    if name == "ecoli":
        ds = pll.load_dataset(SHARED / "uci" / "ecoli.arff")
        S = pll.noise.uniform(ds.y, len(ds.classes), p=1.0, r=2, random_state=seed)
        order = np.random.default_rng(seed).permutation(len(ds.y))
        train, test = order[: int(0.8 * len(order))], order[int(0.8 * len(order)) :]
        return (ds.X[train], S[train]), (ds.X[test], ds.y[test])
    ds = pll.load_dataset(SHARED / "realworld" / f"{name}.mat")
    train, test = pll.train_test_split(ds, random_state=seed)
    return (train.X, train.S), (test.X, test.y)


def accuracy(variant, name, seed):
    """Test accuracy of ``variant`` on ``name``'s split ``seed``."""
    (X, S), (X_test, y_test) = splits(name, seed)
    estimator, params = VARIANTS[variant]
    if estimator is None:
        scaler = MinMaxScaler().fit(X)
        model, X_test = pll.DstPll(random_state=seed).fit(scaler.transform(X), S), scaler.transform(X_test)
    else:
        if estimator == "logistic":
            scaler = StandardScaler().fit(X)
            X, X_test = scaler.transform(X), scaler.transform(X_test)
        model = pll.PlClassifier(ESTIMATORS[estimator](), random_state=seed, **params).fit(X, S)
    return float((model.predict(X_test) == y_test).mean())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["bird-song", "msrc-v2", "ecoli"])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    args = parser.parse_args(argv)
    print(f"| variant | {' | '.join(args.datasets)} | fit seconds |\n| --- |{' --- |' * len(args.datasets)} --- |")
    for variant in args.variants:
        cells, t0 = [], time.perf_counter()
        for name in args.datasets:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # lbfgs's ConvergenceWarning on the weighted copies
                scores = 100 * np.array([accuracy(variant, name, seed) for seed in SEEDS])
            cells.append(f"{scores.mean():.1f} ± {scores.std():.1f}")
        print(f"| {variant} | {' | '.join(cells)} | {time.perf_counter() - t0:.0f} |", flush=True)


if __name__ == "__main__":
    main()

"""Fit time of `pll.PlClassifier`: on bird-song per inner estimator, warm against cold starts, and at scale.

1. bird-song (80/20, seed 0, min-max features, ``init="ipal"``, ``max_rounds=2`` as the
   strong-learner grids): fit seconds and test accuracy of every named estimator; for logistic
   regression with warm starts on and off (the same weights, up to the solver's tolerance), and
   their ratio, measured in the same run.
2. ``--rows N`` (default 1,000,000) rows of :func:`pll.data.synthetic.make_partial_label_table`
   (32 features, 20 classes, bags of the true label and 0-3 others), uniform initial weights:
   the fit with ``estimator=--estimator`` (default ``logistic_regression``: lbfgs on the
   multinomial loss, whose cost per iteration is linear in rows, and whose warm starts make the
   later rounds cheap), ``--rounds`` rounds (default 2) of ``--folds`` folds (default 5) --
   seconds in all, per inner fit, the expansion's size and the process's peak resident memory.
   Measured here at 1,000,000 rows (2,500,837 expanded rows), beside a grid run: 311 s for 11
   inner fits, 3.1 GiB peak.  ``sgd`` (``SGDClassifier``, one-vs-rest, up to 1,000 epochs) did
   not finish within 25 minutes.

Run: ``.venv/bin/python benchmarks/pl_classifier_fit.py [--rows N] [--estimator NAME] [--rounds R]
[--folds F] [--skip-bird-song]``.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
import warnings
from pathlib import Path

from pll.data import load_dataset, split_indices
from pll.data.synthetic import make_partial_label_table
from pll.preprocessing import make_features
from pll.methods._inner import ESTIMATORS
from pll.methods._pl_classifier import PlClassifier

BIRD_SONG = Path(__file__).resolve().parents[2] / "shared" / "data" / "realworld" / "bird-song.mat"
ROUNDS = 2


def timed_fit(model, X, S):
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SGD's ConvergenceWarning
        model.fit(X, S)
    return time.perf_counter() - t0


def bird_song():
    ds = load_dataset(BIRD_SONG)
    train, test = split_indices(ds.n_rows, 0.2, 0)
    scaler = make_features("minmax").fit(ds.X[train])
    X_train, X_test = scaler.transform(ds.X[train]), scaler.transform(ds.X[test])
    print(f"bird-song: {train.size} training rows, {int(ds.S[train].sum())} expanded rows; max_rounds={ROUNDS}")
    print("| estimator | warm_start | fit s | test accuracy | rounds |\n| --- | --- | --- | --- | --- |")
    seconds = {}
    for name in ESTIMATORS:
        for warm in (True, False) if name == "logistic_regression" else (True,):
            model = PlClassifier(name, init="ipal", max_rounds=ROUNDS, warm_start=warm, random_state=0)
            seconds[name, warm] = timed_fit(model, X_train, ds.S[train])
            accuracy = (model.predict(X_test) == ds.y[test]).mean()
            print(f"| {name} | {warm} | {seconds[name, warm]:.1f} | {100 * accuracy:.1f} % | {model.n_rounds_} |")
    ratio = seconds["logistic_regression", False] / seconds["logistic_regression", True]
    print(f"logistic regression, cold / warm fit time: {ratio:.2f}x")


def at_scale(n_rows, estimator, rounds, folds):
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"synthetic-{n_rows}.parquet"
        make_partial_label_table(n_rows, random_state=0).to_parquet(path, index=False)
        ds = load_dataset(path)
    X = make_features("standard").fit_transform(ds.X)
    print(f"\n{n_rows:,} rows made in {time.perf_counter() - t0:.0f} s; {int(ds.S.sum()):,} expanded rows")
    model = PlClassifier(estimator, max_rounds=rounds, n_folds=folds, random_state=0)
    seconds = timed_fit(model, X, ds.S)
    fits = model.n_rounds_ * model.n_folds + 1
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    accuracy = (model.disambiguate().labels == ds.y).mean()
    print(f"{estimator}: fit {seconds:.0f} s for {fits} inner fits ({seconds / fits:.1f} s each), "
          f"peak RSS {peak:.2f} GiB, disambiguation accuracy {100 * accuracy:.1f} %")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--estimator", default="logistic_regression", choices=sorted(ESTIMATORS))
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--skip-bird-song", action="store_true")
    args = parser.parse_args()
    if not args.skip_bird_song:
        bird_song()
    at_scale(args.rows, args.estimator, args.rounds, args.folds)


if __name__ == "__main__":
    main()

"""Which disambiguated training rows should form the trust score's class sets?

For each real-world data set in ../shared/data/realworld/ (DST-PLL protocol,
80/20 split, min-max features fitted on the training rows) and each method,
the trust-score reject option is built from three alternatives — all rows
with the method's disambiguated label ("all"), only rows whose bag holds a
single candidate ("single"), only rows the method's own reject option
accepted ("accepted") — and evaluated on the test rows at several trust
thresholds, next to the method's own reject option.  Prints mean R_λ over
the seeds (and the rejection rate), one line per setting.

Run: ``.venv/bin/python benchmarks/trust_class_sets.py [--seeds 5]``
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.preprocessing import MinMaxScaler

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pll  # noqa: E402
from pll.data import split_indices  # noqa: E402
from pll.evaluation import DEFAULT_LAMBDAS, reject_report  # noqa: E402
from pll.evaluation.metric_names import risk_name  # noqa: E402
from pll.methods import make_method  # noqa: E402
from pll.reject.trust_score import CLASS_SETS, partial_label_trust  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "realworld"
THRESHOLDS = (1.0, 1.25, 1.5, 2.0)


def one_run(ds, method, seed):
    train, test = split_indices(ds.n_rows, 0.2, seed)
    scaler = MinMaxScaler().fit(ds.X[train])
    X_train, X_test = scaler.transform(ds.X[train]), scaler.transform(ds.X[test])
    S, y_test = ds.S[train], ds.y[test]
    clf = make_method(method, random_state=seed).fit(X_train, S)
    pred, own = clf.predict_with_reject(X_test), clf.disambiguate()
    rows = [{"option": "native", "threshold": np.nan, **reject_report(y_test, pred.labels, pred.accept)}]
    for class_sets in CLASS_SETS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            trust = partial_label_trust(X_train, S, own.labels, own.accept, class_sets)
        score = trust.score(X_test, pred.labels)
        for threshold in THRESHOLDS:
            report = reject_report(y_test, pred.labels, score > threshold)
            rows.append({"option": f"trust/{class_sets}", "threshold": threshold, **report})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--methods", nargs="+", default=["pl_knn", "dst_pll", "pl_aknn"])
    parser.add_argument("--data", type=Path, default=DATA, help="folder of PALM .mat files")
    args = parser.parse_args()
    records = []
    paths = sorted(args.data.glob("*.mat"))
    if not paths:
        parser.error(f"no .mat files in {args.data}")
    for path in paths:
        ds = pll.load_dataset(path, protocol="dst-pll")
        for method in args.methods:
            for seed in range(args.seeds):
                for row in one_run(ds, method, seed):
                    records.append({"dataset": path.stem, "method": method, "seed": seed, **row})
    table = pd.DataFrame(records)
    metrics = ["rejection_rate", "covered_accuracy"] + [risk_name(lam) for lam in DEFAULT_LAMBDAS]
    keys = ["dataset", "method", "option", "threshold"]
    mean = table.groupby(keys, dropna=False, sort=False)[metrics].mean().reset_index()
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 500)
    print(f"Mean over {args.seeds} seeds (DST-PLL protocol, 80/20, min-max features); test rows")
    print(mean.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    overall = table.groupby(["option", "threshold"], dropna=False, sort=False)[metrics].mean().reset_index()
    print("\nAverage over data sets and methods")
    print(overall.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()

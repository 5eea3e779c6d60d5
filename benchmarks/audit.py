"""Auditing bags (`pll.audit`): are planted wrong bags found, and better than the two obvious baselines?

Data where the truth is known, a share ν of the bags replaced by bags that miss their true label
(:func:`plant_wrong_bags`: :func:`pll.noise.remove_true_label` at ν, and a bag it emptied gets one
wrong label instead, so that every wrong bag must be found from evidence):

* ``synthetic``: 3,000 rows, 16 features, 10 classes (scikit-learn's ``make_classification``),
  bags from :func:`pll.noise.uniform` (p = 0.7, r = 3);
* ``bird-song``, ``msrc-v2`` (``../shared/data/realworld``): their own bags;
* ``ecoli``, ``flare``, ``mfeat-fourier``, ``semeion`` (the UCI sets of the grids): class-dependent bags
  (:func:`pll.noise.class_dependent`, defaults);
* held out, never used to choose the audit's defaults: ``statlog-landsat-satellite`` and ``pendigits``
  (UCI, class-dependent bags), and any ``.mat`` passed with ``--extra`` (e.g. lost).

Features min-max scaled on all rows (the audit judges the training rows themselves).  On every set:
precision among the top 10 % (:func:`pll.audit.precision_at_top`) and the AUC
(:func:`pll.audit.ranking_auc`) of

* ``audit``: :func:`pll.audit.audit_bags` with its defaults (two cross-fitted PRODEN networks and the
  neighbors, mixed by bag likelihood); also its parts, ``neighbors`` (the earlier audit) and ``learners``;
* ``vote``: :func:`pll.audit.majority_disagreement` (k = 10), the neighbor-majority vote;
* ``cl``: confident learning's self-confidence on the bags, ``1 − max_{y ∈ S} p(y)``, with ``p`` a
  cross-fitted PRODEN (its defaults, 3 folds: :func:`pll.audit.cross_fitted_proba`); and ``cleanlab``
  (when installed, the ``test`` extra): its ``find_label_issues`` given those probabilities and each
  bag's most probable member as its label, the flagged rows first, each group by self-confidence.

``margin`` is the audit's precision (AUC) minus the best of vote, cl and cleanlab on that data set.
Mean over seeds; the average margin over the development and the held-out sets.

Run: ``.venv/bin/python benchmarks/audit.py`` (``--quick``: 1 seed, ν = 0.15, development sets only).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import make_classification

import pll
from pll.audit import audit_bags, cross_fitted_proba, majority_disagreement, precision_at_top, ranking_auc
from pll.neighbors import kneighbors
from pll.preprocessing import make_features

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"  # ../shared/data beside the checkout
DEVELOPMENT = ("synthetic", "bird-song", "msrc-v2", "ecoli", "flare", "mfeat-fourier", "semeion")
HELD_OUT = ("statlog-landsat-satellite", "pendigits")
K = 10
Q = 0.10


def plant_wrong_bags(S, y, nu, seed):
    """A share ``nu`` of the bags without their true label; one emptied gets a random wrong label instead."""
    S = pll.noise.remove_true_label(S, y, nu, random_state=seed)
    rng = np.random.default_rng(seed)
    for i in np.flatnonzero(~S.any(axis=1)):
        other = rng.integers(S.shape[1] - 1)
        S[i, other + (other >= y[i])] = True
    return S


def load(name, seed):
    """Features (min-max), bags before planting (every one holds its true label) and true labels."""
    if name == "synthetic":
        X, y = make_classification(3000, 16, n_informative=10, n_redundant=2, n_classes=10, n_clusters_per_class=1,
                                   class_sep=1.0, random_state=seed)
        S = pll.noise.uniform(y, 10, random_state=seed)
    else:
        path = Path(name) if name.endswith(".mat") else (
            SHARED / "realworld" / f"{name}.mat" if name in ("bird-song", "msrc-v2") else SHARED / "uci" / f"{name}.arff")
        ds = pll.load_dataset(str(path))
        X, y = ds.X, ds.y
        S = ds.S if path.suffix == ".mat" else pll.noise.class_dependent(y, ds.n_classes, random_state=seed)
    if not S[np.arange(len(y)), y].all():
        raise SystemExit(f"{name}: a bag misses its true label before planting; the truth is not known")
    return np.asarray(make_features("minmax").fit_transform(X), dtype=np.float64), S, y


def by_row(table, column):
    out = np.empty(len(table))
    out[table["row"].to_numpy()] = table[column].to_numpy()
    return out


def scores(X, S, seed):
    """Every method's score per row (higher = more suspicious) and the audit's run time."""
    nb = kneighbors(X, None, k=K)
    t0 = time.perf_counter()
    table = audit_bags(X, S, n_neighbors=K, neighbors=nb, random_state=seed)
    seconds = time.perf_counter() - t0
    out = {"audit": by_row(table, "suspicion"), "neighbors": by_row(table, "neighbor_suspicion"),
           "learners": by_row(table, "learner_suspicion"), "vote": majority_disagreement(X, S, neighbors=nb)}
    P = cross_fitted_proba(X, S, pll.Proden(random_state=seed), n_folds=3, random_state=seed)
    out["cl"] = 1.0 - np.where(S, P, 0.0).max(axis=1)
    try:
        from cleanlab.filter import find_label_issues
    except ImportError:
        return out, seconds, table.attrs["mixture_weights"]
    issues = find_label_issues(np.where(S, P, -1.0).argmax(axis=1), P)
    out["cleanlab"] = issues + 0.5 * out["cl"]  # flagged first; self-confidence within each group
    return out, seconds, table.attrs["mixture_weights"]


def collect(names, seeds, nus):
    rows = []
    for name in names:
        for seed in seeds:
            X, S0, y = load(name, seed)
            for nu in nus:
                S = plant_wrong_bags(S0, y, nu, seed)
                wrong = ~S[np.arange(len(y)), y]
                found, seconds, weights = scores(X, S, seed)
                for method, score in found.items():
                    rows.append({"data": Path(name).stem, "seed": seed, "nu": nu, "method": method,
                                 "p@10%": precision_at_top(score, wrong, Q), "auc": ranking_auc(score, wrong),
                                 "audit_s": seconds, **{f"w_{k}": v for k, v in weights.items()}})
                got = {r["method"]: r for r in rows[-len(found):]}
                print(f"  {name} seed {seed} nu {nu}: audit {seconds:.0f} s, weights "
                      + ", ".join(f"{k} {v:.2f}" for k, v in weights.items()) + "; p@10% / AUC "
                      + ", ".join(f"{m} {r['p@10%']:.3f} / {r['auc']:.3f}" for m, r in got.items()), flush=True)
    return pd.DataFrame(rows)


def side_by_side(detail):
    """One line per data set: each method's precision and AUC, and the audit's margin over the best baseline."""
    mean = detail.groupby(["data", "method"], sort=False)[["p@10%", "auc"]].mean().unstack("method")
    baselines = [m for m in ("vote", "cl", "cleanlab") if m in detail["method"].unique()]
    table = pd.DataFrame(index=mean.index)
    for metric in ("p@10%", "auc"):
        for method in ("audit", *baselines, "neighbors", "learners"):
            table[f"{metric} {method}"] = mean[(metric, method)]
        table[f"{metric} margin"] = mean[(metric, "audit")] - mean[metric][baselines].max(axis=1)
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 seed, nu = 0.15, development sets only")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--nus", type=float, nargs="+", default=[0.10, 0.15, 0.20])
    parser.add_argument("--data", nargs="+", default=None, help="data sets (default: development and held out)")
    parser.add_argument("--extra", nargs="*", default=[], help=".mat files of real-world sets to hold out")
    args = parser.parse_args()
    seeds, nus = ([0], [0.15]) if args.quick else (args.seeds, args.nus)
    names = [*(args.data or (DEVELOPMENT if args.quick else (*DEVELOPMENT, *HELD_OUT))), *args.extra]
    t0 = time.perf_counter()
    detail = collect(names, seeds, nus)
    print(f"\nPrecision among the top 10 % and AUC, mean over seeds {seeds} and nu {nus} "
          f"(margin: audit minus the best baseline):")
    table = side_by_side(detail)
    print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    held = [Path(n).stem for n in names if n not in DEVELOPMENT]
    for group, members in (("development", [Path(n).stem for n in names if n in DEVELOPMENT]), ("held out", held)):
        if members:
            part = table.loc[members]
            print(f"average margin, {group} ({len(members)} sets): precision {part['p@10% margin'].mean():+.3f}, "
                  f"AUC {part['auc margin'].mean():+.3f}; audit ahead on {int((part['p@10% margin'] > 0).sum())}"
                  f"/{len(members)} (precision), {int((part['auc margin'] > 0).sum())}/{len(members)} (AUC)")
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

"""Issue #19's report: the strong learners against the kNN methods, from the strong-learner grids' results.

Run the grids first (each takes tens of minutes on two cores)::

    .venv/bin/pll benchmark benchmarks/grids/strong_learners.yaml
    .venv/bin/pll benchmark benchmarks/grids/strong_learners_dst_pll.yaml
    .venv/bin/pll benchmark benchmarks/grids/strong_learners_uci.yaml

then ``.venv/bin/python benchmarks/strong_learners.py [--tracking-uri URI] [--output PAGE] [grid names]``
(``docs/strong-learners.md`` is its page).  It reads
the method runs of the latest grid run of each name and prints, per data set, for every
method run over the 5 seeds: accuracy (mean ± std, %), ``R_0.10`` of each reject option at the
option's own rule and at the threshold calibrated on the validation hold-out (``cal``), and two
paired t-tests of accuracy (:func:`scipy.stats.ttest_rel`, two-sided, paired by seed): against
DST-PLL, and against the best kNN method of that data set (PL-kNN, DST-PLL or PL A-kNN, by mean).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from mlflow.tracking import MlflowClient
from scipy.stats import ttest_rel

from pll.experiment import catalog
from pll.reporting.tables import markdown_table
from pll_pipeline.tracking.store import resolve_tracking_uri

TABLE_NOTE = ("Per data set, every method run over its seeds: test accuracy (mean ± std, %), the paired t-tests "
              "of accuracy against DST-PLL and against the best kNN method (PL-kNN, DST-PLL or PL A-kNN, by mean; "
              "two-sided, paired by seed), and `R_0.10` of each reject option at its own rule and at the threshold "
              "calibrated on the validation hold-out (`cal`).")
DEEP_NOTE = ("The deep learners (PRODEN, CroSel, VI-PLL, and the soft voting of PRODEN and VI-PLL, the most "
             "accurate) against their publishers' own numbers, each under the "
             "publisher's protocol: [Deep learners](deep-learners.md).")
GRIDS = ("strong-learners", "strong-learners-dst-pll", "strong-learners-uci")
KNN_METHODS = ("pl_knn", "dst_pll", "pl_aknn")
OPTIONS = ("native", "trust", "conformal")


def grid_results(client, experiment_id, name):
    """One row per method run of the latest grid run named ``grid <name>`` (finished or not), or None.

    Read from the method runs themselves, not the grid's ``grid_metrics.csv``, so that a grid
    stopped half-way reports what it finished.
    """
    grids = client.search_runs([experiment_id], f"attributes.run_name = 'grid {name}'",
                               order_by=["attributes.start_time DESC"], max_results=1)
    if not grids:
        return None
    pipelines = {r.info.run_id for r in client.search_runs(
        [experiment_id], f"tags.mlflow.parentRunId = '{grids[0].info.run_id}'", max_results=10000)}
    rows = []
    for run in client.search_runs([experiment_id], "tags.`pll.kind` = 'method' and attributes.status = 'FINISHED'",
                                  max_results=50000):
        if run.data.tags.get("mlflow.parentRunId") not in pipelines:
            continue
        params, metrics = run.data.params, run.data.metrics
        rows.append({"dataset": Path(params["dataset"]).stem, "noise": params.get("noise", ""),
                     "seed": int(params["seed"]), "variant": run.info.run_name, **metrics})
    return pd.DataFrame(rows)


def paired_p(a, b):
    """Two-sided paired t-test p-value of two seed-indexed series over their shared seeds (NaN below 2 pairs)."""
    both = pd.concat([a, b], axis=1, join="inner").dropna()
    if len(both) < 2:
        return float("nan")
    if np.allclose(both.iloc[:, 0], both.iloc[:, 1]):
        return 1.0
    return float(ttest_rel(both.iloc[:, 0], both.iloc[:, 1]).pvalue)


def dataset_table(rows):
    """One data set's method runs -> a table of every method run (see the module docstring)."""
    accuracy = rows.pivot_table(index="seed", columns="variant", values="accuracy")
    base = next(c for c in accuracy if c.startswith("dst_pll"))
    best_knn = accuracy[[c for c in accuracy if c.split()[0] in KNN_METHODS]].mean().idxmax()
    out = []
    for variant in accuracy:
        acc, mine = accuracy[variant], rows[rows["variant"] == variant]
        line = {"method": variant, "seeds": int(acc.count()),
                "accuracy": f"{100 * acc.mean():.1f} ± {100 * acc.std():.1f}",
                "vs dst_pll": f"{100 * (acc - accuracy[base]).mean():+.1f} (p={paired_p(acc, accuracy[base]):.3f})",
                "vs best kNN": f"{100 * (acc - accuracy[best_knn]).mean():+.1f} (p={paired_p(acc, accuracy[best_knn]):.3f})"}
        for option in OPTIONS:
            for column, label in ((f"{option}.risk_0.10", option), (f"{option}.cal_risk_0.10", f"{option} cal")):
                if column in mine:
                    line[f"R_0.10 {label}"] = f"{mine[column].mean():.3f}"
        out.append(line)
    return pd.DataFrame(out), best_knn


def report(client, experiment_id, grids):
    """The Markdown page: what it holds, then per grid and data set the table of :func:`dataset_table`."""
    parts = [f"# Strong learners against the kNN methods\n\nWritten by `benchmarks/strong_learners.py` from the "
             f"latest run of the grids {', '.join(grids)} (`benchmarks/grids/`). {TABLE_NOTE}\n\n{DEEP_NOTE}"]
    for name in grids:
        table = grid_results(client, experiment_id, name)
        if table is None or table.empty:
            parts.append(f"## grid {name}: no finished method runs\n")
            continue
        for (dataset, noise), rows in table.groupby(["dataset", "noise"], sort=False):
            result, best_knn = dataset_table(rows)
            parts.append(f"## {name}: {dataset} ({noise}); best kNN method: {best_knn}\n\n{markdown_table(result)}")
    return "\n\n".join(parts) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("grids", nargs="*", default=GRIDS)
    parser.add_argument("--tracking-uri", default=None, help="default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db")
    parser.add_argument("--experiment", default=catalog.DEFAULT_GRID_EXPERIMENT)
    parser.add_argument("--output", type=Path, default=None, help="also write the page to this file")
    args = parser.parse_args(argv)
    args.tracking_uri = resolve_tracking_uri(args.tracking_uri)
    client = MlflowClient(args.tracking_uri)
    experiment = client.get_experiment_by_name(args.experiment)
    if experiment is None:
        raise SystemExit(f"no experiment {args.experiment!r} at {args.tracking_uri}: run the grids first")
    page = report(client, experiment.experiment_id, args.grids)
    print(page)
    if args.output is not None:
        args.output.write_text(page)


if __name__ == "__main__":
    main()

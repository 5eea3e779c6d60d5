"""The papers' tables beside this project's numbers: the page ``pll report`` writes (pure tables, no tracking).

The input is what benchmark grids log (their ``grid_metrics`` table: one row
per cell and reject option).  Each table here takes the rows it reproduces
(by data set, noise model and method), aggregates them the way the chosen
reading of the paper says (:mod:`pll.experiment.presets`), and sets the paper's
number beside the project's: the difference, whether it lies within the
paper's std and within ±2 points.  Where the data here cannot cover a cell
(data sets that are not available), the page says so next to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath

import numpy as np
import pandas as pd

from ..evaluation import DEFAULT_LAMBDAS
from ..experiment.presets import aggregate_risk, two_sided_p
from .tables import markdown_table

UCI_SETS = ("ecoli", "first-order-theorem", "flare", "mfeat-fourier", "pendigits", "semeion",
            "statlog-landsat-satellite")
"""The DST-PLL paper's seven UCI sets (§5.2), all in ``../shared/data/uci``."""
REAL_WORLD_SETS = ("bird-song", "mir-flickr", "msrc-v2", "yahoo-news")
"""Its four real-world sets; mir-flickr and yahoo-news are not available here."""
PAPER_METHODS = {"pl_knn": "PL-kNN", "ipal": "IPAL", "proden": "PRODEN", "dst_pll": "DST-PLL"}
"""The methods of its tables this project implements, by registry name."""

DST_PLL_TABLE_1 = {
    # DST-PLL paper (Fuchs, Kalinke, Böhm), Table 1, p. 8: mean (std) test accuracy in %.
    ("uci", "class_dependent"): {"pl_knn": (81.2, 13.9), "ipal": (79.4, 16.9), "proden": (81.4, 14.0),
                                    "dst_pll": (80.7, 14.1)},
    ("uci", "instance_dependent"): {"pl_knn": (75.7, 11.4), "ipal": (75.6, 18.1), "proden": (78.1, 13.2),
                                       "dst_pll": (75.2, 10.9)},
    ("real-world", "none"): {"pl_knn": (53.4, 11.0), "ipal": (58.7, 9.8), "proden": (64.0, 7.9), "dst_pll": (52.1, 11.6)},
}
DST_PLL_TABLE_2 = {
    # DST-PLL paper, Table 2, p. 8: mean (std) R_λ across all experimental settings, λ = 0, 0.05, ..., 0.20.
    "pl_knn": ((0.10, 0.14), (0.13, 0.16), (0.17, 0.17), (0.20, 0.18), (0.24, 0.19)),
    "ipal": ((0.19, 0.17), (0.20, 0.18), (0.21, 0.19), (0.22, 0.20), (0.23, 0.21)),
    "proden": ((0.12, 0.11), (0.13, 0.11), (0.14, 0.12), (0.15, 0.12), (0.16, 0.13)),
    "dst_pll": ((0.05, 0.07), (0.07, 0.08), (0.10, 0.10), (0.12, 0.11), (0.15, 0.12)),
}
TABLE_MODELS = ("uniform", "class_dependent", "instance_dependent", "none")
"""The noise settings of the DST-PLL paper's tables (``none``: real-world bags as given)."""
TABLE_2_SETTINGS = "UCI × {uniform, class-dependent, instance-dependent}, MNIST-like × the same, real-world (4 sets)"
_MODEL = re.compile(r"^(?P<model>[a-z_]+)")


@dataclass(frozen=True)
class ReportOptions:
    """How the page aggregates: ``risk_aggregation`` and ``ttest`` (:mod:`pll.experiment.presets`), ``preset`` for the record."""

    preset: str | None
    risk_aggregation: str
    ttest: str


def native_runs(table: pd.DataFrame) -> pd.DataFrame:
    """One row per method run with its own reject option, and the columns the tables group by.

    Adds ``set`` (the data set's stem), ``kind`` (``uci``, ``real-world`` or
    ``other``), ``model`` (the noise model) and ``method`` (the registry name,
    the first word of ``variant``).  A cell logged by several grid runs keeps
    its last row.
    """
    runs = table[table["reject"] == "native"].copy()
    runs["set"] = [PurePath(str(d)).stem for d in runs["dataset"]]
    runs["kind"] = np.select([runs["set"].isin(UCI_SETS), runs["set"].isin(REAL_WORLD_SETS)],
                             ["uci", "real-world"], "other")
    runs["model"] = [_MODEL.match(str(n))["model"] for n in runs["noise"]]
    runs["method"] = runs["variant"].astype(str).str.split().str[0]
    return runs.drop_duplicates(["dataset", "noise", "seed", "variant", "features", "knn"], keep="last")


def _verdict(diff, paper_std):
    return "yes" if abs(diff) <= paper_std else "no", "yes" if abs(diff) <= 2.0 else "no"


def table_1(runs: pd.DataFrame, options: ReportOptions) -> pd.DataFrame:
    """Table 1: mean (± std) test accuracy in % over data sets and seeds, per setting and method, beside the paper's.

    ``p vs DST-PLL`` is the t-test of ``options.ttest`` over the (data set,
    seed) results (paired by them, or unpaired as the authors' script).
    """
    rows = []
    for (kind, model), paper in DST_PLL_TABLE_1.items():
        setting = runs[(runs["kind"] == kind) & (runs["model"] == model)]
        if setting.empty:
            continue
        acc = {m: g.set_index(["set", "seed"])["accuracy"] * 100 for m, g in setting.groupby("method")}
        for method, (p_mean, p_std) in paper.items():
            if method not in acc:
                continue
            mean, std = acc[method].mean(), acc[method].std(ddof=1)
            within_std, within_2 = _verdict(mean - p_mean, p_std)
            p = two_sided_p(acc[method], acc["dst_pll"], options.ttest) if method != "dst_pll" and "dst_pll" in acc else None
            rows.append({
                "setting": f"{kind} / {model}", "method": PAPER_METHODS[method],
                "data sets": setting.loc[setting["method"] == method, "set"].nunique(), "runs": len(acc[method]),
                "project": f"{mean:.1f} (± {std:.1f})", "paper": f"{p_mean:.1f} (± {p_std:.1f})",
                "difference": f"{mean - p_mean:+.1f}", "within paper std": within_std, "within ±2": within_2,
                "p vs DST-PLL": "" if p is None else f"{p:.3g}",
            })
    return pd.DataFrame(rows)


def per_data_set_accuracy(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean (± std) accuracy in % per data set, noise model and method: what Table 1's averages are made of."""
    paper = runs[runs["method"].isin(PAPER_METHODS) & runs["model"].isin(TABLE_MODELS)]
    stats = paper.groupby(["kind", "model", "set", "method"])["accuracy"].agg(["mean", "std"]) * 100
    cells = [f"{m:.1f} (± {s:.1f})" for m, s in zip(stats["mean"], stats["std"].fillna(0.0))]
    wide = pd.Series(cells, index=stats.index).unstack("method").rename(columns=PAPER_METHODS).reset_index()
    return wide.rename(columns={"model": "noise", "set": "data set"})


def _table_2_runs(runs):
    return runs[(runs["kind"] != "other") & runs["model"].isin(TABLE_MODELS)]


def table_2(runs: pd.DataFrame, options: ReportOptions, lambdas=DEFAULT_LAMBDAS) -> pd.DataFrame:
    """Table 2: ``R_λ`` across every setting the runs cover, aggregated as ``options.risk_aggregation`` says."""
    covered = _table_2_runs(runs)
    rows = []
    for method, paper in DST_PLL_TABLE_2.items():
        group = covered[covered["method"] == method]
        if group.empty:
            continue
        row = {"method": PAPER_METHODS[method], "runs": len(group)}
        for lam, (p_mean, p_std) in zip(lambdas, paper):
            mean, std = aggregate_risk(group, lam, options.risk_aggregation)
            row[f"λ={lam:.2f}"] = f"{mean:.3f} (± {std:.2f}); paper {p_mean:.2f} (± {p_std:.2f}); {mean - p_mean:+.3f}"
            row[f"_mean_{lam:.2f}"] = mean
        rows.append(row)
    return pd.DataFrame(rows)


def table_2_ordering(runs: pd.DataFrame, lambdas=DEFAULT_LAMBDAS) -> pd.DataFrame:
    """The paper's Table 2 claim, DST-PLL's risk below PL-kNN's at every λ, under each risk aggregation."""
    covered = _table_2_runs(runs)
    dst, knn = covered[covered["method"] == "dst_pll"], covered[covered["method"] == "pl_knn"]
    rows = []
    if dst.empty or knn.empty:
        return pd.DataFrame(rows)
    for how in ("eq1", "authors_script"):
        row = {"risk aggregation": how}
        for lam in lambdas:
            d, k = aggregate_risk(dst, lam, how)[0], aggregate_risk(knn, lam, how)[0]
            row[f"λ={lam:.2f}"] = f"{'yes' if d < k else 'no'} ({d:.3f} vs {k:.3f})"
        rows.append(row)
    return pd.DataFrame(rows)


def noise_sweep(runs: pd.DataFrame, *, dataset: str, model: str, better: str = "pl_aknn",
                baseline: str = "pl_knn") -> pd.DataFrame:
    """Accuracy of ``better`` and ``baseline`` per noise level ``nu`` on one data set, their difference and its p-value.

    The t-test is paired by seed (both methods see the same split and bags);
    the PL A-kNN paper names no test, and its DST-PLL presets do not apply.
    """
    sweep = runs[(runs["set"] == dataset) & (runs["model"] == model)]
    if sweep.empty:
        return pd.DataFrame()
    nu = sweep["noise"].str.extract(r"nu=(?P<nu>[0-9.]+)")["nu"].astype(float)
    sweep = sweep.assign(nu=nu.to_numpy())
    rows = []
    for level, group in sweep.groupby("nu"):
        acc = {m: g.set_index("seed")["accuracy"] * 100 for m, g in group.groupby("method")}
        if better not in acc or baseline not in acc:
            continue
        a, b = acc[better], acc[baseline]
        rows.append({
            "nu": level, "seeds": len(a), better: f"{a.mean():.1f} (± {a.std(ddof=1):.1f})",
            baseline: f"{b.mean():.1f} (± {b.std(ddof=1):.1f})", "difference": f"{a.mean() - b.mean():+.1f}",
            "p": f"{two_sided_p(a, b, 'paired'):.3g}",
        })
    return pd.DataFrame(rows)


def checks(t1: pd.DataFrame, order: pd.DataFrame, sweeps: dict, options: ReportOptions) -> list[str]:
    """The papers' claims as one line each: how many Table 1 cells lie within ±2, the orderings, the sweeps' direction."""
    lines = []
    for setting, group in t1.groupby("setting", sort=False):
        lines.append(f"Table 1, {setting}: {(group['within ±2'] == 'yes').sum()} of {len(group)} methods within ±2 points.")
    if not order.empty:
        row = order.set_index("risk aggregation").loc[options.risk_aggregation]
        held = sum(str(v).startswith("yes") for v in row)
        lines.append(f"Table 2 ordering (DST-PLL below PL-kNN), {options.risk_aggregation}: at {held} of {len(row)} λ.")
    for name, sweep in sweeps.items():
        if sweep.empty:
            continue
        diff = sweep["difference"].astype(float)
        lines.append(f"{name}: PL A-kNN above 10-NN at {(diff > 0).sum()} of {len(sweep)} noise levels "
                     f"(largest p {sweep['p'].astype(float).max():.3g}; the difference from ν = "
                     f"{sweep['nu'].iloc[0]:g} to {sweep['nu'].iloc[-1]:g}: {diff.iloc[0]:+.1f} → {diff.iloc[-1]:+.1f}).")
    return [f"- {line}" for line in lines]


def _table(frame: pd.DataFrame) -> str:
    shown = frame[[c for c in frame.columns if not str(c).startswith("_")]]
    return markdown_table(shown, digits=3) if not shown.empty else "_No runs of this table were found._\n"


def results_page(table: pd.DataFrame, options: ReportOptions, sources: list[dict], command: str) -> str:
    """The Markdown page: each paper table beside the project's, the checks, and what could not be covered.

    ``sources``: the grid runs read (``name``, ``run_id``, ``cells``,
    ``minutes``); ``command``: the command that wrote the page.
    """
    runs = native_runs(table)
    t1 = table_1(runs, options)
    t2 = table_2(runs, options)
    order = table_2_ordering(runs)
    rw = sorted(runs.loc[runs["kind"] == "real-world", "set"].unique())
    sweeps = {"msrc-v2, true label removed": noise_sweep(runs, dataset="msrc-v2", model="remove_true_label"),
              "mfeat-fourier, cluster-dependent": noise_sweep(runs, dataset="mfeat-fourier", model="cluster_dependent")}
    out = [
        "# Reproducing the papers' tables",
        "",
        f"Written by `{command}` from the MLflow runs below. Reading of the protocol: preset "
        f"`{options.preset or 'none'}`; risks aggregated as `{options.risk_aggregation}`; t-tests "
        f"`{options.ttest}` (`pll/experiment/presets.py` defines each). Accuracies in %, over data sets × seeds.",
        "",
        markdown_table(pd.DataFrame(sources).astype(str)) if sources else "_No grid runs._\n",
        "Checks:",
        "",
        *checks(t1, order, sweeps, options),
        "",
        "## DST-PLL paper, Table 1: test accuracy",
        "",
        "`within ±2`: the project's mean within 2 points of the paper's. The real-world column averages "
        f"{', '.join(rw) or 'no set'} here; the paper's averages four sets (also mir-flickr and yahoo-news, "
        "not available here), so that column compares different averages.",
        "",
        _table(t1),
        "Per data set (what the averages are made of):",
        "",
        _table(per_data_set_accuracy(runs)),
        "## DST-PLL paper, Table 2: average `R_λ`",
        "",
        f"The paper averages over {TABLE_2_SETTINGS}; the project over the UCI and real-world settings above "
        f"(no MNIST-like sets). Each cell: project mean (± std); paper mean (± std); difference.",
        "",
        _table(t2),
        "Ordering (the paper: DST-PLL below PL-kNN at every λ), under both aggregations:",
        "",
        _table(order),
        "## PL A-kNN paper: PL A-kNN against 10-NN as the noise grows",
        "",
        "msrc-v2, true label removed with probability ν (the paper's Figure 2 and Appendix D; it averages 100 "
        "splits, the project 5 seeds); `p`: paired t-test by seed:",
        "",
        _table(sweeps["msrc-v2, true label removed"]),
        "mfeat-fourier with cluster-dependent bags, a stand-in for the paper's vision sets (their GoogLeNet "
        "features are not available here):",
        "",
        _table(sweeps["mfeat-fourier, cluster-dependent"]),
    ]
    return "\n".join(out)

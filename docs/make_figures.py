"""Draw the documentation's figures from small runs and from a benchmark's output: nothing is drawn by hand.

- ``figures/tradeoff.png``: the reject trade-off of the default methods on digits (class-dependent noise,
  seed 0), each method's own reject option and the trust score, from :func:`pll.experiment.run_protocol`
  and the pipeline's own figure function (:func:`pll.reporting.plots.tradeoff_figure`);
- ``figures/set-sizes.png``: how many labels conformal prediction sets hold on digits with ambiguous bags
  (uniform noise: 3 wrong labels on 70 % of the rows), at three levels α, and how often they hold the true label;
- ``figures/scale.png``: ``pll run``'s wall time per stage from ``benchmarks/scale.py``'s JSON lines
  (``figures/scale-runs.jsonl``; ``--scale FILE`` reads another run's, e.g. at 100,000 to 1,000,000 rows).

Run from the repository root: ``.venv/bin/python docs/make_figures.py`` (about a minute).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pll  # noqa: E402
from pll.experiment import run_protocol  # noqa: E402
from pll.reporting.plots import tradeoff_figure  # noqa: E402

FIGURES = ROOT / "docs" / "figures"
SAVE = {"dpi": 110, "metadata": {"Software": None}}  # no version string: a re-run changes a file only if its plot does


def tradeoff():
    result = run_protocol(pll.load_dataset("digits"), seed=0, noise="class_dependent", conformal_alpha=None)
    keep = {"native", "trust"}
    sweeps = {k: v for k, v in result.evaluation.sweeps.items() if k[1] in keep}
    points = {k: v for k, v in result.evaluation.operating_points.items() if k[1] in keep}
    fig = tradeoff_figure(sweeps, points, title="digits, class-dependent noise, seed 0: test rows")
    fig.savefig(FIGURES / "tradeoff.png", **SAVE)


def set_sizes():
    ds = pll.noise.apply_noise(pll.load_dataset("digits"), "uniform", {"p": 0.7, "r": 3}, random_state=0)
    fit, cal, test = np.split(np.random.default_rng(0).permutation(ds.n_rows), [900, 1350])
    method = pll.DstPll(random_state=0).fit(ds.X[fit], ds.S[fit])
    fig = Figure(figsize=(7.5, 4.5), layout="constrained")
    ax = fig.add_subplot()
    alphas = (0.05, 0.1, 0.2)
    width = 0.8 / len(alphas)
    largest = 0
    for i, alpha in enumerate(alphas):
        sets = pll.ConformalSets(method, alpha=alpha).fit(ds.X[cal], ds.S[cal]).predict_sets(ds.X[test])
        size = sets.sum(axis=1)
        coverage = sets[np.arange(test.size), ds.y[test]].mean()
        counts = np.bincount(size, minlength=len(ds.classes) + 1)
        largest = max(largest, int(size.max()))
        ax.bar(np.arange(counts.size) + (i - 1) * width, 100 * counts / size.size, width=width,
               label=f"α = {alpha}: mean size {size.mean():.2f}, coverage {coverage:.3f}")
    ax.set_xticks(range(len(ds.classes) + 1))
    ax.set_xlim(-0.6, largest + 0.6)
    ax.set_xlabel("labels in the prediction set")
    ax.set_ylabel("test rows (%)")
    ax.set_title("Conformal sets of DST-PLL on digits (uniform noise, p = 0.7, r = 3; 447 test rows)")
    ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    fig.savefig(FIGURES / "set-sizes.png", **SAVE)


def scale(path: Path):
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
    if not runs:
        raise SystemExit(f"{path}: no JSON lines of benchmarks/scale.py")
    stages = sorted({s for r in runs for s in r["stages"]}, key=lambda s: -max(r["stages"].get(s, 0) for r in runs))
    shown = stages[:8]
    fig = Figure(figsize=(8, 4.8), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(len(shown) + 1)
    height = 0.8 / len(runs)
    for i, run in enumerate(runs):
        values = [run["wall"]] + [run["stages"].get(s, 0.0) for s in shown]
        ax.barh(y + i * height, values, height=height,
                label=f"{run['label']} rows: {run['wall']:.0f} s, {run['cpu'] / run['wall']:.2f} cores busy, "
                f"peak {run['peak_gib']:.2f} GiB")
    ax.set_yticks(y + height * (len(runs) - 1) / 2, ["whole command"] + shown)
    ax.invert_yaxis()
    ax.set_xlabel("wall seconds (stages overlap: they run side by side)")
    ax.set_title("pll run per stage (benchmarks/scale.py)")
    ax.legend(fontsize="small", loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.savefig(FIGURES / "scale.png", **SAVE)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=Path, default=FIGURES / "scale-runs.jsonl",
                        help="JSON lines printed by benchmarks/scale.py (default: %(default)s)")
    parser.add_argument("--only", choices=("tradeoff", "set-sizes", "scale"), nargs="*", default=None)
    args = parser.parse_args(argv)
    FIGURES.mkdir(exist_ok=True)
    todo = {"tradeoff": tradeoff, "set-sizes": set_sizes, "scale": lambda: scale(args.scale)}
    for name in args.only or todo:
        todo[name]()
        print(f"wrote {FIGURES / (name + '.png')}")


if __name__ == "__main__":
    main()

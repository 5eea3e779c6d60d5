"""What each of `pll.Proden`'s defaults is worth: accuracy of one change at a time, on real-world sets.

Every variant is ``pll.Proden(**defaults, **change)`` fitted on the training part of
``pll.train_test_split`` (80/20, seeds 0-4) of the shared real-world sets, as loaded (``--protocol none``;
prepared as the DST-PLL paper does, ``--protocol dst-pll``: the classes of 95 % of the rows; or as Fuchs &
Kalinke's code does, ``--protocol uai-2025``: the classes of 99 % of the rows), and scored on the test
part: test accuracy mean ± std over the seeds (%), and fit seconds summed over seeds and data sets as a ratio to the first
variant, measured in the same run.

The variants ``cleaning alpha=A`` are candidate cleaning with the project's conformal sets (after
Fuchs & Kalinke, UAI 2025, arXiv:2502.07661), composed from public parts: the training rows are
split in two halves; a Proden with the defaults fitted on one half gives
:class:`pll.ConformalSets` (``alpha=A``, calibrated on the other half's bags) whose sets
narrow the other half's bags (a bag the set misses entirely stays as it was); then Proden is
fitted on all training rows with the narrowed bags.  Below their table line, the mean bag size
before and after and the share of training rows whose narrowed bag still holds the true label.
The variant ``in-training cleaning alpha=A`` is ``Proden(cleaning_alpha=A)``: the study's own
conformal PRODEN, which narrows the bags while the network trains.
BLAS is held to one thread, so the ratios do not depend on what else runs beside it.

The oracle is the study's result files (their repository's ``results/proden-2020_*`` and
``conformal-proden_*``, test accuracy over their 5 splits, data as ``--protocol uai-2025``
prepares it): PRODEN 75.6 ± 1.1 on bird-song, 54.3 ± 1.8 on msrc-v2, 78.9 ± 3.0 on lost; conformal
PRODEN 77.0 ± 0.9, 54.6 ± 3.4, 80.1 ± 4.4 (std over splits, ddof 1).  The defaults here, under that
preparation: 74.8 ± 0.6, 54.4 ± 2.5, 78.5 ± 3.3.

``--rows N``: instead, the method's defaults (or ``--params``) at scale on ``N`` rows of
:func:`pll.data.synthetic.make_partial_label_table` (the scale benchmark's table: 32 features,
20 classes, bags of the true label and 0-3 others), with progress lines: fit seconds, the
process's peak resident memory, the share of training rows disambiguated to their true label,
and, for Proden, the fit time as a ratio to one plain epoch (the same network, fixed uniform targets, no
reweighting), measured in the same run.  Measured here at 1,000,000 rows: 80 s (1 network x 5 epochs),
2.22 GiB peak, 100 % disambiguated, 4.7x one plain epoch (17 s); the numpy network of pll 0.2 took 244 s at
1.83 GiB, and this one 164 s before subnormal floats were flushed to zero.  ``--method soft_voting``: 164 s
at 2.35 GiB; with ``--params '{"n_jobs": 2}'``, 106 s at 2.39 GiB.

``--baseline REVISION``: Proden's defaults here against those of a git revision, split by split in one run
(test accuracy per data set; the ratio of the fit CPU seconds).  Against the numpy network (``1f33d6a``) on
``--datasets bird-song msrc-v2 ecoli flare mfeat-fourier semeion`` (the UCI sets with the strong-learners-uci
grid's class-dependent noise), 5 seeds: 73.3 → 74.0, 53.3 → 53.9, 83.5 → 84.1, 70.6 → 70.3, 82.7 → 82.3,
94.9 → 94.5 %; fit CPU seconds 382 → 348 (ratio 0.91).

``--method crosel|vi_pll|soft_voting``: another deep learner's defaults (the variants are Proden's; soft
voting's defaults are the mean of Proden's and VI-PLL's probabilities); ``--protocol vi-pll``
splits as Fuchs & Klein's code does: stratified 5-fold cross-validation (``random_state=42``) of the classes
that are some row's true label.  ``--params JSON`` sets parameters on top of each variant's, e.g. the
settings the VI-PLL authors' script gives one data set.

``--datasets``: other real-world sets in the same ``.mat`` format by path (e.g. ``lost.mat``, which the
project does not ship), in place of or beside the shared ones.

Run: ``nice .venv/bin/python benchmarks/proden.py [--seeds 0 1 2 3 4] [--datasets NAME|PATH ...] [--variants NAME ...] [--rows N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import pll
from pll.data import dst_pll_protocol
from pll.methods import METHODS

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "realworld"
UCI = ROOT.parent / "shared" / "data" / "uci"
DATASETS = ("bird-song", "msrc-v2")
UCI_GRID = ("ecoli", "flare", "mfeat-fourier", "semeion")
"""The UCI sets of the strong-learners-uci grid (``benchmarks/grids/strong_learners_uci.yaml``), which ``--baseline``
measures with the grid's class-dependent noise beside the real-world sets."""
VI_PLL_FOLDS = 5
VARIANTS = {
    "defaults": {},
    "3 networks": {"n_networks": 3},
    "50 epochs": {"max_epochs": 50},
    "200 epochs (the authors' number)": {"max_epochs": 200, "max_steps": 100_000},
    "batch 64": {"batch_size": 64},
    "one layer of 300": {"hidden_layer_sizes": (300,)},
    "learning rate 1e-3": {"learning_rate": 1e-3},
    "scaling=standard": {"scaling": "standard"},
    "scaling=cube_root": {"scaling": "cube_root"},
    "init=ipal": {"init": "ipal"},
    "neighbor_weight=0.5": {"neighbor_weight": 0.5},
    "class balance": {"class_balance": True},
    "class balance, 3 networks": {"class_balance": True, "n_networks": 3},
    "in-training cleaning alpha=0.05": {"cleaning_alpha": 0.05},
}
CLEANING = {"cleaning alpha=0.1": 0.1, "cleaning alpha=0.05": 0.05, "cleaning alpha=0.02": 0.02}


def data_path(name):
    """A shared real-world set's file by name (``bird-song``), a UCI set of the grid by name, or any other path."""
    if name in DATASETS:
        return DATA / f"{name}.mat"
    return UCI / f"{name}.arff" if name in UCI_GRID else Path(name)


def cleaned_bags(X, S, alpha, seed):
    """``S`` (bool, (n, l)) narrowed by conformal sets of a Proden fitted on the other half of the rows."""
    half = np.random.default_rng([seed, 7]).permutation(len(X)) % 2 == 1
    kept = S.copy()
    for fit_rows in (half, ~half):
        rows = ~fit_rows
        model = pll.Proden(random_state=seed).fit(X[fit_rows], S[fit_rows])
        sets = pll.ConformalSets(model, alpha=alpha).fit(X[rows], S[rows]).predict_sets(X[rows])
        narrowed = S[rows] & sets
        kept[rows] = np.where(narrowed.any(axis=1, keepdims=True), narrowed, S[rows])
    return kept


def prepared(path, protocol):
    """The data set at ``path`` as ``protocol`` prepares it.

    ``uai-2025`` keeps the classes of 99 % of the rows; ``vi-pll``, as Fuchs &
    Klein's loader, the classes that are some row's true label and in some bag,
    and the rows of those classes; a UCI set of the grid gets its class-dependent
    noise (seed 0).
    """
    if protocol == "uai-2025":
        return dst_pll_protocol(pll.load_dataset(path), coverage=0.99)
    if protocol == "vi-pll":  # arrays (X, S, y): the classes' indices change
        ds = pll.load_dataset(path)
        kept = np.intersect1d(np.unique(ds.y), np.flatnonzero(ds.S.any(axis=0)))
        rows = np.flatnonzero(np.isin(ds.y, kept))
        return ds.X[rows], ds.S[np.ix_(rows, kept)], np.searchsorted(kept, ds.y[rows])
    ds = pll.load_dataset(path, protocol=protocol)
    if Path(path).stem in UCI_GRID:
        ds = ds.with_bags(pll.noise.class_dependent(ds.y, ds.n_classes, random_state=0))
    return ds


def splits(ds, protocol, seeds):
    """``(seed, training rows, test rows)`` of every split the protocol measures, the rows as ``(X, S, y)``.

    Fuchs & Klein's protocol (``vi-pll``): scikit-learn's ``StratifiedKFold`` (5
    folds, shuffled, ``random_state=42``) on the true labels, whatever the
    seeds, each fold's model seeded by its number; otherwise
    ``pll.train_test_split`` (80/20) for each seed.
    """
    if protocol == "vi-pll":
        from sklearn.model_selection import StratifiedKFold

        X, S, y = ds
        folds = StratifiedKFold(VI_PLL_FOLDS, shuffle=True, random_state=42).split(X, y)
        for fold, (train, test) in enumerate(folds):
            yield fold, (X[train], S[train], y[train]), (X[test], S[test], y[test])
        return
    for seed in seeds:
        train, test = pll.train_test_split(ds, random_state=seed)
        yield seed, (train.X, train.S, train.y), (test.X, test.S, test.y)


def measure(params, seeds, datasets, clean_alpha=None, protocol="none", method="proden"):
    """Test accuracies by data set (one per split), fit seconds by data set (one per split), and cleaning's effect."""
    accuracy, seconds, bags = {}, {}, []
    for name in datasets:
        ds = prepared(data_path(name), protocol)
        accuracy[name], seconds[name] = [], []
        for seed, (X, S_train, y), (X_test, _, y_test) in splits(ds, protocol, seeds):
            t0 = time.perf_counter()
            S = S_train
            if clean_alpha is not None:
                S = cleaned_bags(X, S_train, clean_alpha, seed)
                kept = S[np.arange(len(S)), y].mean()
                bags.append((name, S_train.sum(axis=1).mean(), S.sum(axis=1).mean(), kept))
            clf = METHODS[method](random_state=seed).set_params(**params).fit(X, S)
            seconds[name].append(time.perf_counter() - t0)
            accuracy[name].append(float((clf.predict(X_test) == y_test).mean()))
    return accuracy, seconds, bags


def plain_epoch(model, X, S):
    """Seconds of one epoch of ``model``'s network on ``X`` with fixed uniform targets: no reweighting, no bookkeeping."""
    import torch
    import torch.nn.functional as F

    from pll.utils._mlp import Adam, Perceptron, as_tensor, cpu_settings

    Z = as_tensor(model._scaled(X), "cpu")
    T = as_tensor(S / S.sum(axis=1, keepdims=True), "cpu")
    net = Perceptron(Z.shape[1], S.shape[1], model.hidden_layer_sizes, np.random.default_rng(0))
    optimiser, batch = Adam(net, model.alpha), model._batch(len(Z))
    t0 = time.perf_counter()
    with cpu_settings(1):
        for start in range(0, len(Z) - batch + 1, batch):
            rows = slice(start, start + batch)
            net.zero_grad()
            F.cross_entropy(net.logits(Z[rows], train=True), T[rows]).backward()
            optimiser.step(model.learning_rate, 0.9)
            torch.softmax(net.logits(Z[rows]).detach(), dim=1).numpy()
    return time.perf_counter() - t0


BASELINE_WORKER = """
import json, sys, time
import numpy as np
from threadpoolctl import threadpool_limits
import pll
rng = np.random.default_rng(0)
pll.Proden(max_epochs=2, random_state=0).fit(rng.random((40, 3)), rng.integers(0, 2, 40))  # imports and compiles
for line in sys.stdin:
    job = json.loads(line)
    data = np.load(job["npz"])
    t0 = time.process_time()
    with threadpool_limits(1):
        clf = pll.Proden(random_state=job["seed"]).fit(data["X"], data["S"])
    seconds = time.process_time() - t0
    print(json.dumps({"seconds": seconds, "predicted": clf.predict(data["X_test"]).tolist()}), flush=True)
"""
"""A process that fits the Proden of another revision on the splits it is sent (an .npz path and a seed a line)."""


def against_baseline(revision, seeds, datasets, protocol):
    """Proden's defaults here against those of git ``revision`` (e.g. its numpy network), split by split, in one run.

    The revision's ``pll/`` is extracted to a temporary folder and imported
    by a second process; the two fit the same splits in turn (which one goes
    first alternates), each BLAS and PyTorch on one thread.  Prints each data
    set's test accuracy under both and the ratio of the summed fit seconds, in
    CPU seconds of each process, which what else runs on a shared machine
    disturbs less than wall time.
    """
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "pll"], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        worker = subprocess.Popen([sys.executable, "-c", BASELINE_WORKER], cwd=tmp, text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env={**os.environ, "PYTHONPATH": tmp})
        rng = np.random.default_rng(0)
        pll.Proden(max_epochs=2, random_state=0).fit(rng.random((40, 3)), rng.integers(0, 2, 40))  # as the worker
        print(f"| data set | {revision} | this tree | difference |\n| --- | --- | --- | --- |")
        seconds, turn = {"base": 0.0, "here": 0.0}, 0
        for name in datasets:
            ds, accuracy = prepared(data_path(name), protocol), {"base": [], "here": []}
            for seed, (X, S, _), (X_test, _, y_test) in splits(ds, protocol, seeds):
                npz = Path(tmp) / "split.npz"
                np.savez(npz, X=X, S=S, X_test=X_test)
                for side in (("base", "here") if turn % 2 == 0 else ("here", "base")):
                    if side == "base":
                        worker.stdin.write(json.dumps({"npz": str(npz), "seed": seed}) + "\n")
                        worker.stdin.flush()
                        answer = json.loads(worker.stdout.readline())
                        took, predicted = answer["seconds"], np.array(answer["predicted"])
                    else:
                        t0 = time.process_time()
                        predicted = pll.Proden(random_state=seed).fit(X, S).predict(X_test)
                        took = time.process_time() - t0
                    seconds[side] += took
                    accuracy[side].append(100 * float((predicted == y_test).mean()))
                turn += 1
            base, here = np.mean(accuracy["base"]), np.mean(accuracy["here"])
            print(f"| {Path(name).stem} | {base:.1f} | {here:.1f} | {here - base:+.1f} |", flush=True)
        worker.stdin.close()
        worker.wait()
    print(f"fit CPU seconds: {revision} {seconds['base']:.0f}, this tree {seconds['here']:.0f}; "
          f"ratio (this tree / {revision}) {seconds['here'] / seconds['base']:.2f}")


def at_scale(n_rows, method="proden", params=None):
    """``method`` on ``n_rows`` synthetic rows: seconds, peak memory, disambiguation, Proden vs. a plain epoch."""
    from pll.data.synthetic import make_partial_label_table
    from pll.utils.progress import reporting

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"synthetic-{n_rows}.parquet"
        make_partial_label_table(n_rows, random_state=0).to_parquet(path, index=False)
        ds = pll.load_dataset(path)
    model = METHODS[method](random_state=0).set_params(**(params or {}))
    print(f"{n_rows:,} rows, {int(ds.S.sum()):,} candidates; {model.get_params(deep=False)}", flush=True)
    t0 = time.perf_counter()
    with reporting(lambda progress: print(progress, flush=True)):
        model.fit(ds.X, ds.S)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    accuracy = (model.disambiguate().labels == ds.y).mean()
    line = f"fit {seconds:.0f} s, peak RSS {peak:.2f} GiB, disambiguation accuracy {100 * accuracy:.1f} %"
    if method == "proden":
        epoch = plain_epoch(model, ds.X, ds.S)
        line += (f"; {model.n_networks} networks x {model.n_epochs_} epochs, one plain epoch {epoch:.0f} s, "
                 f"fit / plain epoch {seconds / epoch:.1f}x")
    print(line)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS),
                        help="shared real-world sets by name, or paths of other .mat files in the same format")
    parser.add_argument("--variants", nargs="+", default=None, choices=[*VARIANTS, *CLEANING],
                        help="Proden's changes to measure (default: all of them; for another method its defaults)")
    parser.add_argument("--protocol", default="none", choices=["none", "dst-pll", "uai-2025", "vi-pll"],
                        help="how the data sets are prepared and split: dst-pll as the DST-PLL paper, "
                             "uai-2025 as Fuchs & Kalinke, vi-pll as Fuchs & Klein (stratified 5-fold)")
    parser.add_argument("--method", default="proden", choices=["proden", "crosel", "vi_pll", "soft_voting"],
                        help="the deep learner whose defaults and variants are measured")
    parser.add_argument("--params", type=json.loads, default={}, metavar="JSON",
                        help="parameters of the method set on top of each variant's, e.g. the settings a paper's "
                             "script gives one data set: '{\"likelihood_weight\": 25, \"prior_weight\": 2}'")
    parser.add_argument("--rows", type=int, default=None,
                        help="measure the method (its defaults, or --params) at scale instead")
    parser.add_argument("--baseline", metavar="REVISION", default=None,
                        help="compare Proden's defaults with those of a git revision (e.g. the numpy network's "
                             "1f33d6a) on the data sets, the UCI grid's with --datasets")
    args = parser.parse_args(argv)
    if args.rows is not None:
        with threadpool_limits(1):
            at_scale(args.rows, args.method, args.params)
        return
    if args.baseline is not None:
        with threadpool_limits(1):
            against_baseline(args.baseline, args.seeds, args.datasets, args.protocol)
        return
    variants = args.variants or ([*VARIANTS, *CLEANING] if args.method == "proden" else ["defaults"])
    print(f"seeds {args.seeds}; protocol {args.protocol}; defaults: {METHODS[args.method]().get_params(deep=False)}; "
          f"set: {args.params}")
    names = [Path(name).stem for name in args.datasets]
    print(f"| variant | {' | '.join(names)} | seconds a fit ({', '.join(names)}) | fit time ratio |\n"
          f"| --- |{' --- |' * len(names)} --- | --- |")
    baseline = None
    with threadpool_limits(1):
        for variant in variants:
            params, clean_alpha = {**VARIANTS.get(variant, {}), **args.params}, CLEANING.get(variant)
            accuracy, seconds, bags = measure(params, args.seeds, args.datasets, clean_alpha, args.protocol,
                                              args.method)
            total = sum(map(sum, seconds.values()))
            baseline = baseline or total
            cells = " | ".join(f"{100 * np.mean(a):.1f} ± {100 * np.std(a, ddof=1) if len(a) > 1 else 0:.1f}"
                               for a in accuracy.values())
            fits = ", ".join(f"{np.mean(t):.0f}" for t in seconds.values())
            print(f"| {variant} | {cells} | {fits} | {total / baseline:.2f} |", flush=True)
            for name in args.datasets:
                mine = np.array([b[1:] for b in bags if b[0] == name])
                if mine.size:
                    print(f"  {name}: bag size {mine[:, 0].mean():.2f} -> {mine[:, 1].mean():.2f}, "
                          f"true label kept in {100 * mine[:, 2].mean():.1f} % of training rows", flush=True)


if __name__ == "__main__":
    main()

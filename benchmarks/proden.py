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

``--rows N``: instead, the defaults at scale on ``N`` rows of
:func:`pll.data.synthetic.make_partial_label_table` (the scale benchmark's table: 32 features,
20 classes, bags of the true label and 0-3 others), with progress lines: fit seconds, the
process's peak resident memory, the share of training rows disambiguated to their true label,
and the fit time as a ratio to one plain epoch (the same network, fixed uniform targets, no
reweighting), measured in the same run.  Measured here at 1,000,000 rows beside a grid run: 244 s
(1 network x 5 epochs), 1.83 GiB peak, 100 % disambiguated, 5.5x one plain epoch (44 s).

``--datasets``: other real-world sets in the same ``.mat`` format by path (e.g. ``lost.mat``, which the
project does not ship), in place of or beside the shared ones.

Run: ``nice .venv/bin/python benchmarks/proden.py [--seeds 0 1 2 3 4] [--datasets NAME|PATH ...] [--variants NAME ...] [--rows N]``.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import pll
from pll.data import dst_pll_protocol

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "realworld"
DATASETS = ("bird-song", "msrc-v2")
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
    """A shared real-world set's file by name (``bird-song``), or any other path as given."""
    return DATA / f"{name}.mat" if name in DATASETS else Path(name)


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
    """The data set at ``path`` as ``protocol`` prepares it: ``uai-2025`` keeps the classes of 99 % of the rows."""
    if protocol == "uai-2025":
        return dst_pll_protocol(pll.load_dataset(path), coverage=0.99)
    return pll.load_dataset(path, protocol=protocol)


def measure(params, seeds, datasets, clean_alpha=None, protocol="none"):
    """Test accuracies by data set (one per seed), the fit seconds of all of them, and cleaning's effect."""
    accuracy, seconds, bags = {}, 0.0, []
    for name in datasets:
        ds = prepared(data_path(name), protocol)
        accuracy[name] = []
        for seed in seeds:
            train, test = pll.train_test_split(ds, random_state=seed)
            t0 = time.perf_counter()
            S = train.S
            if clean_alpha is not None:
                S = cleaned_bags(train.X, train.S, clean_alpha, seed)
                kept = S[np.arange(len(S)), train.y].mean()
                bags.append((name, train.S.sum(axis=1).mean(), S.sum(axis=1).mean(), kept))
            clf = pll.Proden(**params, random_state=seed).fit(train.X, S)
            seconds += time.perf_counter() - t0
            accuracy[name].append(float((clf.predict(test.X) == test.y).mean()))
    return accuracy, seconds, bags


def plain_epoch(model, X, S):
    """Seconds of one epoch of ``model``'s network on ``X`` with fixed uniform targets: no reweighting, no bookkeeping."""
    from pll.methods._perceptron import Adam, Perceptron

    Z = model._scaled(X)
    T = (S / S.sum(axis=1, keepdims=True)).astype(np.float32)
    net = Perceptron(Z.shape[1], S.shape[1], model.hidden_layer_sizes, np.random.default_rng(0))
    optimiser, batch = Adam(net.params.size, model.alpha), model._batch(len(Z))
    t0 = time.perf_counter()
    for start in range(0, len(Z) - batch + 1, batch):
        rows = slice(start, start + batch)
        P = net.forward(Z[rows], train=True)
        net.backward((P - T[rows]) / batch)
        optimiser.step(net.params, net.grads, model.learning_rate, 0.9)
    return time.perf_counter() - t0


def at_scale(n_rows):
    """The defaults on ``n_rows`` synthetic rows: seconds, peak memory, disambiguation, ratio to one plain epoch."""
    from pll.data.synthetic import make_partial_label_table
    from pll.utils.progress import reporting

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"synthetic-{n_rows}.parquet"
        make_partial_label_table(n_rows, random_state=0).to_parquet(path, index=False)
        ds = pll.load_dataset(path)
    model = pll.Proden(random_state=0)
    print(f"{n_rows:,} rows, {int(ds.S.sum()):,} candidates; {model.get_params()}", flush=True)
    t0 = time.perf_counter()
    with reporting(lambda progress: print(progress, flush=True)):
        model.fit(ds.X, ds.S)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    accuracy = (model.disambiguate().labels == ds.y).mean()
    epoch = plain_epoch(model, ds.X, ds.S)
    print(f"fit {seconds:.0f} s ({model.n_networks} networks x {model.n_epochs_} epochs), peak RSS {peak:.2f} GiB, "
          f"disambiguation accuracy {100 * accuracy:.1f} %; one plain epoch {epoch:.0f} s, "
          f"fit / plain epoch {seconds / epoch:.1f}x")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS),
                        help="shared real-world sets by name, or paths of other .mat files in the same format")
    parser.add_argument("--variants", nargs="+", default=[*VARIANTS, *CLEANING], choices=[*VARIANTS, *CLEANING])
    parser.add_argument("--protocol", default="none", choices=["none", "dst-pll", "uai-2025"],
                        help="how the data sets are prepared: dst-pll as the DST-PLL paper, "
                             "uai-2025 as Fuchs & Kalinke")
    parser.add_argument("--rows", type=int, default=None, help="measure the defaults at scale instead")
    args = parser.parse_args(argv)
    if args.rows is not None:
        with threadpool_limits(1):
            at_scale(args.rows)
        return
    print(f"seeds {args.seeds}; protocol {args.protocol}; defaults: {pll.Proden().get_params()}")
    names = [Path(name).stem for name in args.datasets]
    print(f"| variant | {' | '.join(names)} | fit time ratio |\n| --- |{' --- |' * len(names)} --- |")
    baseline = None
    with threadpool_limits(1):
        for variant in args.variants:
            params, clean_alpha = VARIANTS.get(variant, {}), CLEANING.get(variant)
            accuracy, seconds, bags = measure(params, args.seeds, args.datasets, clean_alpha, args.protocol)
            baseline = baseline or seconds
            cells = " | ".join(f"{100 * np.mean(a):.1f} ± {100 * np.std(a, ddof=1) if len(a) > 1 else 0:.1f}"
                               for a in accuracy.values())
            print(f"| {variant} | {cells} | {seconds / baseline:.2f} |", flush=True)
            for name in args.datasets:
                mine = np.array([b[1:] for b in bags if b[0] == name])
                if mine.size:
                    print(f"  {name}: bag size {mine[:, 0].mean():.2f} -> {mine[:, 1].mean():.2f}, "
                          f"true label kept in {100 * mine[:, 2].mean():.1f} % of training rows", flush=True)


if __name__ == "__main__":
    main()

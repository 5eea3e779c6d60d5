"""DST-PLL's combination step: the compiled exact kernel against plain per-query Yager in Python.

One shared neighbor result (20,000 training rows, 20 classes, class-dependent
noise with three added candidates, 20,000 query rows, exact kNN with k = 20)
serves both ``n_neighbors`` = 10 and 20.  For each, the script times

* the kernel (:func:`pll.methods._yager.combine`, single-threaded numba code),
* the baseline: Yager's rule as the paper states it, one Python dict of focal
  sets per query (frozensets, as in the authors' code, and int bitmasks),

checks that beliefs and plausibilities agree, and prints the ratio.  Then it
runs ``DstPll.predict_with_reject`` on 1,000,000 queries (neighbor indices
drawn at random over the training rows) and reports time and peak memory.

Times are CPU seconds of this process (the kernel is single-threaded), so that
other work on a shared machine does not distort the ratio.

Run: ``.venv/bin/python benchmarks/dst_pll.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc
from collections import defaultdict

import numba
import numpy as np

import pll
from pll.methods._yager import combine, pack_bags
from pll.neighbors import NeighborResult

N_CLASSES = 20


def make_data(n_train, n_query, seed=0):
    """Gaussian classes in 10 dimensions, class-dependent noise with r = 3 on the training bags."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=2.0, size=(N_CLASSES, 10))
    y = rng.integers(N_CLASSES, size=n_train + n_query)
    X = centers[y] + rng.normal(size=(len(y), 10))
    S = pll.noise.class_dependent(y[:n_train], n_classes=N_CLASSES, r=3, random_state=seed)
    return X[:n_train], S, X[n_train:]


def yager_frozensets(s_tilde, bags):
    """Per-query Yager's rule over a dict of frozensets; returns singleton beliefs and plausibilities."""
    m = {s_tilde: 1.0}
    for bag in bags:
        r = s_tilde & bag
        bpa = {s_tilde: 1.0} if not r or r == s_tilde else {s_tilde: 0.5, r: 0.5}
        combined = defaultdict(float)
        for a, mass_a in m.items():
            for b, mass_b in bpa.items():
                combined[a & b] += mass_a * mass_b
        m = combined
    m[s_tilde] += m.pop(frozenset(), 0.0)
    bel = [0.0] * N_CLASSES
    pl = [0.0] * N_CLASSES
    for a, mass in m.items():
        if len(a) == 1:
            bel[next(iter(a))] = mass
        for y in a:
            pl[y] += mass
    return bel, pl


def yager_bitmasks(s_tilde, bags):
    """The same rule over a dict keyed by int bitmasks (a faster Python baseline)."""
    m = {s_tilde: 1.0}
    for bag in bags:
        r = s_tilde & bag
        bpa = {s_tilde: 1.0} if r == 0 or r == s_tilde else {s_tilde: 0.5, r: 0.5}
        combined = defaultdict(float)
        for a, mass_a in m.items():
            for b, mass_b in bpa.items():
                combined[a & b] += mass_a * mass_b
        m = combined
    m[s_tilde] += m.pop(0, 0.0)
    bel = [0.0] * N_CLASSES
    pl = [0.0] * N_CLASSES
    for a, mass in m.items():
        if a & (a - 1) == 0:
            bel[a.bit_length() - 1] = mass
        while a:
            low = a & -a
            pl[low.bit_length() - 1] += mass
            a ^= low
    return bel, pl


def cpu_time():
    """This process's CPU seconds: the machine is shared, so wall time would measure the neighbors' load."""
    return time.process_time()


def run_baseline(fn, bags, indices, s_tilde):
    out_bel = np.zeros((len(indices), N_CLASSES))
    out_pl = np.zeros((len(indices), N_CLASSES))
    t0 = cpu_time()
    for q, row in enumerate(indices.tolist()):
        out_bel[q], out_pl[q] = fn(s_tilde, [bags[i] for i in row])
    return cpu_time() - t0, out_bel, out_pl


def best_of(fn, repeats=3):
    times = []
    for _ in range(repeats):
        t0 = cpu_time()
        result = fn()
        times.append(cpu_time() - t0)
    return min(times), result


def compare(S, nb, baseline_rows):
    bag_bits = pack_bags(S)
    as_sets = [frozenset(np.flatnonzero(row).tolist()) for row in S]
    as_ints = [int(sum(1 << int(y) for y in np.flatnonzero(row))) for row in S]
    full_set, full_int = frozenset(range(N_CLASSES)), (1 << N_CLASSES) - 1
    n_query = nb.n_queries
    query_bits = pack_bags(np.ones((n_query, N_CLASSES), bool))
    for k in (10, 20):
        idx = np.ascontiguousarray(nb.indices[:, :k])
        combine(idx[:10], bag_bits, query_bits[:10], N_CLASSES)  # compiled (or loaded from cache) before timing
        t_kernel, (bel, pl, _) = best_of(lambda: combine(idx, bag_bits, query_bits, N_CLASSES))
        sub = idx[:baseline_rows]
        t_sets, bel_s, pl_s = run_baseline(yager_frozensets, as_sets, sub, full_set)
        t_ints, bel_i, pl_i = run_baseline(yager_bitmasks, as_ints, sub, full_int)
        diff = max(
            np.abs(bel[:baseline_rows] - bel_s).max(),
            np.abs(pl[:baseline_rows] - pl_s).max(),
            np.abs(bel[:baseline_rows] - bel_i).max(),
            np.abs(pl[:baseline_rows] - pl_i).max(),
        )
        per_kernel = t_kernel / n_query
        per_sets, per_ints = t_sets / len(sub), t_ints / len(sub)
        print(f"n_neighbors={k}: {n_query} queries")
        print(f"  kernel (1 thread)          {t_kernel:8.3f} s   {1e6 * per_kernel:8.2f} us/query (CPU time)")
        scope = "all queries" if len(sub) == n_query else f"first {len(sub)} queries, per query"
        print(f"  baseline dict[frozenset]   {t_sets:8.3f} s   {1e6 * per_sets:8.2f} us/query ({scope})")
        print(f"  baseline dict[int bitmask] {t_ints:8.3f} s   {1e6 * per_ints:8.2f} us/query ({scope})")
        print(f"  max |difference| of beliefs and plausibilities: {diff:.3g}")
        print(f"  ratio: {per_sets / per_kernel:6.1f}x vs frozensets, {per_ints / per_kernel:6.1f}x vs bitmasks")
        t_method, r = best_of(
            # No support test: the authors' method has no reasons, and it would search the training rows at fit.
            lambda: pll.DstPll(n_neighbors=k, support_quantile=None).fit(np.zeros((len(S), 1)), S)
            .predict_with_reject(np.zeros((n_query, 1)), neighbors=NeighborResult(idx, nb.distances[:, :k])),
            repeats=1,
        )
        print(
            f"  whole method (combination + decision): {1e6 * t_method / n_query:.2f} us/query; "
            f"accepted {r.accept.mean():.1%}, guesses {r.guess.mean():.1%}"
        )


def million(S, n_rows, k, seed=1):
    rng = np.random.default_rng(seed)
    nb = NeighborResult(rng.integers(len(S), size=(n_rows, k)), np.zeros((n_rows, k)))
    clf = pll.DstPll(n_neighbors=k, support_quantile=None).fit(np.zeros((len(S), 1)), S)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    t0, c0 = time.perf_counter(), cpu_time()
    r = clf.predict_with_reject(np.zeros((n_rows, 1)), neighbors=nb)
    elapsed, cpu = time.perf_counter() - t0, cpu_time() - c0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = sum(a.nbytes for a in (r.labels, r.accept, r.score, r.guess, r.beliefs, r.plausibilities))
    print(f"{n_rows} queries, n_neighbors={k} (random neighbor indices), DstPll.predict_with_reject:")
    print(f"  wall {elapsed:.2f} s, CPU {cpu:.2f} s ({1e6 * cpu / n_rows:.2f} CPU us/query)")
    print(
        f"  peak traced allocations {peak / 2**20:.0f} MiB, of which the returned arrays are {out / 2**20:.0f} MiB; "
        f"process max RSS {rss_before / 1024:.0f} -> {rss_after / 1024:.0f} MiB"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    numba.set_num_threads(1)
    n_train, n_query = (2_000, 2_000) if args.quick else (20_000, 20_000)
    baseline_rows = 500 if args.quick else n_query
    n_million = 20_000 if args.quick else 1_000_000
    X_train, S, X_query = make_data(n_train, n_query)
    t0 = time.perf_counter()
    nb = pll.neighbors.kneighbors(X_train, X_query, k=20, backend="exact")
    print(f"shared neighbor result: {n_query} queries x 20 neighbors among {n_train} rows ({time.perf_counter() - t0:.1f} s)")
    print(f"training bags: mean size {S.sum(axis=1).mean():.2f}, {N_CLASSES} classes")
    compare(S, nb, baseline_rows)
    million(S, n_million, 10)
    million(S, n_million, 20)


if __name__ == "__main__":
    main()

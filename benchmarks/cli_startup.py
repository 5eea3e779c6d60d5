"""How fast the command line answers when it does not run anything: help, and arguments it refuses.

Each command runs as a fresh process (the median of ``--repeat`` runs) in an empty folder with no Prefect
server configured.  Baselines measured in the same run: the bare interpreter (``python -c pass``) and
importing Prefect, which every orchestrated command paid for before it could look at its arguments.
Printed: seconds and the ratio to the bare interpreter.

Run: ``.venv/bin/python benchmarks/cli_startup.py``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BASELINES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -c 'import prefect'": [sys.executable, "-c", "import prefect"],
}
PLL = [sys.executable, "-m", "pll_pipeline.flows.cli"]
COMMANDS = {
    "pll --help": ["--help"],
    "pll run --help": ["run", "--help"],
    "pll train --help": ["train", "--help"],
    "pll score --help": ["score", "--help"],
    "pll run --methods knn": ["run", "--methods", "knn"],
    "pll run --dataset nosuch.csv": ["run", "--dataset", "nosuch.csv"],
    "pll run --noise-params (typo)": ["run", "--noise", "uniform", "--noise-params", '{"pp": 0.7}'],
    "pll run --tracking-uri sqlite:////proc/x.db": ["run", "--tracking-uri", "sqlite:////proc/x.db"],
    "pll score --output /proc/nope/out.parquet": [
        "score", "--model", "models:/m/1", "--input", "rows.csv", "--output", "/proc/nope/out.parquet"],
}


def seconds(argv, cwd, env, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=env, capture_output=True, timeout=300)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per command; the median is printed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cwd:
        Path(cwd, "rows.csv").write_text("x1,x2\n0.5,1.0\n")
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PREFECT_API_URL": "", "PREFECT_HOME": cwd}
        base = seconds(BASELINES["python -c pass"], cwd, env, args.repeat)
        rows = [(name, seconds(argv, cwd, env, args.repeat)) for name, argv in BASELINES.items()]
        rows += [(name, seconds(PLL + argv, cwd, env, args.repeat)) for name, argv in COMMANDS.items()]
    width = max(len(name) for name, _ in rows)
    print(f"{'command':<{width}}  seconds  x interpreter start")
    for name, t in rows:
        print(f"{name:<{width}}  {t:7.2f}  {t / base:6.1f}")


if __name__ == "__main__":
    main()

"""Run several ``pll`` commands in one fresh Python process, as a user's shell session would.

Usage: ``python tests/cli_session.py '[["run", ...], ["train", ...]]'``; exits with the first
non-zero status.  Dask's LocalCluster re-imports this file in its workers, hence the guard.
"""

import json
import sys

if __name__ == "__main__":
    from flows.cli import main

    for argv in json.loads(sys.argv[1]):
        print(f"$ pll {' '.join(argv)}", flush=True)
        code = main(argv)
        if code:
            sys.exit(code)

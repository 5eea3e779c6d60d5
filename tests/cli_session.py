"""Run several ``pll`` commands in one fresh Python process, as a user's shell session would.

Usage: ``python tests/cli_session.py '[["run", ...], {"MLFLOW_TRACKING_URI": ...}, ["train", ...]]'``:
a list is a command, a mapping sets environment variables for the commands after it (as ``export``
would).  Each command is announced by a line ``$ pll <arguments>`` on stdout and on stderr, so that both
can be cut into the commands' outputs.  Exits with the first non-zero status.  Dask's LocalCluster
re-imports this file in its workers, hence the guard.
"""

import json
import os
import sys

if __name__ == "__main__":
    from pll_pipeline.flows.cli import main

    for item in json.loads(sys.argv[1]):
        if isinstance(item, dict):
            os.environ.update(item)
            continue
        for stream in (sys.stdout, sys.stderr):
            print(f"$ pll {' '.join(item)}", file=stream, flush=True)
        code = main(item)
        if code:
            sys.exit(code)

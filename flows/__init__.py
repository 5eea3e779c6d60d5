"""Prefect flows that compose the tasks of :mod:`tasks` into pipelines."""

import os

# A temporary Prefect server with analytics on can log "database is locked";
# set before Prefect is imported anywhere in this package.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

# Every flow passes ``log_prints=LOG_PRINTS``: Prefect's print logging replaces ``builtins.print`` for the
# whole flow run, and numba, which compiles pynndescent's kernels on their first use in a process, cannot
# type the replacement ("Untyped global name 'print'"), so approximate kNN search would fail inside any
# flow.  Flows and tasks report through Prefect's run logger instead.
LOG_PRINTS = False

"""Prefect flows that compose the tasks of :mod:`tasks` into pipelines."""

import os

# A temporary Prefect server with analytics on can log "database is locked";
# set before Prefect is imported anywhere in this package.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

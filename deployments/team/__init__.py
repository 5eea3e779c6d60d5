"""A team's servers on one host: PostgreSQL, an MLflow tracking server and a Prefect server on it, Dask workers.

``python -m pll_pipeline.deployments.team start FOLDER`` starts them all in ``FOLDER`` (see
:mod:`pll_pipeline.deployments.team.services`); ``stop FOLDER`` stops them; ``env FOLDER`` prints the lines
that point ``pll`` at them.  SQLite stays the default of one person on one machine; this is for several
people, or many concurrent runs, sharing one store.
"""

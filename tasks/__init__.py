"""Prefect tasks: thin wrappers that run one pipeline stage of :mod:`pll` each."""

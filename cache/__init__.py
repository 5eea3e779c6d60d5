"""The signed stage cache: where entries live (:mod:`pll_pipeline.cache.store`) and which stages use it (:mod:`pll_pipeline.cache.policy`).

Nothing here runs a stage or logs to MLflow.
"""

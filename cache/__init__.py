"""The signed stage cache: where entries live (:mod:`cache.store`) and which stages use it (:mod:`cache.policy`).

Nothing here runs a stage or logs to MLflow.
"""

"""The MLflow layer: where a run logs (the store), its run layout and names, the model flavor and registry.

Flows start and end the tracked runs; nothing here runs a pipeline stage
(:mod:`tasks`) or a flow (:mod:`flows`).
"""

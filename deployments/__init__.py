"""What runs the pipeline beyond one command: Prefect's deployments file (``prefect.yaml``) and the team setup (:mod:`.team`)."""

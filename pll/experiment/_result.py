"""What one run computed: :class:`RunResult`, the value of the protocol's last stage."""

from __future__ import annotations

from dataclasses import dataclass

from ._evaluate import Evaluation
from ._holdout import SplitRows
from ._neighbor_stage import neighbor_metrics
from ._predictions import prediction_frames


@dataclass(frozen=True)
class RunResult:
    """What one run computed.

    ``data``: the data set with the noise model's bags; ``rows``: its split;
    ``neighbors``: feature pipeline -> :class:`~pll.experiment.NeighborSet`;
    ``outputs``: the :class:`~pll.experiment.MethodOutput` of every method
    run and reject option; ``evaluation``: their :class:`~pll.experiment.Evaluation`.
    """

    data: object
    rows: SplitRows
    neighbors: dict
    outputs: tuple
    evaluation: Evaluation

    @property
    def metrics(self) -> dict:
        """Method run name -> the metrics its MLflow run logs, by the names it logs them under."""
        return self.evaluation.metrics

    @property
    def neighbor_metrics(self) -> dict:
        """The neighbor searches' metrics, which the pipeline run (the method runs' parent) logs."""
        return {k: v for features, nb in self.neighbors.items() for k, v in neighbor_metrics(features, nb).items()}

    def prediction_frames(self) -> dict:
        """The predictions tables a pipeline run logs (:func:`~pll.experiment.prediction_frames`)."""
        return prediction_frames(self.outputs, self.data, self.rows)

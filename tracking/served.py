"""What a served pll model answers to bad input: HTTP 400 with pll's one line.

MLflow's scoring server (``mlflow models serve``) answers any other exception
of a model with "Encountered an unexpected error ..." and the stack trace, and
rewrites an :class:`~mlflow.exceptions.MlflowException`'s message to begin
with a dump of the request's data.  :class:`InputRefused` keeps the status of
a bad request (400) and makes the JSON ``message`` exactly the line that
``pll score`` prints for the same table, only naming ``model input`` instead
of a file.

For the server to pass a table's every column to the model, the model must be
logged without an input schema: MLflow drops columns a schema does not name
before the model sees them, so an extra column would be scored silently.
"""

from __future__ import annotations

import json

import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

from pll.errors import PllError

SOURCE = "model input"


class InputRefused(MlflowException):
    """Bad model input, answered as ``{"error_code": "INVALID_PARAMETER_VALUE", "message": <pll's line>}``."""

    def __init__(self, line: str):
        super().__init__(line, error_code=INVALID_PARAMETER_VALUE)
        self.line = line

    def serialize_as_json(self):
        return json.dumps({"error_code": self.error_code, "message": self.line})


def predict_served(fitted, model_input) -> pd.DataFrame:
    """``fitted.predict_frame`` of the table a pyfunc model gets; bad input raises :class:`InputRefused`."""
    try:
        return fitted.predict_frame(pd.DataFrame(model_input), source=SOURCE)
    except PllError as exc:
        raise InputRefused(str(exc)) from None

"""A model trained before version 0.2 regrouped pll's modules still loads and scores as it did.

``tests/fixtures/model-0.1`` is a DST-PLL model with conformal sets that ``pll train --dataset iris --method
dst_pll`` logged with the code before the move (its pickles name ``tracking.models``, ``pll.scoring``,
``pll.methods.dst_pll``, ``pll.conformal``); ``model-0.1-iris-predictions.csv`` is what that code predicted
for the iris rows with it.
"""

import sys
from pathlib import Path

import numpy as np
import pandas as pd

import pll
from pll.serving import FittedModel
from pll_pipeline.tracking.models import load_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_a_model_saved_before_the_move_loads_and_predicts_as_it_did(tmp_path):
    pickled = (FIXTURES / "model-0.1" / "artifacts" / "fitted_model.pkl").read_bytes()
    assert b"pll.scoring" in pickled and b"pll.methods.dst_pll" in pickled  # old module paths, as saved
    assert b"tracking.models" in (FIXTURES / "model-0.1" / "python_model.pkl").read_bytes()

    fitted, _ = load_model(str(FIXTURES / "model-0.1"), f"sqlite:///{tmp_path / 'mlflow.db'}")

    assert isinstance(fitted, FittedModel) and isinstance(fitted.estimator, pll.DstPll)
    assert "tracking" not in sys.modules and "tracking.models" not in sys.modules  # the old names were lent only
    ds = pll.load_dataset("iris")
    got = fitted.predict_frame(pd.DataFrame(ds.X, columns=list(fitted.feature_names)))
    expected = pd.read_csv(FIXTURES / "model-0.1-iris-predictions.csv")
    assert got["label"].tolist() == expected["label"].tolist()
    assert got["accept"].tolist() == expected["accept"].tolist()
    np.testing.assert_array_equal(got["score"].to_numpy(), expected["score"].to_numpy())
    assert got["set"].tolist() == expected["set"].tolist()

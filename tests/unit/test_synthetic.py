"""Synthetic partial-label tables: the layout the loaders read, bags that hold the true label."""

import numpy as np
import pytest

import pll
from pll.data.synthetic import make_partial_label_table
from pll.errors import InvalidParameterError


def test_bags_hold_the_true_label_and_up_to_three_others(tmp_path):
    table = make_partial_label_table(2000, n_features=5, n_classes=7, random_state=3)
    sizes = table["candidates"].str.split("|").map(len)
    assert set(sizes) == {1, 2, 3, 4}  # the true label and 0 to 3 others, each size drawn
    assert all(label in bag.split("|") for label, bag in zip(table["label"], table["candidates"]))
    assert table["label"].nunique() == 7
    path = tmp_path / "synthetic.parquet"
    table.to_parquet(path, index=False)
    ds = pll.load_dataset(str(path))
    assert ds.X.shape == (2000, 5) and ds.S.shape == (2000, 7)
    assert ds.S[np.arange(2000), ds.y].all()
    assert table.equals(make_partial_label_table(2000, n_features=5, n_classes=7, random_state=3))


@pytest.mark.parametrize("kwargs", [{"n_rows": 0}, {"n_rows": 10, "n_classes": 1}, {"n_rows": 10, "max_extra": 5,
                                                                                  "n_classes": 5}])
def test_bad_sizes_are_refused(kwargs):
    n_rows = kwargs.pop("n_rows")
    with pytest.raises(InvalidParameterError):
        make_partial_label_table(n_rows, **kwargs)

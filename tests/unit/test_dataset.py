"""The data set type, its validation and summary, the DST-PLL protocol and the split."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pll.data import PartialLabelDataset, apply_protocol, dst_pll_protocol, load_dataset, split_indices, train_test_split
from pll.errors import InvalidDataError, InvalidParameterError


def _ds(n=12, l=4, seed=0, **kwargs):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, l, size=n)
    S = rng.random((n, l)) < 0.4
    S[np.arange(n), y] = True
    return PartialLabelDataset(rng.normal(size=(n, 3)), S, y, [f"c{i}" for i in range(l)], "toy", **kwargs)


def test_arrays_are_normalised_and_summarised():
    ds = _ds()
    assert ds.X.dtype == np.float64 and ds.S.dtype == bool and ds.y.dtype == np.int64
    s = ds.summary()
    assert (s["rows"], s["features"], s["classes"]) == (12, 3, 4)
    assert s["average_bag_size"] == pytest.approx(ds.S.sum() / 12)
    assert s["true_label_outside_bag"] == 0 and s["empty_bags"] == 0


def test_fingerprint_changes_with_content():
    a, b = _ds(), _ds()
    assert a.fingerprint() == b.fingerprint()
    flipped = a.S.copy()
    flipped[0, (a.y[0] + 1) % 4] ^= True
    assert a.with_bags(flipped).fingerprint() != a.fingerprint()


def test_validation_errors_name_the_source_and_row():
    X, S, y = np.zeros((3, 2)), np.eye(3, dtype=bool), np.arange(3)
    with pytest.raises(InvalidDataError, match=r"data\.csv: 1 row\(s\) have a feature that is NaN or infinite \(first at row 2, feature 1\)"):
        PartialLabelDataset(np.array([[0, 0], [0, 0], [0, np.inf]]), S, y, list("abc"), "d", info={"source": "data.csv"})
    with pytest.raises(InvalidDataError, match=r"d: candidate bags must hold only 0/1 values \(found 2 at row 1, class column 0\)"):
        PartialLabelDataset(X, [[1, 0, 0], [2, 0, 0], [0, 0, 1]], y, list("abc"), "d")
    with pytest.raises(InvalidDataError, match="3 feature rows but 2 candidate bags"):
        PartialLabelDataset(X, S[:2], y, list("abc"), "d")
    with pytest.raises(InvalidDataError, match="3 rows but 2 true labels"):
        PartialLabelDataset(X, S, y[:2], list("abc"), "d")
    with pytest.raises(InvalidDataError, match="at least three classes, found 2"):
        PartialLabelDataset(X, S[:, :2] | True, y % 2, list("ab"), "d")
    with pytest.raises(InvalidDataError, match="class names are not unique"):
        PartialLabelDataset(X, S, y, list("aba"), "d")


def test_noisy_partial_labels_are_accepted_only_when_enabled_and_counted():
    ds = _ds()
    S = ds.S.copy()
    S[0] = False
    S[1, ds.y[1]] = False
    S[1, (ds.y[1] + 1) % 4] = True
    with pytest.raises(InvalidDataError, match="empty candidate bag.*pass --noisy-bags.*allow_empty_bags=True"):
        ds.with_bags(S, allow_true_label_outside=True)
    with pytest.raises(InvalidDataError, match=r"true label of 2 row\(s\) is not in its bag \(first at row 0\)"):
        ds.with_bags(S, allow_empty_bags=True)
    noisy = ds.with_bags(S, allow_empty_bags=True, allow_true_label_outside=True)
    assert noisy.summary()["empty_bags"] == 1 and noisy.summary()["true_label_outside_bag"] == 2
    assert noisy.subset([0, 1]).allow_empty_bags  # the flags travel with subsets


# ---------------------------------------------------------------- DST-PLL protocol


def _oracle_protocol(X, S, y, coverage=0.95):
    n, l = S.shape
    counts = [int((y == c).sum()) for c in range(l)]
    by_frequency = sorted(range(l), key=lambda c: -counts[c])
    c, covered = 0, 0
    while covered <= coverage * n:
        covered += counts[by_frequency[c]]
        c += 1
    bag_counts = [int(S[:, j].sum()) for j in range(l)]
    kept = sorted(sorted(range(l), key=lambda j: (-bag_counts[j], j))[:c])
    rows = [i for i in range(n) if y[i] in kept]
    Xk = X[rows]
    features = [j for j in range(X.shape[1]) if len(set(Xk[:, j])) > 1]
    return Xk[:, features], S[rows][:, kept], np.array([kept.index(y[i]) for i in rows]), kept


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(3, 9))
def test_dst_pll_protocol_matches_a_direct_reading_of_its_definition(seed, l):
    rng = np.random.default_rng(seed)
    n = 60
    y = np.minimum(rng.geometric(0.35, size=n) - 1, l - 1)  # skewed class sizes
    S = rng.random((n, l)) < rng.uniform(0.05, 0.6)
    S[np.arange(n), y] = True
    X = rng.integers(0, 3, size=(n, 5)).astype(float)
    X[:, 2] = 1.0  # always constant
    X_, S_, y_, kept = _oracle_protocol(X, S, y)
    if len(kept) < 3:
        with pytest.raises(InvalidDataError, match="at least three classes"):
            dst_pll_protocol(PartialLabelDataset(X, S, y, [str(c) for c in range(l)], "r"))
        return
    out = dst_pll_protocol(PartialLabelDataset(X, S, y, [str(c) for c in range(l)], "r"))
    np.testing.assert_array_equal(out.X, X_)
    np.testing.assert_array_equal(out.S, S_)
    np.testing.assert_array_equal(out.y, y_)
    assert out.classes.tolist() == [str(c) for c in kept]
    assert out.info["protocol_dropped_rows"] == n - out.n_rows
    assert out.info["protocol_dropped_features"] == X.shape[1] - out.n_features


def test_dst_pll_protocol_on_the_real_world_files(shared_data):
    bird = load_dataset(shared_data / "realworld" / "bird-song.mat", protocol="dst-pll")
    # bird-song's 10 most frequent true classes cover 4764 of 4998 rows (> 95 %), 9 cover 4638 (< 95 %)
    assert (bird.n_rows, bird.n_classes, bird.n_features) == (4764, 10, 38)
    assert bird.summary()["protocol"] == "dst-pll"
    msrc = load_dataset(shared_data / "realworld" / "msrc-v2.mat", protocol="dst-pll")
    # 19 true classes cover > 95 %; the 19 labels most frequent in bags differ from them (7 and 20
    # replace 16 and 17), so fewer rows than 95 % remain
    assert (msrc.n_rows, msrc.n_classes, msrc.n_features) == (1663, 19, 48)
    assert "7" in msrc.classes and "17" not in msrc.classes


def test_protocol_errors():
    ds = _ds()
    with pytest.raises(InvalidParameterError, match="unknown data protocol 'x'"):
        apply_protocol(ds, "x")
    unlabelled = PartialLabelDataset(ds.X, ds.S, None, ds.classes, "u")
    with pytest.raises(InvalidDataError, match="u: the DST-PLL protocol needs true labels"):
        dst_pll_protocol(unlabelled)
    assert apply_protocol(ds, "none") is ds


# ---------------------------------------------------------------- split


def test_split_is_seeded_80_20_and_disjoint():
    train, test = split_indices(1000, random_state=3)
    assert train.size == 800 and test.size == 200
    assert np.intersect1d(train, test).size == 0 and np.union1d(train, test).size == 1000
    again = split_indices(1000, random_state=3)
    np.testing.assert_array_equal(train, again[0])
    assert not np.array_equal(test, split_indices(1000, random_state=4)[1])
    a, b = train_test_split(_ds(n=50), random_state=0)
    assert a.n_rows == 40 and b.n_rows == 10

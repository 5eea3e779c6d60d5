"""Cache keys from small descriptors of stage inputs; which failures are worth a retry."""

import json

import numpy as np
import pytest
from distributed.comm.core import CommClosedError
from distributed.scheduler import KilledWorker

import pll
from pll.errors import DataFileError, InvalidParameterError
from pll.experiment import make_split
from pll.features import featurize
from pll.neighbors import NeighborResult
from pll.noise import apply_noise
from tasks.caching import array_digest, code_version, describe, is_transient


def key(value):
    return json.dumps(describe(value), sort_keys=True)


def test_array_digest_sees_content_dtype_and_shape():
    a = np.arange(12, dtype=np.int64)
    assert array_digest(a) == array_digest(a.copy())
    b = a.copy()
    b[7] += 1
    assert array_digest(b) != array_digest(a)
    assert array_digest(a.astype(np.int32)) != array_digest(a)
    assert array_digest(a.reshape(3, 4)) != array_digest(a)
    # Memory layout is not content.
    m = np.arange(12.0).reshape(3, 4)
    assert array_digest(np.asfortranarray(m)) == array_digest(m)


def test_descriptor_of_a_data_set_is_small_and_follows_its_contents():
    ds = pll.load_dataset("digits")
    text = key(ds)
    assert len(text) < 2000  # a fingerprint, not the 1797 x 64 features
    assert key(pll.load_dataset("digits")) == text
    noisy0, noisy1 = (apply_noise(ds, "class_dependent", None, seed) for seed in (0, 1))
    assert key(noisy0) != text
    assert key(noisy0) == key(apply_noise(ds, "class_dependent", None, 0))
    assert key(noisy0) != key(noisy1)


def test_descriptor_of_a_split_and_features():
    ds = pll.load_dataset("iris")
    rows0, rows1 = make_split(ds.n_rows, 0), make_split(ds.n_rows, 1)
    assert key(rows0) == key(make_split(ds.n_rows, 0))
    assert key(rows0) != key(rows1)
    split = featurize(ds, rows0.train, rows0.test, "minmax")
    assert key(split) == key(featurize(ds, rows0.train, rows0.test, "minmax"))
    assert key(split) != key(featurize(ds, rows0.train, rows0.test, "standard"))


def test_timings_and_addresses_are_not_content():
    idx, dist = np.array([[1, 2]]), np.array([[0.5, 0.7]])
    a = NeighborResult(idx, dist, None, "exact", False, {"query": 0.1})
    b = NeighborResult(idx, dist, None, "exact", False, {"query": 9.9})
    assert key(a) == key(b)
    assert key(a) != key(NeighborResult(idx, dist + 1e-9, None, "exact", False, {}))
    assert key({"address": "tcp://a:1", "n_jobs": 2}) == key({"address": "tcp://b:2", "n_jobs": 2})
    assert key({"n_jobs": 2}) != key({"n_jobs": 3})


def test_scalars_keep_their_type():
    assert key(1) != key(1.0) != key("1") != key(True)
    assert describe(np.int64(3)) == 3 and describe(np.float32(0.5)) == 0.5


def test_unknown_types_are_refused_by_name():
    with pytest.raises(TypeError, match=r"input 'options.fn' of type function"):
        describe({"fn": lambda: 0}, "options")


def test_code_version_is_stable_within_a_process():
    assert code_version() == code_version()
    assert len(code_version()) == 32


@pytest.mark.parametrize(
    "exc, transient",
    [
        (OSError("disk"), True),
        (ConnectionResetError(), True),
        (TimeoutError(), True),
        (CommClosedError("lost"), True),
        (KilledWorker("task", "worker", 3), True),
        (DataFileError("x.mat: no such file"), False),
        (InvalidParameterError("k"), False),
        (ValueError("bug"), False),
        (TypeError("bug"), False),
    ],
)
def test_only_machine_network_and_cluster_failures_are_retried(exc, transient):
    assert is_transient(exc) is transient


def test_stages_of_large_runs_are_not_cached(monkeypatch):
    from prefect.cache_policies import NO_CACHE

    from tasks.caching import DEFAULT_CACHE_MAX_ROWS, bounded
    from tasks.neighbors import find_neighbors

    assert bounded(find_neighbors, DEFAULT_CACHE_MAX_ROWS) is find_neighbors
    large = bounded(find_neighbors, DEFAULT_CACHE_MAX_ROWS + 1)
    assert large.persist_result is False and large.cache_policy is NO_CACHE
    monkeypatch.setenv("PLL_CACHE_MAX_ROWS", "0")
    assert bounded(find_neighbors, 1) is not find_neighbors
    monkeypatch.setenv("PLL_CACHE_MAX_ROWS", "lots")
    with pytest.raises(pll.errors.PllError, match="PLL_CACHE_MAX_ROWS"):
        bounded(find_neighbors, 1)

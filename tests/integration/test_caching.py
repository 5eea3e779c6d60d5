"""Cache keys from small descriptors of stage inputs; which failures are worth a retry; no planted code runs."""

import json
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from distributed.comm.core import CommClosedError
from distributed.scheduler import KilledWorker
from prefect import flow
from prefect.results import ResultRecord, ResultRecordMetadata
from prefect.serializers import PickleSerializer

import pll
from pll.errors import DataFileError, InvalidParameterError
from pll.experiment import make_split
from pll.preprocessing import featurize
from pll.neighbors import NeighborResult
from pll.noise import apply_noise
from pll_pipeline.cache.store import SignedStore
from pll_pipeline.cache.policy import array_digest, code_version, describe, is_transient
from pll_pipeline.tasks.noise import add_noise

ROOT = Path(__file__).resolve().parents[2]


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


def test_processes_started_by_a_run_key_by_its_code_version_not_by_their_own_look_at_the_tree():
    """Dask workers hashed the tree at their first stage: after an edit in between they disagreed (issue 39)."""
    script = "from cache.policy import code_version; print(code_version())"
    ours = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    assert ours.stdout.strip() == code_version()
    # The version a worker uses is the one it was handed, whatever its tree looks like when it is asked.
    env = {**os.environ, "PLL_CODE_VERSION": "handed-down"}
    handed = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                            check=True)
    assert handed.stdout.strip() == "handed-down"


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

    from pll_pipeline.cache.policy import DEFAULT_CACHE_MAX_ROWS, bounded
    from pll_pipeline.tasks.stages import run_stage as find_neighbors

    cached = bounded(find_neighbors, DEFAULT_CACHE_MAX_ROWS)
    assert cached.persist_result and cached.cache_policy is find_neighbors.cache_policy
    # The folder travels with the task as an absolute path: a worker started elsewhere writes where the command reads.
    assert cached.result_storage.basepath == str(Path(".pll-cache").absolute())
    large = bounded(find_neighbors, DEFAULT_CACHE_MAX_ROWS + 1)
    assert large.persist_result is False and large.cache_policy is NO_CACHE
    monkeypatch.setenv("PLL_CACHE_MAX_ROWS", "0")
    assert bounded(find_neighbors, 1).cache_policy is NO_CACHE
    monkeypatch.setenv("PLL_CACHE_MAX_ROWS", "lots")
    with pytest.raises(pll.errors.PllError, match="PLL_CACHE_MAX_ROWS"):
        bounded(find_neighbors, 1)


# --- The stage cache runs no planted code (issue 14) -------------------------------------------------------------


class Planted:
    """Unpickling this creates ``marker``: the code a planted cache entry would run."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)


def planted_record(marker, entry) -> bytes:
    """A cache entry as Prefect writes one, naming the pickle serializer, whose payload creates ``marker``."""
    metadata = ResultRecordMetadata(serializer=PickleSerializer(), storage_key=str(entry))
    return ResultRecord(result=Planted(marker), metadata=metadata).serialize()


@flow
def noise_stage(seed: int):
    """The real noise stage, with its cache configuration, on iris: its state's name and its result."""
    state = add_noise(pll.load_dataset("iris"), "class_dependent", None, seed, return_state=True)
    return state.name, state.result()


@pytest.fixture
def cache_dir(tmp_path, monkeypatch, prefect_harness):
    """The stage cache's default folder, ``.pll-cache``, in a fresh working directory; a fresh user key."""
    if os.environ.get("PLL_CACHE_DIR"):
        pytest.skip("PLL_CACHE_DIR is set: the test would plant entries in it")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / ".pll-cache"


def right_bags(ds, seed):
    expected = apply_noise(pll.load_dataset("iris"), "class_dependent", None, seed)
    return isinstance(ds, pll.PartialLabelDataset) and np.array_equal(ds.S, expected.S)


def cache_warnings(caplog):
    return [r for r in caplog.records if r.name == "pll_pipeline.cache.store" and r.levelno == logging.WARNING]


def test_a_planted_entry_runs_nothing_and_the_stage_recomputes(cache_dir, tmp_path):
    name, ds = noise_stage(3)
    assert name == "Completed" and right_bags(ds, 3)
    [entry] = list(cache_dir.iterdir())  # where the stage reads its output
    marker = tmp_path / "planted-code-ran"
    planted = planted_record(marker, entry)
    entry.write_bytes(planted)

    name, ds = noise_stage(3)
    assert not marker.exists()
    assert name == "Completed" and right_bags(ds, 3)  # recomputed, not served from the planted entry
    assert entry.read_bytes() != planted
    name, ds = noise_stage(3)
    assert name == "Cached" and right_bags(ds, 3)  # the entry was replaced by a genuine one
    assert not marker.exists()


def test_a_genuine_entry_is_private_and_still_hits(cache_dir, tmp_path):
    assert noise_stage(4)[0] == "Completed"
    name, ds = noise_stage(4)
    assert name == "Cached" and right_bags(ds, 4)
    [entry] = list(cache_dir.iterdir())
    key = tmp_path / "config" / "pll" / "cache.key"
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600 and stat.S_IMODE(key.stat().st_mode) == 0o600


@pytest.mark.parametrize("mode", [0o770, 0o777], ids=["group", "others"])
def test_a_cache_directory_others_can_write_is_refused(cache_dir, caplog, mode):
    cache_dir.mkdir()
    cache_dir.chmod(mode)
    for _ in range(2):
        name, ds = noise_stage(5)
        assert name == "Completed" and right_bags(ds, 5)  # uncached, not failed
    assert list(cache_dir.iterdir()) == []
    [warning] = cache_warnings(caplog)
    assert str(cache_dir) in warning.getMessage() and "chmod go-w" in warning.getMessage()


def test_an_entry_serves_only_the_key_it_was_written_for(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    store = SignedStore(basepath=str(tmp_path / "cache"))
    store.write_path("a", b"record of a")
    assert store.read_path("a") == b"record of a"
    (tmp_path / "cache" / "b").write_bytes((tmp_path / "cache" / "a").read_bytes())
    with pytest.raises(ValueError, match="not signed"):
        store.read_path("b")
    (tmp_path / "cache" / "c").symlink_to(tmp_path / "cache" / "a")
    with pytest.raises(OSError):
        store.read_path("c")


def test_a_key_others_can_read_is_refused(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    store = SignedStore(basepath=str(tmp_path / "cache"))
    store.write_path("a", b"record")
    key = tmp_path / "config" / "pll" / "cache.key"
    key.chmod(0o644)
    with pytest.raises(ValueError, match="not private"):
        store.read_path("a")
    store.write_path("b", b"record")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["a"]
    [warning] = cache_warnings(caplog)
    assert str(key) in warning.getMessage() and "mode 644" in warning.getMessage()


def test_a_cache_on_a_full_disk_costs_one_warning_and_leaves_no_file(cache_dir, caplog, monkeypatch):
    """Every write lands on /dev/full (ENOSPC): the stages run on, uncached, and no partial entry is left."""
    import pll_pipeline.cache.store as cache_store

    def full_disk(file, mode="r", *args, **kwargs):
        return open("/dev/full" if "w" in mode else file, mode, *args, **kwargs)

    cache_store.secret_key()  # made before the disk filled up
    monkeypatch.setattr(cache_store, "open", full_disk, raising=False)  # the module's writes, not pytest's
    for _ in range(2):
        name, ds = noise_stage(6)
        assert name == "Completed" and right_bags(ds, 6)  # recomputed: nothing was stored
    assert [p for p in cache_dir.rglob("*") if p.is_file()] == []
    [warning] = cache_warnings(caplog)
    assert str(cache_dir) in warning.getMessage() and "No space left on device" in warning.getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_prune_deletes_the_least_recently_used_entries_and_nothing_else(tmp_path, monkeypatch):
    """``pll cache --older-than/--max-gb``: reading an entry makes it recent; a file not written as an entry stays."""
    import time

    from pll_pipeline.cache.store import entries, prune

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    store = SignedStore(basepath=str(tmp_path / "cache"))
    for i, name in enumerate("abcd"):
        store.write_path(name, bytes(1000 * (i + 1)))
        os.utime(tmp_path / "cache" / name, (time.time() - 86400 * (10 - i),) * 2)  # a: 10 days unused ... d: 7
    (tmp_path / "cache" / "notes.txt").write_text("not an entry")
    store.read_path("a")  # a read: now the most recently used
    assert [e.path.name for e in entries(tmp_path / "cache")] == ["b", "c", "d", "a"]
    assert [e.path.name for e in prune(tmp_path / "cache", older_than_days=7.5)] == ["b", "c"]
    sizes = {e.path.name: e.size for e in entries(tmp_path / "cache")}
    assert [e.path.name for e in prune(tmp_path / "cache", max_bytes=sizes["a"])] == ["d"]
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["a", "notes.txt"]
    assert prune(tmp_path / "missing", older_than_days=0) == []


def test_pll_cache_reports_and_prunes_the_folder_runs_use(tmp_path, monkeypatch, capsys):
    from pll_pipeline.cache import policy
    from pll_pipeline.flows.cli import main

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setattr(policy.RESULT_STORE, "basepath", str(tmp_path / "cache"))
    store = SignedStore(basepath=str(tmp_path / "cache"))
    for name in "ab":
        store.write_path(name, bytes(2_000_000))
    assert main(["cache"]) == 0
    assert capsys.readouterr().out.startswith(f"Stage cache {tmp_path / 'cache'}: 2 entries, 0.00 GB")
    assert main(["cache", "--max-gb", "0.003"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "Deleted 1 entries, 0.00 GB"
    assert len(list((tmp_path / "cache").iterdir())) == 1
    assert main(["cache", "--older-than", "-1"]) == 2
    assert capsys.readouterr().err == "pll: error: --older-than must be a non-negative number, got -1.0\n"

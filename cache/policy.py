"""Caching and retries of pipeline stages.

A stage's cache key is a hash of what determines its result: the data (a
data set by the contents of its arrays, i.e. its fingerprint), the noise
model and seed, the feature pipeline, the kNN backend and its parameters.
Inputs are reduced to small JSON descriptors first — an array becomes a
digest of its bytes — so that nothing large is ever pickled to make a key.
The key also covers the source of the ``pll`` and ``tasks`` packages and
the versions of the key packages: changed code never serves a stale result.

Runs on more than :data:`DEFAULT_CACHE_MAX_ROWS` rows cache nothing (:func:`bounded`).
Results are persisted under ``$PLL_CACHE_DIR``, by default ``.pll-cache`` in
the working directory of the command, which names it to its Dask workers
(:func:`bounded`): entries land where the next run finds them, whichever
folder a worker was started in; workers on other machines need that path on
a shared disk.
Entries are signed with the user's secret key and read only if the signature
verifies, so a file planted there is never deserialized; a cache directory
that others can write is not used (see :mod:`pll_pipeline.cache.store`).

Stages retry transient failures (I/O, network, Dask cluster) with exponential
backoff; a bad input or a bug fails the same way every time and is not retried.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from importlib.util import find_spec
from pathlib import Path

import numpy as np
from prefect.cache_policies import NO_CACHE, CachePolicy
from prefect.tasks import exponential_backoff

from pll.errors import PllError
from pll.experiment.grid import stable_hash
from pll.utils.provenance import package_versions
from pll_pipeline.cache.store import SignedStore

CACHE_DIR_ENV = "PLL_CACHE_DIR"
RESULT_STORE = SignedStore(basepath=os.environ.get(CACHE_DIR_ENV) or ".pll-cache")
HASHED_PACKAGES = ("pll", "pll_pipeline.tasks")
# Fields and options that say how long a stage took or where it ran, not what it computed.
NOT_CONTENT = frozenset({"timings", "address"})


def array_digest(a: np.ndarray) -> str:
    """A digest of an array's dtype, shape and bytes."""
    a = np.ascontiguousarray(a)
    h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
    if a.dtype.hasobject:
        h.update(json.dumps([str(v) for v in a.ravel()]).encode())
    else:
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()[:32]


def describe(value, name: str = "value"):
    """A small JSON-able descriptor of a stage input: equal descriptors, equal results.

    Arrays become digests, dataclasses (data sets, splits, neighbor results)
    the descriptors of their fields; entries named in :data:`NOT_CONTENT` are
    left out.  Raises TypeError, naming ``name``, for a
    type it cannot describe — Prefect then runs the stage without caching.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
        return value.item() if isinstance(value, np.generic) else value
    if isinstance(value, np.ndarray):
        return {"array": array_digest(value)}
    if isinstance(value, dict):
        return {str(k): describe(v, f"{name}.{k}") for k, v in value.items() if k not in NOT_CONTENT}
    if isinstance(value, (list, tuple)):
        return [describe(v, f"{name}[{i}]") for i, v in enumerate(value)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            f.name: describe(getattr(value, f.name), f"{name}.{f.name}")
            for f in dataclasses.fields(value)
            if f.name not in NOT_CONTENT
        }
        return {"type": type(value).__qualname__, **fields}
    raise TypeError(f"cache key: cannot describe input {name!r} of type {type(value).__qualname__}")


CODE_VERSION_ENV = "PLL_CODE_VERSION"


def code_version() -> str:
    """A hash of the sources of :data:`HASHED_PACKAGES` and the key package versions, the same in every process
    of a run.

    Hashed once, when this module is first imported, and passed on in
    ``$PLL_CODE_VERSION`` to the processes started later (the Dask workers of
    a LocalCluster): a worker that hashed the tree itself, at its first stage,
    keyed its entries by the tree of that moment, and where the files changed
    between two workers' first stages (an edit, a checkout) the next run's
    stage on the other worker missed the entry (issue 39: 1 of 4 in a loaded
    grid re-run).  Workers started elsewhere hash their own tree.
    """
    version = os.environ.get(CODE_VERSION_ENV)
    if not version:
        version = os.environ[CODE_VERSION_ENV] = _hash_sources()
    return version


def _hash_sources() -> str:
    h = hashlib.sha256(json.dumps(package_versions(), sort_keys=True).encode())
    for package in HASHED_PACKAGES:
        root = Path(find_spec(package).origin).parent  # the checkout's folder, or the installed one
        for path in sorted(root.rglob("*.py")):
            h.update(f"{package}/{path.relative_to(root).as_posix()}".encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:32]


code_version()


@dataclasses.dataclass
class StageInputs(CachePolicy):
    """Prefect cache policy: the task's name, the descriptors of its inputs, the code version."""

    def compute_key(self, task_ctx, inputs, flow_parameters, **kwargs):
        described = {name: describe(value, name) for name, value in (inputs or {}).items()}
        return stable_hash({"task": task_ctx.task.name, "inputs": described, "code": code_version()}, length=64)


def lineage_keys(protocol, inputs: dict) -> dict:
    """The cache key of every value of ``protocol`` (:class:`pll.experiment.Protocol`).

    An input (the loaded data set) is keyed by its content; a stage's value by
    its declaration and the keys of the values it reads.  Equal keys, equal
    values — and no stage hashes the arrays it reads, nor needs to describe
    a value such as a fitted model.
    """
    keys = {name: stable_hash(describe(value, name), length=64) for name, value in inputs.items()}
    for stage in protocol.stages:
        keys[stage.writes] = stable_hash({"stage": describe(stage, stage.label),
                                          "reads": [keys[name] for name in stage.reads]}, length=64)
    return keys


@dataclasses.dataclass
class Lineage(CachePolicy):
    """Prefect cache policy of a declared stage: the task's name, its ``lineage`` key, the code version."""

    def compute_key(self, task_ctx, inputs, flow_parameters, **kwargs):
        return stable_hash({"task": task_ctx.task.name, "lineage": inputs["lineage"], "code": code_version()},
                           length=64)


CACHE_MAX_ROWS_ENV = "PLL_CACHE_MAX_ROWS"
DEFAULT_CACHE_MAX_ROWS = 200_000
"""Runs on data sets with more rows do not cache stage outputs (``$PLL_CACHE_MAX_ROWS`` overrides; 0: never
cache): the cache stays bounded by what small runs write.  At 1,000,000 rows one run's outputs (two neighbor
sets of up to 50 neighbors, three methods with two reject options) would take several GB, and a re-run of
that size is a new experiment far more often than a repeat."""


def cache_max_rows() -> int:
    """The row limit of caching, from the environment or :data:`DEFAULT_CACHE_MAX_ROWS`."""
    text = os.environ.get(CACHE_MAX_ROWS_ENV)
    if text is None:
        return DEFAULT_CACHE_MAX_ROWS
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise PllError(f"{CACHE_MAX_ROWS_ENV} must be a non-negative whole number of rows, got {text!r}")
    return value


def uncached(stage):
    """``stage`` without cache and result files."""
    return stage.with_options(cache_policy=NO_CACHE, persist_result=False)


def bounded(stage, n_rows: int):
    """``stage`` (a cached task) caching in this command's folder, or without cache and result files for more than
    :func:`cache_max_rows` rows.

    The folder is resolved here, in the command's process, and travels with the task: a Dask worker started
    in another folder, or on another machine, writes its entries where this command and the next one read
    them (on another machine: at the same path, which must then be a shared disk), not into its own.
    """
    if n_rows > cache_max_rows():
        return uncached(stage)
    return stage.with_options(result_storage=SignedStore(basepath=str(Path(RESULT_STORE.basepath).absolute())))


def is_transient(exc) -> bool:
    """A failure of the machine, the network or the Dask cluster, which a retry may not meet again.

    Anything else -- a bad input (:class:`~pll.errors.PllError`), a bug --
    would fail the same way every time.
    """
    if isinstance(exc, PllError):
        return False
    return isinstance(exc, OSError) or type(exc).__module__.partition(".")[0] == "distributed"


def retry_if_transient(task, task_run, state) -> bool:
    return is_transient(state.data)


# Keyword arguments of ``@task`` for a stage whose result is cached by its inputs ...
CACHED = {"cache_policy": StageInputs(), "persist_result": True, "result_storage": RESULT_STORE}
# ... for a declared stage of the run protocol, cached by its lineage ...
CACHED_BY_LINEAGE = {**CACHED, "cache_policy": Lineage()}
# ... and for any stage that should retry transient failures with backoff.
RETRIES = {
    "retries": 2,
    "retry_delay_seconds": exponential_backoff(backoff_factor=2),
    "retry_jitter_factor": 0.5,
    "retry_condition_fn": retry_if_transient,
}

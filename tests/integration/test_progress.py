"""Progress of long row loops (pll.utils.progress): the library's real block loops, a collecting callback, a test clock.

The last test runs ``pll run`` as a user would, in a fresh process with a real temporary Prefect
server, and reads the progress lines on its console.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pll
from pll.data.synthetic import make_partial_label_table
from pll.errors import InvalidParameterError
from pll.utils import progress
from pll.neighbors import exact, grouped, nearest_by_group
from pll.utils.progress import MIN_ROWS_ENV, Progress, Stopped, blocks, duration, reporting, track, track_in_parallel

ROOT = Path(__file__).resolve().parents[2]


def ticking(step=1.0):
    """A clock that moves ``step`` seconds at every reading."""
    return itertools.count(0.0, step).__next__


def collect(**options):
    """A list that ``reporting`` fills with every Progress, and the context manager."""
    found = []
    return found, reporting(found.append, **{"min_rows": 1, "every_seconds": 0.0, "clock": ticking(), **options})


def check_run(found, what, total):
    """The lines of one loop: counts rising to ``total`` and a rate at every line."""
    mine = [p for p in found if p.what == what]
    assert mine, f"no progress of {what!r} in {[p.what for p in found]}"
    done = [p.done for p in mine]
    assert done == sorted(set(done)) and done[-1] == total
    assert all(p.total == total and p.rate > 0 for p in mine)
    return mine


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(600, 4)), rng.normal(size=(450, 4))


def test_exact_search_reports_each_block_and_finds_the_same_neighbors(data, monkeypatch):
    X, Q = data
    monkeypatch.setattr(exact, "_BLOCK_BYTES", 8 * 14 * 4 * 100)  # 100 queries per block at k=5
    quiet = exact.ExactIndex(X).search(Q, 5)
    found, listening = collect()
    with listening:
        loud = exact.ExactIndex(X).search(Q, 5)
    mine = check_run(found, "exact search", 450)
    assert [p.done for p in mine] == [100, 200, 300, 400, 450]
    np.testing.assert_array_equal(loud[0], quiet[0])
    np.testing.assert_array_equal(loud[1], quiet[1])


def test_grouped_search_reports(data, monkeypatch):
    X, Q = data
    groups = np.arange(X.shape[0]) % 3
    monkeypatch.setattr(grouped, "_BLOCK_BYTES", 4 * 4096 * 50)  # about 50 queries per block of 4,096 slots
    quiet = nearest_by_group(X, groups, 3, Q)
    found, listening = collect()
    with listening:
        loud = nearest_by_group(X, groups, 3, Q)
    assert len(check_run(found, "exact search per group", 450)) > 1
    np.testing.assert_array_equal(loud[0], quiet[0])


def test_method_predictions_and_disambiguation_report(data, monkeypatch):
    X, Q = data
    S = np.random.default_rng(1).random((X.shape[0], 5)) < 0.4
    S[np.arange(X.shape[0]), np.arange(X.shape[0]) % 5] = True
    monkeypatch.setattr(progress, "BLOCK_BYTES", 8 * (10 + 3 * 5) * 64)  # DST-PLL: 64 rows per block
    clf = pll.DstPll(n_neighbors=10, random_state=0).fit(X, S)
    quiet = clf.predict_with_reject(Q)
    found, listening = collect()
    with listening:
        loud = clf.predict_with_reject(Q)
        clf.disambiguate()
    assert len(check_run(found, "DstPll predictions", 450)) == 8
    check_run(found, "DstPll disambiguation", 600)
    for name in ("labels", "accept", "score", "guess", "beliefs", "plausibilities"):
        np.testing.assert_array_equal(getattr(loud, name), getattr(quiet, name))


def test_loops_below_min_rows_report_only_when_they_run_long(data):
    X, Q = data
    found, listening = collect(min_rows=451, every_seconds=20.0)  # the clock moves 1 s per block
    with listening:
        exact.ExactIndex(X).search(Q, 5)  # 450 queries in one block
        for _ in track(blocks(451, 100), "long enough"):
            pass
        for _ in track(blocks(300, 10), "small but slow"):  # 30 blocks: 30 s
            pass
    assert [(p.what, p.done) for p in found] == [("long enough", 451), ("small but slow", 200), ("small but slow", 300)]


def test_min_rows_comes_from_the_environment(monkeypatch):
    found = []
    monkeypatch.delenv(MIN_ROWS_ENV, raising=False)
    with reporting(found.append):
        list(track(blocks(99_999, 1000), "default threshold"))
    assert found == []
    monkeypatch.setenv(MIN_ROWS_ENV, "500")
    with reporting(found.append):
        list(track(blocks(499, 100), "below"))
        list(track(blocks(500, 100), "at the threshold"))
    assert {p.what for p in found} == {"at the threshold"}
    monkeypatch.setenv(MIN_ROWS_ENV, "many")
    with pytest.raises(InvalidParameterError, match=f"{MIN_ROWS_ENV} must be a non-negative whole number"):
        with reporting(found.append):
            pass


def test_rate_and_time_left_come_from_the_clock():
    found = []
    with reporting(found.append, min_rows=1, every_seconds=25, clock=ticking(10.0)):
        for _ in track(blocks(1000, 100), "rows"):  # 10 s per block of 100 rows
            pass
    assert [(p.done, p.seconds) for p in found] == [(300, 30.0), (600, 60.0), (900, 90.0), (1000, 100.0)]
    assert found[0].rate == 10.0 and found[0].seconds_left == 70.0
    assert [str(p) for p in found] == [
        "rows: 300 / 1,000 rows (30%), 10 rows/s, about 1 min left",
        "rows: 600 / 1,000 rows (60%), 10 rows/s, about 40 s left",
        "rows: 900 / 1,000 rows (90%), 10 rows/s, about 10 s left",
        "rows: 1,000 / 1,000 rows (100%), 10 rows/s, done in 2 min",
    ]


def test_line_wording():
    assert str(Progress("neighbors", 420_000, 1_000_000, 135.0)) == (
        "neighbors: 420,000 / 1,000,000 rows (42%), 3,111 rows/s, about 3 min left"
    )
    assert str(Progress("x", 0, 10, 0.0)) == "x: 0 / 10 rows (0%)"  # the clock has not moved: no rate
    assert [duration(s) for s in (0.4, 59, 89, 3599, 3900, 7260)] == ["0 s", "59 s", "1 min", "1 h 0 min",
                                                                     "1 h 5 min", "2 h 1 min"]


def test_a_loop_inside_a_reporting_loop_stays_quiet():
    found, listening = collect()
    with listening:
        for _ in track(blocks(300, 100), "outer"):
            for _ in track(blocks(200, 50), "inner"):
                pass
        for _ in track(blocks(200, 100), "after"):
            pass
    assert [(p.what, p.done) for p in found] == [("outer", 100), ("outer", 200), ("outer", 300), ("after", 100),
                                                  ("after", 200)]


def test_loops_side_by_side_in_threads_that_share_a_listener_each_report():
    import threading
    from concurrent.futures import ThreadPoolExecutor
    from contextvars import copy_context

    found, listening = collect()
    both_inside = threading.Barrier(2, timeout=10)

    def loop(name):
        for i, _ in enumerate(track(blocks(200, 100), name)):
            if i == 0:
                both_inside.wait()  # each loop is running when the other reports

    with listening, ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(copy_context().run, loop, name) for name in ("left", "right")]:
            future.result()
    assert sorted((p.what, p.done) for p in found) == [("left", 100), ("left", 200), ("right", 100), ("right", 200)]


def test_no_listener_no_work():
    row_slices = blocks(10**6, 1000)
    assert list(track(row_slices, "unheard")) == row_slices  # wrapped only to hear a stop request
    found, listening = collect()
    with listening:
        pass
    assert list(track(row_slices, "after the block")) == row_slices
    assert found == []  # the block's listener left with the block


def test_pll_run_shows_progress_on_the_console(tmp_path, prefect_api_url):
    table = make_partial_label_table(3000, n_features=8, n_classes=5, random_state=0)
    table.to_parquet(tmp_path / "rows.parquet")
    env = {**os.environ, MIN_ROWS_ENV: "1000", "PREFECT_HOME": str(tmp_path / "prefect-home"),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PLL_CACHE_DIR": str(tmp_path / "cache"),
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}", "PREFECT_API_URL": prefect_api_url}
    done = subprocess.run(
        # A task per stage (a run this small is otherwise one task): each stage's lines carry its own name.
        [str(Path(sys.executable).parent / "pll"), "run", "--dataset", str(tmp_path / "rows.parquet"), "--methods",
         "pl_knn", "--knn", "exact", "--stage-tasks", "yes"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    console = done.stdout + done.stderr
    assert done.returncode == 0, console[-6000:]
    lines = re.findall(r"Task run '([\w-]+)' - (.+?): ([\d,]+) / ([\d,]+) rows \((\d+)%\)(.*)", console)
    # 3,000 rows: 2,400 training rows (1,920 fitting, 480 validation), 600 test rows; at most 1,000 stay quiet.
    seen = {(task, what, total) for task, what, _, total, _, _ in lines}
    assert ("neighbors-minmax", "exact search", "2,400") in seen, console[-6000:]
    assert ("method-pl_knn", "PlKnn disambiguation", "2,400") in seen
    assert all(int(total.replace(",", "")) >= 1000 for _, _, _, total, _, _ in lines)
    assert all(done_ == total and pct == "100" and "done in" in rest for _, _, done_, total, pct, rest in lines)


def test_a_stop_request_ends_every_loop_between_two_blocks():
    """Loops of any size ask ``stop`` before each block, and nested loops too; without it, no question asked."""
    done, asked = [], []

    def stop():
        asked.append(len(done))
        return len(done) >= 3

    with reporting(lambda p: None, min_rows=10**9, stop=stop):
        with pytest.raises(Stopped, match="tiny: stopped at row 3"):
            for rows in track(blocks(10, 1), "tiny"):
                done.append(rows.start)
    assert done == [0, 1, 2] and asked == [0, 1, 2, 3]
    with reporting(lambda p: None, min_rows=1, stop=lambda: True):
        with pytest.raises(Stopped):
            for _ in track(blocks(4, 2), "outer"):
                pass


def test_parallel_blocks_run_once_each_on_single_threaded_blas_and_count_only_when_finished():
    """track_in_parallel: every block once, BLAS at one thread inside, progress never ahead of the finished blocks."""
    from threadpoolctl import threadpool_info

    finished, blas_threads, lines = [], set(), []

    def work(rows):
        blas_threads.update(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")
        np.linalg.inv(np.eye(50) * (rows.start + 1))  # some real BLAS work
        finished.append(rows.start)

    with reporting(lambda p: lines.append((p.done, len(finished))), min_rows=1, every_seconds=0.0, clock=ticking()):
        track_in_parallel(work, blocks(1000, 100), "blocks", threads=2)
    assert sorted(finished) == list(range(0, 1000, 100))
    assert blas_threads == {1}
    assert [done for done, _ in lines] == list(range(100, 1001, 100))
    assert all(done <= 100 * n_finished for done, n_finished in lines)  # each line after its blocks had finished


def test_a_parallel_loop_raises_its_blocks_error_and_stops_when_asked():
    def work(rows):
        if rows.start == 3:
            raise ValueError("block 3 is bad")

    with pytest.raises(ValueError, match="block 3 is bad"):
        track_in_parallel(work, blocks(8, 1), "failing", threads=2)
    started = []
    with reporting(lambda p: None, min_rows=10**9, stop=lambda: len(started) >= 4):
        with pytest.raises(Stopped, match="stopped at row"):
            track_in_parallel(started.append, blocks(100, 1), "stopped", threads=2)
    assert len(started) < 10  # it stopped within a few blocks of being asked, not at the end


@pytest.fixture
def stage_kinds(monkeypatch):
    """Register stage kinds for a test's own protocol; nothing cached (the cache would outlive the test)."""
    from pll.experiment import _stages as stages

    monkeypatch.setenv("PLL_CACHE_MAX_ROWS", "0")
    return lambda **functions: [monkeypatch.setitem(stages.FUNCTIONS, k, f) for k, f in functions.items()]


def test_a_failed_stage_stops_the_stages_still_running(prefect_harness, stage_kinds):
    """The pipeline's wait raises the failed stage's own error; a running stage stops at its next block."""
    import time

    from prefect import flow

    from pll_pipeline.flows.pipeline import submit_protocol
    from pll.errors import InvalidDataError
    from pll.experiment import Protocol, Stage

    ran = []

    def long_stage(raw):
        for rows in track(blocks(2_000, 1), "long stage"):
            ran.append(rows.start)
            time.sleep(0.05)

    def failing_stage(raw):
        while len(ran) < 5:  # fail while the long stage is under way
            time.sleep(0.05)
        raise InvalidDataError("row 3 of the input is bad")

    stage_kinds(long=long_stage, failing=failing_stage)
    protocol = Protocol((Stage("long", "a", ("raw",), {}), Stage("failing", "b", ("raw",), {})))

    @flow
    def two_stages():
        return submit_protocol(protocol, pll.load_dataset("iris"))

    state = two_stages(return_state=True)
    assert state.is_failed()
    with pytest.raises(InvalidDataError, match="row 3 of the input is bad"):
        state.result()
    assert 5 <= len(ran) < 2_000  # stopped, not run to its end


def test_pl_aknn_preprocessing_reports_its_smoothing_and_stops_when_asked(data, monkeypatch):
    """The smoothing loop (minutes at 1M rows) reports each block and ends at the next block after a stop request."""
    X, _ = data
    monkeypatch.setattr(progress, "BLOCK_BYTES", 8 * 10 * 4 * 100)  # 100 rows per block at smooth_k=10, 4 features
    quiet = pll.PlAknnPreprocessor(smooth_k=10, density_k=20).fit_transform(X)
    found, listening = collect()
    with listening:
        loud = pll.PlAknnPreprocessor(smooth_k=10, density_k=20).fit_transform(X)
    assert [p.done for p in check_run(found, "PlAknnPreprocessor smoothing", 600)] == [100, 200, 300, 400, 500, 600]
    np.testing.assert_array_equal(loud, quiet)

    lines = []
    smoothing_reported = lambda: any(p.what == "PlAknnPreprocessor smoothing" for p in lines)  # noqa: E731
    with reporting(lines.append, min_rows=1, every_seconds=0.0, clock=ticking(), stop=smoothing_reported):
        with pytest.raises(Stopped, match="PlAknnPreprocessor smoothing: stopped at row 100"):
            pll.PlAknnPreprocessor(smooth_k=10, density_k=20).fit(X)


def test_a_stage_starts_when_its_inputs_are_ready_not_when_every_stage_of_a_wave_is(prefect_harness, stage_kinds):
    """A stage waiting on a slow, unrelated one does not hold back another chain of the protocol."""
    import threading

    from prefect import flow

    from pll_pipeline.flows.pipeline import submit_protocol
    from pll.experiment import Protocol, Stage

    second_ran = threading.Event()
    stage_kinds(slow=lambda raw: second_ran.wait(timeout=120),  # True only if the other chain's second stage ran
                first=lambda raw: raw.n_rows + 1, second=lambda x: (second_ran.set(), 10 * x)[1],
                join=lambda slow, chain: (slow, chain))
    protocol = Protocol((Stage("slow", "slow", ("raw",), {}), Stage("first", "x", ("raw",), {}),
                         Stage("second", "y", ("x",), {}), Stage("join", "result", ("slow", "y"), {})))

    @flow
    def chains():
        return submit_protocol(protocol, pll.load_dataset("iris"))

    assert chains() == (True, 1510)
